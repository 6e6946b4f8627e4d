//! The PostgreSQL store over TLS, against a real server started with `ssl=on` and a
//! certificate for `localhost` signed by a root made in the test (`pg_server::pg_tls_server`):
//! `sslmode=require` encrypts (the server says so in `pg_stat_ssl`), `verify-full` checks the
//! chain against `sslrootcert=` and the host name, `verify-ca` only the chain, and a server
//! without TLS is refused where TLS is required.

use pi_storage::{FsyncPolicy, PgUrl, PostgresStore, SessionStore};

use super::conformance::{header, line};
use super::pg_server::{pg_server, pg_tls_server, PgTlsServer};

/// A URL for the TLS server: `host` as given (`localhost` reaches 127.0.0.1 through
/// `hostaddr`), database `postgres`, the extra query `params`.
fn url(server: &PgTlsServer, host: &str, params: &str) -> String {
    format!(
        "postgres://postgres@{host}:{}/postgres?hostaddr=127.0.0.1&application_name=pi-tls-test&{params}",
        server.server.port()
    )
}

fn open(url: &str) -> Result<PostgresStore, String> {
    let url = PgUrl::parse(url)?;
    PostgresStore::open(&url, FsyncPolicy::default()).map_err(|e| e.to_string())
}

/// Whether every connection of the test's application uses TLS, as the server sees it.
fn connections_encrypted(server: &PgTlsServer) -> (i64, i64) {
    let plain = format!(
        "postgres://postgres@127.0.0.1:{}/postgres",
        server.server.port()
    );
    let mut admin = postgres::Client::connect(&plain, postgres::NoTls).unwrap();
    let row = admin
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE s.ssl) FROM pg_stat_activity a
             JOIN pg_stat_ssl s ON s.pid = a.pid WHERE a.application_name = 'pi-tls-test'",
            &[],
        )
        .unwrap();
    (row.get(0), row.get(1))
}

/// Stores and reads a session back: the connection really works.
fn round_trip(store: &PostgresStore, id: &str) {
    let h = header(id, "/tls");
    let lines = vec![line(&format!(
        r#"{{"type":"message","id":"{id}-1","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"over TLS","timestamp":1}}}}"#
    ))];
    drop(store.create_session(&h, &lines).unwrap());
    assert_eq!(store.read_session(h.id()).unwrap().entries, lines);
}

#[test]
fn require_encrypts_the_connection() {
    let Some(server) = pg_tls_server() else {
        return;
    };
    let store = open(&url(server, "127.0.0.1", "sslmode=require")).unwrap();
    round_trip(&store, "tls-require");
    let (connections, encrypted) = connections_encrypted(server);
    assert!(connections >= 1);
    assert_eq!(
        encrypted, connections,
        "every connection of the store is TLS"
    );
    drop(store);
}

#[test]
fn verify_full_checks_the_root_and_the_host_name() {
    let Some(server) = pg_tls_server() else {
        return;
    };
    let root = server.root.display().to_string();
    let other = server.other_root.display().to_string();

    // The root that signed the certificate, the name in it: connected, encrypted.
    let store = open(&url(
        server,
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={root}"),
    ))
    .unwrap();
    round_trip(&store, "tls-verify-full");
    let (connections, encrypted) = connections_encrypted(server);
    assert_eq!(encrypted, connections);
    drop(store);

    // A root that did not sign it: refused, and the message says why.
    let err = open(&url(
        server,
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={other}"),
    ))
    .unwrap_err();
    assert!(
        err.contains("UnknownIssuer") || err.contains("unknown issuer"),
        "{err}"
    );

    // The right root but an address the certificate does not name: refused by verify-full,
    // accepted by verify-ca (the chain only).
    let err = open(&url(
        server,
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={root}"),
    ))
    .unwrap_err();
    assert!(
        err.contains("NotValidForName") || err.contains("not valid for name"),
        "{err}"
    );
    let store = open(&url(
        server,
        "127.0.0.1",
        &format!("sslmode=verify-ca&sslrootcert={root}"),
    ))
    .unwrap();
    round_trip(&store, "tls-verify-ca");

    // Verifying without any root is refused before connecting, saying how to give one.
    let err = open(&url(
        server,
        "localhost",
        "sslmode=verify-full&sslrootcert=/nonexistent/root.crt",
    ))
    .unwrap_err();
    assert!(err.contains("/nonexistent/root.crt"), "{err}");
}

#[test]
fn tls_required_from_a_server_without_it_is_refused() {
    let Some(plain) = pg_server() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let base = plain.database_url(dir.path());
    let err = open(&format!("{base}?sslmode=require")).unwrap_err();
    assert!(
        err.to_lowercase().contains("tls") || err.contains("SSL"),
        "{err}"
    );
    // `prefer` (the default) falls back to plain TCP there.
    let store = open(&format!("{base}?sslmode=prefer")).unwrap();
    drop(store);
}
