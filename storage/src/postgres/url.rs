//! The `postgres://` store spec: parsed once, printed without its password.

use std::fmt;
use std::str::FromStr;

use postgres::Config;

use super::tls::{split_tls_params, MakeRustlsConnect};

/// Env var read for the password when the URL has none (as `psql` does).
pub const ENV_PASSWORD: &str = "PGPASSWORD";

/// A PostgreSQL connection URL (`postgres://user[:password]@host[:port]/db[?params]`).
///
/// `Debug` and `Display` leave the password out, so the spec can appear in messages, logs and
/// the history index's store name; [`PgUrl::config`] has it.
#[derive(Clone, PartialEq, Eq)]
pub struct PgUrl {
    url: String,
}

impl PgUrl {
    /// Whether a store spec names PostgreSQL (`postgres://` or `postgresql://`).
    pub fn is_postgres_spec(spec: &str) -> bool {
        spec.starts_with("postgres://") || spec.starts_with("postgresql://")
    }

    /// Parses and checks a URL; the error says what the client library refused.
    pub fn parse(url: &str) -> Result<PgUrl, String> {
        let (rest, _) = split_tls_params(url)?;
        Config::from_str(&rest).map_err(|e| flatten(&e))?;
        Ok(PgUrl {
            url: url.to_string(),
        })
    }

    /// The client configuration: the URL's settings, the password from `PGPASSWORD` when the
    /// URL has none, and TCP keepalives every 30 s, so a writer whose machine vanished loses
    /// its session lock within minutes rather than the kernel's default two hours. The TLS
    /// parameters (`sslmode`, `sslrootcert`, read by [`super::tls`]) give the connector.
    pub fn config(&self) -> Result<(Config, MakeRustlsConnect), String> {
        let (rest, tls) = split_tls_params(&self.url)?;
        let mut config = Config::from_str(&rest).map_err(|e| flatten(&e))?;
        config.ssl_mode(tls.mode.library_mode());
        let connector = MakeRustlsConnect::new(&tls)?;
        if config.get_password().is_none() {
            if let Ok(password) = std::env::var(ENV_PASSWORD) {
                config.password(password);
            }
        }
        if config.get_application_name().is_none() {
            config.application_name("pi");
        }
        config.keepalives_idle(std::time::Duration::from_secs(30));
        Ok((config, connector))
    }

    /// The URL with any password removed (from the user info and from a `password=` parameter).
    pub fn redacted(&self) -> String {
        let url = &self.url;
        let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
            return url.clone();
        };
        let rest = &url[scheme_end..];
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let authority = &rest[..authority_end];
        let authority = match authority.rfind('@') {
            Some(at) => {
                let user = authority[..at].split(':').next().unwrap_or("");
                format!("{user}{}", &authority[at..])
            }
            None => authority.to_string(),
        };
        let tail = &rest[authority_end..];
        let tail = match tail.split_once('?') {
            Some((path, query)) => {
                let kept: Vec<&str> = query
                    .split('&')
                    .filter(|kv| !kv.starts_with("password="))
                    .collect();
                if kept.is_empty() {
                    path.to_string()
                } else {
                    format!("{path}?{}", kept.join("&"))
                }
            }
            None => tail.to_string(),
        };
        format!("{}{authority}{tail}", &url[..scheme_end])
    }
}

impl fmt::Display for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl fmt::Debug for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PgUrl({})", self.redacted())
    }
}

/// A client error with its causes: the library's own `Display` says only "db error".
pub(crate) fn flatten(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_print() {
        for (given, shown) in [
            ("postgres://u:secret@h:5432/db", "postgres://u@h:5432/db"),
            ("postgresql://u@h/db", "postgresql://u@h/db"),
            (
                "postgres://h/db?password=secret&sslmode=disable",
                "postgres://h/db?sslmode=disable",
            ),
            ("postgres://u:p%40ss@h/db?password=x", "postgres://u@h/db"),
        ] {
            let url = PgUrl::parse(given).unwrap();
            assert_eq!(url.to_string(), shown);
            assert!(!format!("{url:?}").contains("secret"));
        }
    }

    #[test]
    fn bad_urls_are_refused() {
        assert!(PgUrl::parse("postgres://h:notaport/db").is_err());
    }
}
