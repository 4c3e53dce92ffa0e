//! A PgBouncer in transaction pooling mode in front of the test server, started once per test
//! process on a free port, so that the store's tests can run a second time through the pooler
//! that operators put in front of Postgres. It serves every database of the server (`*`), so each
//! test's own database is reachable through it.
//!
//! `cargo xtask test` installs Debian's `pgbouncer`; without it the pooled tests fail and say so.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Where Debian's package puts the binary.
const BINARIES: [&str; 2] = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"];

/// The running pooler: its address.
#[derive(Debug)]
pub struct Pgbouncer {
    /// `127.0.0.1:<port>`.
    pub addr: SocketAddr,
}

/// The pooler of this test process, started at the first call, in front of `server` (the
/// `host:port` of Postgres).
///
/// # Panics
/// When PgBouncer is not installed or does not start: the pooled tests need it, and say how to
/// get it.
pub fn pgbouncer(server: &str) -> &'static Pgbouncer {
    static RUNNING: OnceLock<Pgbouncer> = OnceLock::new();
    RUNNING.get_or_init(|| {
        start(server, "server_check_delay = 0", "tests")
            .unwrap_or_else(|e| panic!("cannot start PgBouncer for the pooled tests: {e}"))
    })
}

/// As [`pgbouncer`], configured as operators run it, for benchmarks: the tests' pooler checks
/// every server connection before it lends it (`server_check_delay = 0`), a round trip more per
/// transaction; PgBouncer's default checks only connections idle for 30 s.
///
/// # Panics
/// As [`pgbouncer`].
pub fn pgbouncer_as_deployed(server: &str) -> &'static Pgbouncer {
    static RUNNING: OnceLock<Pgbouncer> = OnceLock::new();
    RUNNING.get_or_init(|| {
        start(server, "", "deployed").unwrap_or_else(|e| panic!("cannot start PgBouncer for the benchmark: {e}"))
    })
}

/// A pooler of its own in front of `server`, configured as [`pgbouncer`]'s, that tries to log
/// in to the server again a second after it failed (PgBouncer's default waits 15 s): for a test
/// that makes the database unreachable behind it (see [`crate::Gate`]) and then reachable again.
///
/// # Panics
/// As [`pgbouncer`].
pub fn pgbouncer_of_its_own(server: &str) -> Pgbouncer {
    let name = format!("own-{}", free_port().map_or(0, |addr| addr.port()));
    start(server, "server_check_delay = 0\nserver_login_retry = 1", &name)
        .unwrap_or_else(|e| panic!("cannot start PgBouncer for the test: {e}"))
}

/// Starts a pooler in front of `server` with `extra`, lines of its settings, after the common
/// ones; `name` tells its files from those of the process's other poolers.
fn start(server: &str, extra: &str, name: &str) -> Result<Pgbouncer, String> {
    let binary = BINARIES.iter().map(Path::new).find(|p| p.exists()).ok_or_else(|| {
        "pgbouncer is missing (looked for /usr/sbin/pgbouncer); `cargo xtask test` installs it".to_owned()
    })?;
    let (host, port) = server.rsplit_once(':').unwrap_or((server, "5432"));
    let addr = free_port()?;
    let dir = std::env::temp_dir().join(format!("genjobs-pgbouncer-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let users = dir.join("users.txt");
    write(&users, "\"postgres\" \"\"\n")?;
    let ini = dir.join("pgbouncer.ini");
    write(
        &ini,
        &format!(
            "[databases]\n* = host={host} port={port}\n\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {}\n\
             unix_socket_dir =\nauth_type = trust\nauth_file = {}\npool_mode = transaction\n\
             max_client_conn = 5000\ndefault_pool_size = 20\n{extra}\n\
             ignore_startup_parameters = extra_float_digits\nlogfile = {}\n",
            addr.port(),
            users.display(),
            dir.join("pgbouncer.log").display(),
        ),
    )?;
    // PgBouncer refuses to run as root; `-u` makes it drop to the server's user. A watchdog
    // stops it when this test process is gone, so that no run leaves a pooler behind.
    let as_user = if is_root() { "-u postgres" } else { "" };
    let script = format!(
        "chmod -R a+rwX {dir} && {binary} {as_user} {ini} & pooler=$!; \
         while kill -0 {parent} 2>/dev/null && kill -0 $pooler 2>/dev/null; do sleep 1; done; kill $pooler",
        dir = dir.display(),
        binary = binary.display(),
        ini = ini.display(),
        parent = std::process::id(),
    );
    Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", binary.display()))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(dir.join("pgbouncer.log")).unwrap_or_default();
            return Err(format!("it did not listen on {addr} within 10 s; its log:\n{log}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(Pgbouncer { addr })
}

fn free_port() -> Result<SocketAddr, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    listener.local_addr().map_err(|e| format!("no free port: {e}"))
}

fn write(path: &PathBuf, text: &str) -> Result<(), String> {
    std::fs::File::create(path)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|out| out.stdout.trim_ascii() == b"0")
}
