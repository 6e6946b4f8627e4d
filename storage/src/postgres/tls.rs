//! TLS for the PostgreSQL store, with rustls, read from libpq's connection parameters.
//!
//! The client library knows `sslmode=disable|prefer|require` and encrypts only; it verifies
//! nothing itself, leaving that to the connector. libpq's meaning is kept:
//!
//! * `disable` — plain TCP; `prefer` (the default) — TLS when the server offers it;
//! * `require` — TLS or no connection; the certificate is not checked, unless a root
//!   certificate is given (`sslrootcert=`), then it is checked as for `verify-ca`;
//! * `verify-ca` — the server's certificate must chain to a trusted root;
//! * `verify-full` — that, and it must name the host connected to (DNS name or IP address).
//!
//! Roots: `sslrootcert=PATH` (PEM, one or more certificates), `sslrootcert=system` (the Mozilla
//! roots built in), else `~/.postgresql/root.crt` as libpq reads it; the verifying modes
//! without any of these fail with a message saying so. `PGSSLMODE` and `PGSSLROOTCERT` apply
//! when the URL does not set them. Channel binding is not offered (SCRAM works without it).
//!
//! A client certificate (`sslcert=`, `sslkey=`, for `pg_hba.conf`'s `cert` method or
//! `clientcert=verify-full`) is presented when configured; see `tls_client.rs`.

use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use postgres::config::SslMode;
use postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};
use postgres::Socket;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::tls_client::{load_client_cert, ClientCertPaths, ENV_SSLCERT, ENV_SSLKEY};

/// Env vars libpq reads when the URL has no such parameter.
const ENV_SSLMODE: &str = "PGSSLMODE";
const ENV_SSLROOTCERT: &str = "PGSSLROOTCERT";

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl TlsMode {
    fn parse(value: &str) -> Result<TlsMode, String> {
        Ok(match value {
            "disable" => TlsMode::Disable,
            // libpq's `allow` tries plain first; encrypting when offered is the safer reading.
            "allow" | "prefer" => TlsMode::Prefer,
            "require" => TlsMode::Require,
            "verify-ca" => TlsMode::VerifyCa,
            "verify-full" => TlsMode::VerifyFull,
            other => return Err(format!("invalid sslmode {other:?} (disable, allow, prefer, require, verify-ca, verify-full)")),
        })
    }

    /// What the client library is told: whether to ask for TLS and whether it must get it.
    pub fn library_mode(self) -> SslMode {
        match self {
            TlsMode::Disable => SslMode::Disable,
            TlsMode::Prefer => SslMode::Prefer,
            TlsMode::Require | TlsMode::VerifyCa | TlsMode::VerifyFull => SslMode::Require,
        }
    }
}

/// Where the trusted roots come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCerts {
    /// `sslrootcert=PATH`.
    File(PathBuf),
    /// `sslrootcert=system`: the Mozilla roots built into this binary.
    System,
    /// Not given: `~/.postgresql/root.crt` when it exists.
    Default,
}

/// The TLS settings of a store URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    pub mode: TlsMode,
    pub roots: RootCerts,
    /// The client certificate and key named by `sslcert`/`sslkey` (or their env vars).
    pub client: ClientCertPaths,
}

/// Takes `sslmode` and `sslrootcert` out of a URL's query (the client library refuses the
/// verifying modes and `sslrootcert`), falling back to `PGSSLMODE` / `PGSSLROOTCERT`. Returns
/// the URL without them and the settings.
pub fn split_tls_params(url: &str) -> Result<(String, TlsSettings), String> {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, query),
        None => (url, ""),
    };
    let mut mode = None;
    let mut root = None;
    let (mut cert, mut key_file) = (None, None);
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "sslmode" => mode = Some(percent_decode(value)),
            "sslrootcert" => root = Some(percent_decode(value)),
            "sslcert" => cert = Some(percent_decode(value)),
            "sslkey" => key_file = Some(percent_decode(value)),
            "sslpassword" => {
                return Err(
                    "sslpassword is not supported: give an unencrypted sslkey (mode 0600)".into(),
                )
            }
            _ => kept.push(pair),
        }
    }
    let mode = mode.or_else(|| std::env::var(ENV_SSLMODE).ok().filter(|v| !v.is_empty()));
    let root = root.or_else(|| {
        std::env::var(ENV_SSLROOTCERT)
            .ok()
            .filter(|v| !v.is_empty())
    });
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let client = ClientCertPaths {
        cert: cert.or_else(|| env(ENV_SSLCERT)).map(|p| expand_home(&p)),
        key: key_file
            .or_else(|| env(ENV_SSLKEY))
            .map(|p| expand_home(&p)),
    };
    let mode = match mode {
        Some(m) => TlsMode::parse(&m)?,
        None => TlsMode::Prefer,
    };
    let roots = match root.as_deref() {
        None => RootCerts::Default,
        Some("system") => RootCerts::System,
        Some(path) => RootCerts::File(expand_home(path)),
    };
    let url = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((
        url,
        TlsSettings {
            mode,
            roots,
            client,
        },
    ))
}

fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// `%XX` escapes decoded (a path in a URL query may carry them).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The connector handed to the client library: one rustls configuration for every connection
/// of a store.
#[derive(Clone)]
pub struct MakeRustlsConnect {
    config: Arc<ClientConfig>,
}

impl std::fmt::Debug for MakeRustlsConnect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MakeRustlsConnect")
    }
}

impl MakeRustlsConnect {
    /// The rustls configuration for `settings`; fails when a verifying mode has no roots or
    /// the root file cannot be read.
    pub fn new(settings: &TlsSettings) -> Result<MakeRustlsConnect, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let roots = load_roots(settings)?;
        let verifier: Arc<dyn ServerCertVerifier> = match (settings.mode, roots) {
            (TlsMode::VerifyFull, Some(roots)) => {
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|e| format!("TLS: {e}"))?
            }
            (TlsMode::VerifyCa | TlsMode::Require, Some(roots)) => Arc::new(AnyName(
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|e| format!("TLS: {e}"))?,
            )),
            (TlsMode::VerifyCa | TlsMode::VerifyFull, None) => {
                return Err(format!(
                    "sslmode={} needs a root certificate: sslrootcert=PATH (PEM), \
                     sslrootcert=system, or ~/.postgresql/root.crt",
                    if settings.mode == TlsMode::VerifyCa {
                        "verify-ca"
                    } else {
                        "verify-full"
                    }
                ))
            }
            (_, _) => Arc::new(Unchecked(provider)),
        };
        let builder = builder
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let config = match load_client_cert(&settings.client)? {
            Some((chain, key)) => builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("TLS client certificate: {e}"))?,
            None => builder.with_no_client_auth(),
        };
        Ok(MakeRustlsConnect {
            config: Arc::new(config),
        })
    }
}

/// The trusted roots the settings name, if any.
fn load_roots(settings: &TlsSettings) -> Result<Option<RootCertStore>, String> {
    let mut store = RootCertStore::empty();
    let file = match &settings.roots {
        RootCerts::System => {
            store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            return Ok(Some(store));
        }
        RootCerts::File(path) => path.clone(),
        RootCerts::Default => {
            let Some(home) = std::env::var_os("HOME") else {
                return Ok(None);
            };
            let path = PathBuf::from(home).join(".postgresql/root.crt");
            if !path.is_file() {
                return Ok(None);
            }
            path
        }
    };
    let shown = file.display();
    let certs = CertificateDer::pem_file_iter(&file)
        .map_err(|e| format!("sslrootcert {shown}: {e}"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("sslrootcert {shown}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("sslrootcert {shown}: no certificate in it"));
    }
    for cert in certs {
        store
            .add(cert)
            .map_err(|e| format!("sslrootcert {shown}: {e}"))?;
    }
    Ok(Some(store))
}

/// `verify-ca`: the chain must be trusted; the name is not checked.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `prefer` / `require` without roots: encrypted, the certificate taken as it is (libpq's
/// behaviour); the handshake signatures are still checked against it.
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

impl MakeTlsConnect<Socket> for MakeRustlsConnect {
    type Stream = RustlsStream;
    type TlsConnect = RustlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> Result<RustlsConnect, io::Error> {
        let name = ServerName::try_from(domain.to_string()).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("TLS: {domain:?} is not a host name: {e}"),
            )
        })?;
        Ok(RustlsConnect {
            config: self.config.clone(),
            name,
        })
    }
}

/// One connection's handshake.
pub struct RustlsConnect {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
}

impl TlsConnect<Socket> for RustlsConnect {
    type Stream = RustlsStream;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<RustlsStream>> + Send>>;

    fn connect(self, stream: Socket) -> Self::Future {
        let connector = tokio_rustls::TlsConnector::from(self.config);
        Box::pin(async move {
            connector
                .connect(self.name, stream)
                .await
                .map(|s| RustlsStream(Box::new(s)))
        })
    }
}

/// An encrypted connection.
pub struct RustlsStream(Box<tokio_rustls::client::TlsStream<Socket>>);

impl TlsStream for RustlsStream {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

impl AsyncRead for RustlsStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for RustlsStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libpq_tls_parameters_come_out_of_the_url() {
        let (url, s) = split_tls_params(
            "postgres://u@h/db?sslmode=verify-full&connect_timeout=5&sslrootcert=%2Ftmp%2Fca.pem",
        )
        .unwrap();
        assert_eq!(url, "postgres://u@h/db?connect_timeout=5");
        assert_eq!(s.mode, TlsMode::VerifyFull);
        assert_eq!(s.roots, RootCerts::File(PathBuf::from("/tmp/ca.pem")));
        let (url, s) =
            split_tls_params("postgres://u@h/db?sslrootcert=system&sslmode=require").unwrap();
        assert_eq!(url, "postgres://u@h/db");
        assert_eq!((s.mode, s.roots), (TlsMode::Require, RootCerts::System));
        assert!(split_tls_params("postgres://h/db?sslmode=sometimes").is_err());
        let (url, s) =
            split_tls_params("postgres://u@h/db?sslcert=%2Fc%2Fme.crt&sslkey=/c/me.key&x=1")
                .unwrap();
        assert_eq!(url, "postgres://u@h/db?x=1");
        assert_eq!(s.client.cert, Some(PathBuf::from("/c/me.crt")));
        assert_eq!(s.client.key, Some(PathBuf::from("/c/me.key")));
        assert!(split_tls_params("postgres://h/db?sslpassword=x").is_err());
    }

    #[test]
    fn verifying_without_roots_says_how_to_give_them() {
        let settings = TlsSettings {
            mode: TlsMode::VerifyFull,
            roots: RootCerts::File(PathBuf::from("/nonexistent/ca.pem")),
            client: ClientCertPaths::default(),
        };
        let e = MakeRustlsConnect::new(&settings).unwrap_err();
        assert!(e.contains("/nonexistent/ca.pem"), "{e}");
    }
}
