//! A private PostgreSQL server for tests: a fresh cluster in a temp dir on 127.0.0.1, one per
//! test process, started on first use from Debian's packages (`/usr/lib/postgresql/*/bin`).
//!
//! `initdb` refuses to run as root, so as root the cluster belongs to the `postgres` user the
//! package creates and its programs run through `runuser`. A watchdog shell stops the server
//! and removes its directory once this test process has exited.
//!
//! Where no server can be started the tests print why and return; with
//! `CI_REQUIRE_POSTGRES=1` (set by `.ci/run`) they fail instead.
//!
//! Also compiled into the CLI's tests (`#[path]`), so keep it free of the suite's helpers.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// A running test server.
pub struct PgServer {
    port: u16,
    /// Databases created so far (one per test directory).
    created: Mutex<Vec<String>>,
}

static SERVER: OnceLock<Result<PgServer, String>> = OnceLock::new();
static TLS_SERVER: OnceLock<Result<PgTlsServer, String>> = OnceLock::new();

/// The server, or `None` after printing why there is none (a failure under CI).
pub fn pg_server() -> Option<&'static PgServer> {
    available(SERVER.get_or_init(|| start(&|_, _| Ok(String::new()))))
}

fn available<T>(server: &Result<T, String>) -> Option<&T> {
    match server {
        Ok(server) => Some(server),
        Err(why) => {
            if std::env::var("CI_REQUIRE_POSTGRES").is_ok_and(|v| v == "1") {
                panic!("CI_REQUIRE_POSTGRES=1 but no PostgreSQL server could be started: {why}");
            }
            eprintln!("SKIPPED: no PostgreSQL server for this test ({why}); `apt-get install postgresql` to run it");
            None
        }
    }
}

/// A second test server with `ssl=on`: a certificate for `localhost` (DNS name only, no IP
/// address) signed by a root made for it with `openssl`, plus another root that signed nothing
/// the server has. The server trusts `root` for client certificates too, and its `pg_hba.conf`
/// lets the role [`CERT_USER`] in only over TLS with a certificate naming it (`cert`).
// The client certificates are read by cli/tests/sessions_postgres.rs, which shares this
// file; the storage suite uses the server side only.
#[allow(dead_code)]
pub struct PgTlsServer {
    pub server: PgServer,
    /// The root that signed the server's certificate (PEM).
    pub root: PathBuf,
    /// A root unrelated to the server (PEM).
    pub other_root: PathBuf,
    /// A client certificate for [`CERT_USER`] signed by `root`, and its key (mode 0600).
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// A client certificate for [`CERT_USER`] signed by `other_root`, and its key.
    pub stranger_cert: PathBuf,
    pub stranger_key: PathBuf,
}

/// The role that logs in with a client certificate only; it owns a database of its name.
pub const CERT_USER: &str = "pi_cert";

/// The TLS server, or `None` after printing why there is none (a failure under CI).
pub fn pg_tls_server() -> Option<&'static PgTlsServer> {
    available(TLS_SERVER.get_or_init(start_tls))
}

fn start_tls() -> Result<PgTlsServer, String> {
    let certs = tempfile::Builder::new()
        .prefix("pi-test-pg-certs-")
        .tempdir()
        .map_err(|e| e.to_string())?
        .keep();
    // The tests read the roots from here until the end of the process.
    after_exit(&format!("rm -rf '{}'", certs.display()))?;
    let openssl = |args: &[&str]| {
        let mut c = Command::new("openssl");
        c.current_dir(&certs).args(args);
        run(c, &format!("openssl {}", args[0]))
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    for name in ["root", "other-root"] {
        let (key, crt, cn) = (
            format!("{name}.key"),
            format!("{name}.crt"),
            format!("/CN=pi test {name}"),
        );
        let mut args = vec!["req", "-x509"];
        args.extend(ec);
        args.extend(["-keyout", &key, "-out", &crt, "-days", "2", "-subj", &cn]);
        openssl(&args)?;
    }
    let mut args = vec!["req"];
    args.extend(ec);
    args.extend([
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
    ]);
    openssl(&args)?;
    std::fs::write(
        certs.join("server.ext"),
        "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .map_err(|e| e.to_string())?;
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "root.crt",
        "-CAkey",
        "root.key",
        "-CAcreateserial",
        "-out",
        "server.crt",
        "-days",
        "2",
        "-extfile",
        "server.ext",
    ])?;
    // Client certificates: the CN names the role (pg_hba's `cert` method checks it).
    std::fs::write(
        certs.join("client.ext"),
        "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n",
    )
    .map_err(|e| e.to_string())?;
    for (name, ca) in [("client", "root"), ("stranger", "other-root")] {
        let (key, csr, crt) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.crt"),
        );
        let cn = format!("/CN={CERT_USER}");
        let mut args = vec!["req"];
        args.extend(ec);
        args.extend(["-keyout", &key, "-out", &csr, "-subj", &cn]);
        openssl(&args)?;
        let (ca_crt, ca_key) = (format!("{ca}.crt"), format!("{ca}.key"));
        openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca_crt,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-out",
            &crt,
            "-days",
            "2",
            "-extfile",
            "client.ext",
        ])?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(certs.join(&key), std::fs::Permissions::from_mode(0o600))
            .map_err(|e| e.to_string())?;
    }
    let server = start(&|data, root| {
        // The server reads its key only if its owner alone can.
        for f in ["server.crt", "server.key", "root.crt"] {
            let to = data.join(f);
            std::fs::copy(certs.join(f), &to).map_err(|e| format!("{f}: {e}"))?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| e.to_string())?;
            if root {
                let (uid, gid) = postgres_user()?;
                std::os::unix::fs::chown(&to, Some(uid), Some(gid)).map_err(|e| e.to_string())?;
            }
        }
        // First match wins: the certificate role only over TLS with a certificate.
        let hba = data.join("pg_hba.conf");
        let rules = std::fs::read_to_string(&hba).map_err(|e| e.to_string())?;
        std::fs::write(
            &hba,
            format!("hostssl all {CERT_USER} 127.0.0.1/32 cert\n{rules}"),
        )
        .map_err(|e| e.to_string())?;
        Ok(
            " -c ssl=on -c ssl_cert_file=server.crt -c ssl_key_file=server.key \
            -c ssl_ca_file=root.crt"
                .to_string(),
        )
    })?;
    // On a thread of its own: the blocking client refuses to run inside an async runtime.
    let admin_url = server.url("postgres");
    std::thread::spawn(move || {
        // Two statements: CREATE DATABASE cannot run in a multi-statement batch.
        postgres::Client::connect(&admin_url, postgres::NoTls).and_then(|mut admin| {
            admin.batch_execute(&format!("CREATE ROLE {CERT_USER} LOGIN"))?;
            admin.batch_execute(&format!("CREATE DATABASE {CERT_USER} OWNER {CERT_USER}"))
        })
    })
    .join()
    .map_err(|_| "creating the certificate role panicked".to_string())?
    .map_err(|e| format!("creating the certificate role: {e:?}"))?;
    Ok(PgTlsServer {
        server,
        root: certs.join("root.crt"),
        other_root: certs.join("other-root.crt"),
        client_cert: certs.join("client.crt"),
        client_key: certs.join("client.key"),
        stranger_cert: certs.join("stranger.crt"),
        stranger_key: certs.join("stranger.key"),
    })
}

impl PgServer {
    /// The URL of a database of its own for `dir`, created on first use (the same `dir`
    /// gives the same database, as the file backends give the same files).
    pub fn database_url(&self, dir: &Path) -> String {
        let name = format!(
            "pi_test_{:016x}",
            fnv1a(dir.display().to_string().as_bytes())
        );
        let mut created = self.created.lock().unwrap_or_else(|e| e.into_inner());
        if !created.contains(&name) {
            // On a thread of its own: the blocking client refuses to run inside an async
            // test's runtime.
            let (admin_url, sql) = (self.url("postgres"), format!("CREATE DATABASE {name}"));
            std::thread::spawn(move || {
                postgres::Client::connect(&admin_url, postgres::NoTls)
                    .and_then(|mut admin| admin.batch_execute(&sql))
                    .unwrap_or_else(|e| panic!("{sql} on the test server: {e:?}"));
            })
            .join()
            .unwrap();
            created.push(name.clone());
        }
        self.url(&name)
    }

    /// The URL of a database on this server.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The newest installed PostgreSQL's programs.
fn bin_dir() -> Result<PathBuf, String> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|e| format!("/usr/lib/postgresql: {e}"))?
        .filter_map(|d| {
            let d = d.ok()?;
            let version = d.file_name().to_str()?.parse().ok()?;
            let bin = d.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, bin)| bin)
        .ok_or_else(|| "no /usr/lib/postgresql/*/bin/initdb".to_string())
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// The `postgres` user's uid and gid, from `/etc/passwd`.
fn postgres_user() -> Result<(u32, u32), String> {
    let passwd = std::fs::read_to_string("/etc/passwd").map_err(|e| format!("/etc/passwd: {e}"))?;
    passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.first() == Some(&"postgres") && f.len() > 3)
        .and_then(|f| Some((f[2].parse().ok()?, f[3].parse().ok()?)))
        .ok_or_else(|| "no `postgres` user (is the postgresql package installed?)".to_string())
}

/// A command for a PostgreSQL program, as the `postgres` user when we are root.
fn pg_command(root: bool, program: &Path) -> Command {
    if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn run(mut command: Command, what: &str) -> Result<(), String> {
    let out = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}

/// Runs `script` in the background once this process is gone.
fn after_exit(script: &str) -> Result<(), String> {
    let watch = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {script}",
        pid = std::process::id()
    );
    Command::new("sh")
        .args(["-c", &watch])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(drop)
        .map_err(|e| format!("watchdog: {e}"))
}

/// Starts a cluster; `configure(data dir, as root)` runs after `initdb` and returns extra
/// server options.
fn start(configure: &dyn Fn(&Path, bool) -> Result<String, String>) -> Result<PgServer, String> {
    let bin = bin_dir()?;
    let root = is_root();
    // As root, under /tmp: the `postgres` user must be able to reach it, which a TMPDIR
    // inside root's home would not allow.
    let parent = if root {
        PathBuf::from("/tmp")
    } else {
        std::env::temp_dir()
    };
    let dir = tempfile::Builder::new()
        .prefix("pi-test-pg-")
        .tempdir_in(parent)
        .map_err(|e| e.to_string())?
        .keep();
    if root {
        // The cluster's owner must be able to reach its directory.
        let (uid, gid) = postgres_user()?;
        std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
            .map_err(|e| format!("chown {}: {e}", dir.display()))?;
    }
    let data = dir.join("data");
    let mut initdb = pg_command(root, &bin.join("initdb"));
    initdb
        .arg("-D")
        .arg(&data)
        .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"]);
    run(initdb, "initdb").inspect_err(|_| {
        let _ = std::fs::remove_dir_all(&dir);
    })?;
    let extra = configure(&data, root)?;
    // Stop the server and remove its files once this process is gone.
    let stop = format!(
        "{runuser}{pg_ctl} -D '{data}' -m immediate stop >/dev/null 2>&1; rm -rf '{dir}'",
        runuser = if root { "runuser -u postgres -- " } else { "" },
        pg_ctl = bin.join("pg_ctl").display(),
        data = data.display(),
        dir = dir.display(),
    );
    after_exit(&stop)?;
    let mut last = String::new();
    for _ in 0..3 {
        let port = free_port()?;
        let mut pg_ctl = pg_command(root, &bin.join("pg_ctl"));
        pg_ctl
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(dir.join("server.log"))
            .arg("-o")
            .arg(format!(
                "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200{extra}",
                dir.display()
            ))
            .args(["-w", "-t", "60", "start"]);
        match run(pg_ctl, "pg_ctl start") {
            Ok(()) => {
                return Ok(PgServer {
                    port,
                    created: Mutex::new(Vec::new()),
                })
            }
            // Another program may have taken the port in between: try another.
            Err(e) => last = e,
        }
    }
    let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
    Err(format!("{last}\n{log}"))
}
