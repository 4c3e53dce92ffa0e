//! The processes under test: the fal and Replicate simulators and two `genjobs` replicas, each
//! started from its binary, killed with SIGKILL and restarted on demand; and the database's
//! sessions, terminated.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use diesel_async::RunQueryDsl;

/// The admin token of the soak's replicas.
pub const ADMIN_TOKEN: &str = "soak-admin-token-of-at-least-32-characters";

/// The fal keys the replicas send with (`GENJOBS_UPSTREAM_KEY`); the simulator knows them by
/// their last 4 characters.
pub const FAL_KEYS: [&str; 2] = ["soak-fal-key-aaaa", "soak-fal-key-bbbb"];

/// Jobs in flight per fal key (`GENJOBS_UPSTREAM_MAX_IN_FLIGHT`).
pub const CAP_PER_KEY: u64 = 4;

/// The replicas' job timeout (`GENJOBS_JOB_TIMEOUT_SECS`): the jobs fal lost in its outage end
/// by it, and hold their slots until then.
pub const JOB_TIMEOUT_SECS: u64 = 40;

/// The replicas' lease (`GENJOBS_LEASE_SECS`): a killed replica's jobs are taken over after it.
pub const LEASE_SECS: u64 = 3;

/// The replicas' allowance of 401s per address and minute (`GENJOBS_UNAUTHENTICATED_PER_MINUTE`):
/// small, so that the `boundaries` phase's revoked key spends it within a second.
pub const UNAUTHENTICATED_PER_MINUTE: u32 = 200;

/// The replicas' body deadline (`GENJOBS_BODY_READ_TIMEOUT_SECS`), short so that the `conn`
/// phase sees many stalled bodies closed.
pub const BODY_READ_TIMEOUT_SECS: u64 = 2;

/// What one fal simulator saw: its stats (`/_sim/stats`), its requests' lives
/// (`/_sim/requests`), and when it was taken down (milliseconds since the epoch), which ended
/// every request it still ran.
#[derive(Debug, Clone)]
pub struct SimSeen {
    /// `/_sim/stats`.
    pub stats: serde_json::Value,
    /// `/_sim/requests`.
    pub requests: serde_json::Value,
    /// When it was taken down; `None` for the one serving at the end.
    pub retired_ms: Option<f64>,
}

struct Replica {
    child: Child,
    base: String,
}

/// The simulators and the replicas.
pub struct Cluster {
    bin_dir: PathBuf,
    database_url: String,
    chaos: f64,
    /// The fal simulator; `None` while it is down.
    sim: Mutex<Option<Child>>,
    /// What the fal simulators taken down had seen (each restart starts afresh).
    retired_sims: Mutex<Vec<SimSeen>>,
    /// Where the fal simulator listens, the same across its restarts.
    sim_bind: String,
    sim_url: String,
    replicate_sim: Mutex<Child>,
    replicate_url: String,
    /// A simulator process of its own whose `/moderations` checks every job, failing `chaos` of
    /// its checks.
    moderation_sim: Mutex<Child>,
    moderation_url: String,
    replicas: Mutex<Vec<Replica>>,
}

/// Where the processes' logs (their error output) go: a folder of this run's, which the soak
/// keeps when it finds a violation, so that what each replica did can be read, and removes
/// otherwise.
pub fn logs_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| std::env::temp_dir().join(format!("genjobs-soak-logs-{}", std::process::id())))
}

/// A new file of [`logs_dir`] for the error output of `command`, numbered in the order the
/// processes started (a restart gets a file of its own); nowhere when it cannot be made.
fn log_file(command: &Command) -> Stdio {
    static STARTED: AtomicU32 = AtomicU32::new(0);
    let n = STARTED.fetch_add(1, Ordering::Relaxed);
    let program = Path::new(command.get_program()).file_name().map(|name| name.to_string_lossy().into_owned());
    let path = logs_dir().join(format!("{n:02}-{}.log", program.unwrap_or_default()));
    std::fs::create_dir_all(logs_dir())
        .and_then(|()| std::fs::File::create(path))
        .map_or_else(|_| Stdio::null(), Stdio::from)
}

/// Starts `program` and reads its stdout until the line that starts with `ready`; returns the
/// rest of that line (the base URL). Its stdout keeps being read, so that it never blocks.
fn start(mut command: Command, ready: &str) -> Result<(Child, String), String> {
    let logs = log_file(&command);
    let mut child =
        command.stdout(Stdio::piped()).stderr(logs).spawn().map_err(|e| format!("cannot start {command:?}: {e}"))?;
    let mut stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
    let mut line = String::new();
    while !line.starts_with(ready) {
        line.clear();
        if stdout.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
            return Err(format!("{command:?} exited before it was ready"));
        }
    }
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    Ok((child, line.trim().trim_start_matches(ready).to_owned()))
}

impl Cluster {
    /// Starts the fal simulator (failing `chaos` of its calls), the Replicate simulator (refusing
    /// `chaos` of its submissions with a 503, and answering half as many with a 500 after creating
    /// the prediction) and two replicas on `database_url`, which route flux-pro to Replicate when
    /// fal refuses it.
    ///
    /// # Errors
    /// When a binary is missing or does not start.
    pub fn start(bin_dir: &Path, database_url: &str, chaos: f64) -> Result<Self, String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map_err(|e| format!("no free port for the fal simulator: {e}"))?
            .port();
        let sim_bind = format!("127.0.0.1:{port}");
        let (sim, sim_url) = start(fal_simulator(bin_dir, &sim_bind, chaos), "genjobs-upstream-sim listening on ")?;
        let mut replicate = Command::new(bin_dir.join("genjobs-upstream-replicate-sim"));
        replicate
            .env("SIM_BIND", "127.0.0.1:0")
            .env("SIM_STARTING_MS", "100")
            .env("SIM_PROCESSING_MS", "600")
            .env("SIM_UNAVAILABLE", chaos.to_string())
            .env("SIM_SERVER_ERROR", (chaos / 2.0).to_string());
        let (replicate_sim, replicate_url) = start(replicate, "genjobs-upstream-replicate-sim listening on ")?;
        let moderation = fal_simulator(bin_dir, "127.0.0.1:0", chaos);
        let (moderation_sim, moderation_url) = start(moderation, "genjobs-upstream-sim listening on ")?;
        let cluster = Cluster {
            bin_dir: bin_dir.to_owned(),
            database_url: database_url.to_owned(),
            chaos,
            sim: Mutex::new(Some(sim)),
            retired_sims: Mutex::new(Vec::new()),
            sim_bind,
            sim_url,
            replicate_sim: Mutex::new(replicate_sim),
            replicate_url,
            moderation_sim: Mutex::new(moderation_sim),
            moderation_url,
            replicas: Mutex::new(Vec::new()),
        };
        for _ in 0..2 {
            let replica = cluster.replica()?;
            cluster.replicas().push(replica);
        }
        Ok(cluster)
    }

    fn replicas(&self) -> std::sync::MutexGuard<'_, Vec<Replica>> {
        self.replicas.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn replica(&self) -> Result<Replica, String> {
        let mut command = Command::new(self.bin_dir.join("genjobs"));
        command
            .env("DATABASE_URL", &self.database_url)
            .env("GENJOBS_UPSTREAM_URL", &self.sim_url)
            .env("GENJOBS_REPLICATE_URL", &self.replicate_url)
            .env("GENJOBS_REPLICATE_TOKEN", "sim-token")
            .env("GENJOBS_MODERATION_URL", &self.moderation_url)
            .env("GENJOBS_BIND", "127.0.0.1:0")
            .env("GENJOBS_ADMIN_TOKEN", ADMIN_TOKEN)
            .env("GENJOBS_POLL_INTERVAL_MS", "200")
            .env("GENJOBS_UPSTREAM_KEY", FAL_KEYS.join(","))
            .env("GENJOBS_UPSTREAM_MAX_IN_FLIGHT", CAP_PER_KEY.to_string())
            .env("GENJOBS_LEASE_SECS", LEASE_SECS.to_string())
            .env("GENJOBS_JOB_TIMEOUT_SECS", JOB_TIMEOUT_SECS.to_string())
            .env("GENJOBS_DB_POOL_SIZE", "8")
            .env("GENJOBS_DEFAULT_RATE_LIMIT_PER_MINUTE", "100000")
            .env("GENJOBS_UNAUTHENTICATED_PER_MINUTE", UNAUTHENTICATED_PER_MINUTE.to_string())
            .env("GENJOBS_BODY_READ_TIMEOUT_SECS", BODY_READ_TIMEOUT_SECS.to_string())
            .env("RUST_LOG", "error");
        let (child, base) = start(command, "genjobs listening on ")?;
        Ok(Replica { child, base })
    }

    /// The replicas' base URLs now.
    #[must_use]
    pub fn bases(&self) -> Vec<String> {
        self.replicas().iter().map(|r| r.base.clone()).collect()
    }

    /// Kills replica `index` with SIGKILL and starts a new one in its place (on a new port).
    ///
    /// # Errors
    /// When the new replica does not start.
    pub fn kill_and_restart(&self, index: usize) -> Result<(), String> {
        {
            let mut replicas = self.replicas();
            let victim = &mut replicas[index];
            victim.child.kill().map_err(|e| e.to_string())?;
            victim.child.wait().map_err(|e| e.to_string())?;
            println!("soak: replica {} at {} killed with SIGKILL", index, victim.base);
        }
        let fresh = self.replica()?;
        println!("soak: replica {index} restarted at {}", fresh.base);
        self.replicas()[index] = fresh;
        Ok(())
    }

    /// Takes fal down, as an outage: its simulator is killed, so every call to it is refused
    /// and flux-pro's submissions fall back to Replicate. What fal held is lost with it.
    ///
    /// # Errors
    /// When the process cannot be killed.
    pub async fn take_fal_down(&self) -> Result<(), String> {
        let mut last = self.current_sim().await;
        last.retired_ms = Some(crate::clock::epoch_now() * 1000.0);
        self.retired_sims.lock().unwrap_or_else(PoisonError::into_inner).push(last);
        if let Some(mut sim) = self.sim.lock().unwrap_or_else(PoisonError::into_inner).take() {
            sim.kill().map_err(|e| e.to_string())?;
            sim.wait().map_err(|e| e.to_string())?;
            println!("soak: fal is down (its simulator killed)");
        }
        Ok(())
    }

    /// Brings fal back on the same address.
    ///
    /// # Errors
    /// When the simulator does not start.
    pub fn bring_fal_back(&self) -> Result<(), String> {
        let (sim, _) =
            start(fal_simulator(&self.bin_dir, &self.sim_bind, self.chaos), "genjobs-upstream-sim listening on ")?;
        *self.sim.lock().unwrap_or_else(PoisonError::into_inner) = Some(sim);
        println!("soak: fal is back");
        Ok(())
    }

    async fn current_sim(&self) -> SimSeen {
        let read = async |path: &str| match reqwest::get(format!("{}{path}", self.sim_url)).await {
            Ok(response) => response.json().await.unwrap_or_default(),
            Err(_) => serde_json::Value::Null,
        };
        SimSeen { stats: read("/_sim/stats").await, requests: read("/_sim/requests").await, retired_ms: None }
    }

    /// What every fal simulator of the run saw: those taken down and the one serving now.
    pub async fn sims(&self) -> Vec<SimSeen> {
        let mut all = self.retired_sims.lock().unwrap_or_else(PoisonError::into_inner).clone();
        all.push(self.current_sim().await);
        all
    }

    /// What the moderation service counted (`/_sim/stats`).
    pub async fn moderation_stats(&self) -> serde_json::Value {
        match reqwest::get(format!("{}/_sim/stats", self.moderation_url)).await {
            Ok(response) => response.json().await.unwrap_or_default(),
            Err(_) => serde_json::Value::Null,
        }
    }

    /// The faults the fal simulators injected, by kind.
    pub async fn faults(&self) -> Vec<(String, u64)> {
        let mut faults = std::collections::BTreeMap::<String, u64>::new();
        for sim in self.sims().await {
            for (route, count) in sim.stats["routes"].as_object().into_iter().flatten() {
                if let Some(fault) = route.strip_prefix("fault_") {
                    *faults.entry(fault.to_owned()).or_default() += count.as_u64().unwrap_or(0);
                }
            }
        }
        faults.into_iter().collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for replica in self.replicas().iter_mut() {
            let _ = replica.child.kill();
            let _ = replica.child.wait();
        }
        if let Some(mut sim) = self.sim.lock().unwrap_or_else(PoisonError::into_inner).take() {
            let _ = sim.kill();
            let _ = sim.wait();
        }
        for child in [&self.replicate_sim, &self.moderation_sim] {
            let mut child = child.lock().unwrap_or_else(PoisonError::into_inner);
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The fal simulator's command: listening on `bind`, failing `chaos` of its calls.
fn fal_simulator(bin_dir: &Path, bind: &str, chaos: f64) -> Command {
    let mut sim = Command::new(bin_dir.join("genjobs-upstream-sim"));
    sim.env("SIM_BIND", bind).env("SIM_QUEUE_MS", "100").env("SIM_RUN_MS", "600").env("SIM_CHAOS", chaos.to_string());
    sim
}

/// Terminates every session of the database but the caller's, as a restart or a failover does;
/// how many.
///
/// # Errors
/// When the database cannot be reached.
pub async fn terminate_sessions(database_url: &str) -> Result<usize, String> {
    let mut conn =
        genjobs_store_postgres::open_connection(database_url, Duration::from_secs(5), Duration::from_secs(5))
            .await
            .map_err(|e| e.to_string())?;
    #[derive(diesel::QueryableByName)]
    struct Ended {
        #[diesel(sql_type = diesel::sql_types::Bool)]
        ended: bool,
    }
    let ended: Vec<Ended> = diesel::sql_query(
        "SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .load(&mut conn)
    .await
    .map_err(|e| e.to_string())?;
    let count = ended.iter().filter(|e| e.ended).count();
    println!("soak: {count} database sessions terminated");
    Ok(count)
}
