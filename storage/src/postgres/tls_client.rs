//! The client certificate of a PostgreSQL connection (mutual TLS), from libpq's `sslcert` and
//! `sslkey` parameters.
//!
//! As in libpq: `sslcert=PATH` (PEM: the certificate, then any intermediates) and
//! `sslkey=PATH` (PEM, unencrypted: PKCS#8, PKCS#1 or SEC1), else `PGSSLCERT` / `PGSSLKEY`,
//! else `~/.postgresql/postgresql.crt` and `~/.postgresql/postgresql.key` when the certificate
//! file exists. A key file others can read is refused (libpq's rule: no group or world access
//! when we own it, at most group read when root does). Unlike libpq, a certificate named
//! explicitly that does not exist is an error rather than silently not sent.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Env vars libpq reads when the URL has no such parameter.
pub(crate) const ENV_SSLCERT: &str = "PGSSLCERT";
pub(crate) const ENV_SSLKEY: &str = "PGSSLKEY";

/// Where the client certificate and key were named, if anywhere.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientCertPaths {
    /// `sslcert=` or `PGSSLCERT`.
    pub cert: Option<PathBuf>,
    /// `sslkey=` or `PGSSLKEY`.
    pub key: Option<PathBuf>,
}

/// A certificate chain and its key, ready for rustls.
pub(crate) type ClientCert = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

fn home_file(name: &str) -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".postgresql").join(name))
}

/// The client certificate to present, if one is configured.
pub(crate) fn load_client_cert(paths: &ClientCertPaths) -> Result<Option<ClientCert>, String> {
    let cert_path = match &paths.cert {
        Some(path) => {
            if !path.is_file() {
                return Err(format!("sslcert {}: no such file", path.display()));
            }
            path.clone()
        }
        None => match home_file("postgresql.crt").filter(|p| p.is_file()) {
            Some(path) => path,
            None => return Ok(None),
        },
    };
    let shown = cert_path.display();
    let chain = CertificateDer::pem_file_iter(&cert_path)
        .map_err(|e| format!("sslcert {shown}: {e}"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("sslcert {shown}: {e}"))?;
    if chain.is_empty() {
        return Err(format!("sslcert {shown}: no certificate in it"));
    }
    let key_path = paths
        .key
        .clone()
        .or_else(|| home_file("postgresql.key"))
        .ok_or_else(|| format!("sslcert {shown} is given but no sslkey"))?;
    check_key_access(&key_path)?;
    let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|e| {
        format!(
            "sslkey {}: no unencrypted private key in it ({e}; sslpassword is not supported)",
            key_path.display()
        )
    })?;
    Ok(Some((chain, key)))
}

/// libpq's permission rule for private key files.
fn check_key_access(path: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("sslkey {}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("sslkey {}: not a regular file", path.display()));
    }
    let mode = meta.mode() & 0o777;
    let allowed = if meta.uid() == 0 { 0o640 } else { 0o600 };
    if mode & !allowed != 0 {
        return Err(format!(
            "sslkey {}: others can read it (mode {mode:o}); it must be u=rw (0600) or less, \
             or u=rw,g=r (0640) or less if owned by root",
            path.display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_readable_key_is_refused_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let missing = ClientCertPaths {
            cert: Some(dir.path().join("none.crt")),
            key: None,
        };
        let e = load_client_cert(&missing).unwrap_err();
        assert!(e.contains("none.crt"), "{e}");
        let key = dir.path().join("k.key");
        std::fs::write(&key, "x").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = check_key_access(&key).unwrap_err();
        assert!(e.contains("0600"), "{e}");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        check_key_access(&key).unwrap();
    }
}
