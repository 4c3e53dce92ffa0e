//! Several `genjobs` processes on one Postgres database, sharing one simulated provider: a job
//! submitted through one replica streams to completion through another; a replica killed with
//! SIGKILL has its jobs finished by the other; a process killed and restarted loses nothing; of
//! four, the one drained by SIGTERM hands its jobs to the other three.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use genjobs_domain::ids::{JobId, UserId};
use genjobs_store_postgres::{PgSettings, connect};
use genjobs_test_postgres::TestDatabase;
use genjobs_test_wait::{eventually, wait_until};
use genjobs_tests::{ADMIN_TOKEN, TestApp, WebhookReceiver, sample_sum};
use genjobs_upstream_sim::{RunningSim, SimConfig};
use serde_json::{Value, json};

/// A genjobs process, and the shared test client pointed at it.
struct Replica {
    child: Child,
    app: TestApp,
}

impl Replica {
    fn start(db: &TestDatabase, sim: &RunningSim) -> Replica {
        Replica::start_with(db, sim, &[])
    }

    /// A replica with `vars` added to (or replacing) the shared settings.
    fn start_with(db: &TestDatabase, sim: &RunningSim, vars: &[(&str, &str)]) -> Replica {
        let mut child = Command::new(env!("CARGO_BIN_EXE_genjobs"))
            .env("DATABASE_URL", &db.url)
            .env("GENJOBS_UPSTREAM_URL", &sim.base_url)
            .env("GENJOBS_BIND", "127.0.0.1:0")
            .env("GENJOBS_ADMIN_TOKEN", ADMIN_TOKEN)
            .env("GENJOBS_POLL_INTERVAL_MS", "100")
            .env("GENJOBS_LEASE_SECS", "2")
            .env("GENJOBS_DB_POOL_SIZE", "4")
            .envs(vars.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while !line.starts_with("genjobs listening on ") {
            line.clear();
            assert!(stdout.read_line(&mut line).unwrap() > 0, "genjobs exited before listening");
        }
        let base = line.trim().trim_start_matches("genjobs listening on ").to_owned();
        // Keep reading: a closed pipe would make the replica's next print fail.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        Replica { child, app: TestApp::remote(base, sim.base_url.clone()) }
    }

    fn kill_hard(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sim() -> RunningSim {
    genjobs_upstream_sim::spawn(SimConfig {
        queue: Duration::from_millis(50),
        run: Duration::from_millis(500),
        ..SimConfig::default()
    })
    .unwrap()
}

async fn create_user(replica: &Replica, credits: u64) -> (String, String) {
    let user = replica.app.create_user(credits, json!({"max_concurrent_jobs": 20})).await;
    (user.id, user.key)
}

async fn submit(replica: &Replica, key: &str, prompt: &str) -> String {
    let receipt = replica.app.submit("images", key, json!({"prompt": prompt})).await;
    receipt["job_id"].as_str().unwrap_or_else(|| panic!("no job id: {receipt}")).to_owned()
}

async fn job(replica: &Replica, key: &str, id: &str, wait: u64) -> Value {
    replica.app.job(key, id, wait).await
}

async fn assert_ledger_balances(db: &TestDatabase, user_id: &str, granted: i64) {
    let adapters = connect(&PgSettings { key_cache_ttl: Duration::ZERO, ..db.settings() }).unwrap();
    let store = &*adapters.store;
    let id = UserId::parse(user_id).unwrap();
    let account = genjobs_domain::ports::AccountStore::account(store, id).await.unwrap().unwrap();
    assert_eq!((account.active_jobs, account.balances.held.get()), (0, 0), "{account:?}");
    assert_eq!(account.balances.total(), granted as u128);
    let totals = store.ledger_totals(id).await.unwrap();
    assert_eq!(totals.granted, granted);
    assert_eq!(totals.held, totals.spent + totals.released, "every hold settled or released once: {totals:?}");
    assert_eq!(totals.spent, account.balances.spent.get() as i64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_submitted_through_one_replica_streams_to_completion_through_the_other() {
    let (db, sim) = (TestDatabase::new().await, sim());
    let (a, b) = (Replica::start(&db, &sim), Replica::start(&db, &sim));
    let (_, key) = create_user(&a, 100).await;
    let id = submit(&a, &key, "relay [sim:run=800]").await;
    let (_, text) = b.app.read_stream(&id, &key, Duration::from_secs(20)).await;
    assert!(text.contains("event: progress"), "{text}");
    assert!(text.contains("event: done"), "{text}");
    let waited = job(&b, &key, &id, 0).await;
    assert_eq!(waited["state"], "succeeded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_other_replica_finishes_the_jobs_of_one_killed_with_sigkill() {
    let (db, sim) = (TestDatabase::new().await, sim());
    let mut a = Replica::start(&db, &sim);
    let (user_id, key) = create_user(&a, 100).await;
    let id = submit(&a, &key, "orphan [sim:run=2500]").await;
    let running = eventually(Duration::from_secs(10), async || job(&a, &key, &id, 0).await["state"] == "running").await;
    assert!(running, "replica a never started the job");
    let b = Replica::start(&db, &sim);
    a.kill_hard();
    let done = job(&b, &key, &id, 30).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(sim.stats().routes["submit"], 1, "the job was never submitted twice");
    assert_ledger_balances(&db, &user_id, 100).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_killed_and_restarted_loses_no_job_and_balances_its_ledger() {
    let db = TestDatabase::new().await;
    let sim = genjobs_upstream_sim::spawn(SimConfig {
        queue: Duration::from_millis(1500),
        run: Duration::from_millis(500),
        ..SimConfig::default()
    })
    .unwrap();
    let mut first = Replica::start(&db, &sim);
    let (user_id, key) = create_user(&first, 1000).await;
    let done = submit(&first, &key, "early").await;
    let failed = submit(&first, &key, "broken [sim:fail]").await;
    let canceled = submit(&first, &key, "unwanted [sim:hang]").await;
    let canceled_answer = first.app.post(&format!("/api/v1/jobs/{canceled}/cancel"), &key, &json!({})).await;
    assert_eq!(canceled_answer.status(), 200);
    for id in [&done, &failed] {
        assert!(job(&first, &key, id, 20).await["state"] != "queued");
    }
    let running = submit(&first, &key, "long [sim:run=3000]").await;
    eventually(Duration::from_secs(10), async || job(&first, &key, &running, 0).await["state"] == "running").await;
    let mut queued = Vec::new();
    for i in 0..3 {
        queued.push(submit(&first, &key, &format!("late {i}")).await);
    }
    let states: Vec<Value> = futures_util::future::join_all(
        [&done, &failed, &canceled, &running].into_iter().chain(&queued).map(|id| job(&first, &key, id, 0)),
    )
    .await;
    let seen: std::collections::BTreeSet<_> = states.iter().map(|j| j["state"].as_str().unwrap().to_owned()).collect();
    assert_eq!(
        seen,
        ["canceled", "failed", "queued", "running", "succeeded"].map(String::from).into(),
        "jobs in every state before the kill"
    );
    first.kill_hard();

    let second = Replica::start(&db, &sim);
    for id in [&done, &failed, &canceled, &running].into_iter().chain(&queued) {
        let job = job(&second, &key, id, 30).await;
        assert!(["succeeded", "failed", "canceled"].contains(&job["state"].as_str().unwrap()), "{job}");
    }
    let listed: Value = second.app.get("/api/v1/jobs?limit=100", &key).await.json().await.unwrap();
    assert_eq!(listed["data"].as_array().unwrap().len(), 4 + queued.len(), "nothing accepted is lost");
    assert_ledger_balances(&db, &user_id, 1000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_drained_by_sigterm_ends_its_streams_and_hands_its_jobs_over_within_a_second() {
    let (db, sim) = (TestDatabase::new().await, sim());
    // A lease far longer than the test: only a handover can move the job before it ends.
    let long_lease = [("GENJOBS_LEASE_SECS", "60")];
    let mut a = Replica::start_with(&db, &sim, &long_lease);
    let (user_id, key) = create_user(&a, 100).await;
    let id = submit(&a, &key, "handover [sim:run=4000]").await;
    let running = eventually(Duration::from_secs(10), async || job(&a, &key, &id, 0).await["state"] == "running").await;
    assert!(running, "replica a never started the job");
    let b = Replica::start_with(&db, &sim, &long_lease);

    let stream = tokio::spawn({
        let (app, id, key) = (TestApp::remote(a.app.base.clone(), sim.base_url.clone()), id.clone(), key.clone());
        async move { app.read_stream(&id, &key, Duration::from_secs(30)).await.1 }
    });
    let long_poll = tokio::spawn({
        let (app, id, key) = (TestApp::remote(a.app.base.clone(), sim.base_url.clone()), id.clone(), key.clone());
        async move { app.job(&key, &id, 60).await }
    });
    let both_open = |scrape: &String| {
        ["kind=\"sse\"", "kind=\"long_poll\""]
            .iter()
            .all(|kind| sample_sum(scrape, "genjobs_open_connections", &[kind]) >= 1.0)
    };
    wait_until(Duration::from_secs(30), "the stream and the long-poll on a", async || a.app.metrics().await, both_open)
        .await;
    Command::new("kill").args(["-TERM", &a.child.id().to_string()]).status().unwrap();
    let signaled = std::time::Instant::now();

    let text = tokio::time::timeout(Duration::from_secs(5), stream).await.expect("the stream ends").unwrap();
    assert!(text.trim_end().ends_with(": server draining; reconnect"), "{text}");
    let answered = tokio::time::timeout(Duration::from_secs(5), long_poll).await.expect("the long-poll ends").unwrap();
    assert_eq!(answered["state"], "running", "answered with the job as it is");
    let status = tokio::task::spawn_blocking(move || {
        let status = a.child.wait().unwrap();
        (status, a)
    });
    let (status, _a) = tokio::time::timeout(Duration::from_secs(10), status).await.expect("a exits").unwrap();
    assert!(status.success(), "{status:?}");
    let exited = signaled.elapsed();

    let polls_at_exit = sim.stats().routes.get("status").copied().unwrap_or(0);
    let exit = std::time::Instant::now();
    let taken_over = eventually(Duration::from_secs(3), async || {
        sim.stats().routes.get("status").copied().unwrap_or(0) > polls_at_exit
    })
    .await;
    let handover = exit.elapsed();
    assert!(taken_over, "nobody polled the job after a exited");
    assert!(handover < Duration::from_secs(1), "b took the job over {handover:?} after a exited ({exited:?} to drain)");

    let done = job(&b, &key, &id, 30).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(sim.stats().routes["submit"], 1, "the job was never submitted twice");
    assert_ledger_balances(&db, &user_id, 100).await;
}

/// Four replicas on one database; the one driving every job is drained by SIGTERM: the three
/// others finish all its jobs long before its leases (60 s) could run out, none submitted twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_four_replicas_the_one_drained_hands_all_its_jobs_to_the_other_three() {
    let (db, sim) = (TestDatabase::new().await, sim());
    let long_lease = [("GENJOBS_LEASE_SECS", "60")];
    let mut a = Replica::start_with(&db, &sim, &long_lease);
    let (user_id, key) = create_user(&a, 100).await;
    let mut ids = Vec::new();
    for n in 0..8 {
        ids.push(submit(&a, &key, &format!("handover {n} [sim:run=8000]")).await);
    }
    for id in &ids {
        let running =
            eventually(Duration::from_secs(10), async || job(&a, &key, id, 0).await["state"] == "running").await;
        assert!(running, "replica a never started {id}");
    }
    let others: Vec<Replica> = (0..3).map(|_| Replica::start_with(&db, &sim, &long_lease)).collect();

    Command::new("kill").args(["-TERM", &a.child.id().to_string()]).status().unwrap();
    let status = tokio::task::spawn_blocking(move || (a.child.wait().unwrap(), a));
    let (status, _a) = tokio::time::timeout(Duration::from_secs(10), status).await.expect("a exits").unwrap();
    assert!(status.success(), "{status:?}");
    let exited = std::time::Instant::now();

    for (n, id) in ids.iter().enumerate() {
        let done = job(&others[n % 3], &key, id, 30).await;
        assert_eq!(done["state"], "succeeded", "{done}");
    }
    assert!(exited.elapsed() < Duration::from_secs(30), "finished {:?} after a exited", exited.elapsed());
    assert_eq!(sim.stats().routes["submit"], 8, "no job was submitted twice");
    assert_ledger_balances(&db, &user_id, 100).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_subcommands_work_against_the_database() {
    let db = TestDatabase::new().await;
    let run = |args: &[&str]| {
        let output =
            Command::new(env!("CARGO_BIN_EXE_genjobs")).args(args).env("DATABASE_URL", &db.url).output().unwrap();
        assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    };
    assert!(run(&["migrate"]).contains("0 migrations applied"));
    let created = run(&["users", "create", "--name", "ops", "--credits", "30"]);
    let user_id = created.split_whitespace().nth(1).unwrap().to_owned();
    assert!(created.contains("api key: gj_"), "{created}");
    assert!(run(&["users", "grant", "--id", &user_id, "--amount", "12"]).contains("42 credits available"));
    let usage = Command::new(env!("CARGO_BIN_EXE_genjobs")).arg("frobnicate").output().unwrap();
    assert_eq!(usage.status.code(), Some(2));
}

/// A client webhook outlives SIGKILL: its event is recorded with the job's end, the process is
/// killed before it could deliver (its receiver was down), and the next process delivers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_webhook_pending_at_a_sigkill_is_delivered_by_the_next_process() {
    let (db, sim) = (TestDatabase::new().await, sim());
    let vars = [("GENJOBS_WEBHOOK_ALLOW_PRIVATE", "true"), ("GENJOBS_CLIENT_WEBHOOK_BACKOFF_MS", "1500")];
    let mut first = Replica::start_with(&db, &sim, &vars);
    let (_, key) = create_user(&first, 100).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/hook");
    let receipt = first.app.submit("images", &key, json!({"prompt": "kept", "webhook_url": url})).await;
    let id = receipt["job_id"].as_str().unwrap().to_owned();
    let webhooks = format!("/api/v1/jobs/{id}/webhooks");
    let attempted = eventually(Duration::from_secs(20), async || {
        let events: Value = first.app.get(&webhooks, &key).await.json().await.unwrap();
        events["data"][0]["attempts"].as_array().is_some_and(|a| !a.is_empty())
    })
    .await;
    assert!(attempted, "the first process never tried the down receiver");
    first.kill_hard();

    let receiver = WebhookReceiver::start_on(port, vec![]).await;
    let second = Replica::start_with(&db, &sim, &vars);
    let posted = receiver.wait_for(1, Duration::from_secs(20)).await.remove(0);
    assert_eq!(posted.json()["data"]["id"], id.as_str());
    let recorded = eventually(Duration::from_secs(10), async || {
        let events: Value = second.app.get(&webhooks, &key).await.json().await.unwrap();
        !events["data"][0]["delivered_at"].is_null()
    })
    .await;
    assert!(recorded, "the delivery was not recorded");
}

/// The figures `GET /api/admin/providers` gives for the fal key of `replica`: (in flight,
/// waiting normal + low).
async fn fal_capacity(replica: &Replica) -> (u64, u64) {
    let providers: Value = replica.app.get("/api/admin/providers", ADMIN_TOKEN).await.json().await.unwrap();
    let fal = providers["data"].as_array().unwrap().iter().find(|p| p["provider"] == "fal").unwrap().clone();
    let in_flight = fal["keys"].as_array().unwrap().iter().map(|k| k["in_flight"].as_u64().unwrap()).sum();
    let waiting = fal["waiting"]["normal"].as_u64().unwrap() + fal["waiting"]["low"].as_u64().unwrap();
    (in_flight, waiting)
}

/// Issue 39's kill -9: a burst on a key capped at 2, over two replicas, one of them killed with
/// SIGKILL in the middle and restarted. The cap holds at the provider throughout, every slot
/// comes back (in flight 0 once all are final), no job is sent twice, and the jobs still waiting
/// go in fair order: the other user's job, submitted to the restarted replica behind the burst,
/// takes the next slot rather than waiting behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_on_a_capped_key_survives_a_sigkill_with_every_slot_accounted_for() {
    let (db, sim) = (TestDatabase::new().await, sim());
    let capped = [
        ("GENJOBS_UPSTREAM_KEY", "capped-key-kkkk"),
        ("GENJOBS_UPSTREAM_MAX_IN_FLIGHT", "2"),
        ("GENJOBS_DEFAULT_RATE_LIMIT_PER_MINUTE", "100000"),
    ];
    let (mut a, b) = (Replica::start_with(&db, &sim, &capped), Replica::start_with(&db, &sim, &capped));
    let (big_id, big) = create_user(&a, 1_000).await;
    let (small_id, small) = create_user(&a, 1_000).await;
    let burst = futures_util::future::join_all((0..12).map(|n| {
        let (through, big) = (if n % 2 == 0 { &a } else { &b }, &big);
        async move { submit(through, big, &format!("burst {n} [sim:run=2000]")).await }
    }))
    .await;
    // Accepted jobs wait for the cap once the scheduler has seen them.
    let waits = eventually(Duration::from_secs(5), async || fal_capacity(&b).await.1 >= 6).await;
    let (in_flight, waiting) = fal_capacity(&b).await;
    assert!(waits && in_flight <= 2, "the burst waits for the cap: {in_flight} in flight, {waiting} waiting");
    let sent_before_kill =
        eventually(Duration::from_secs(10), async || sim.stats().routes.get("submit").copied().unwrap_or(0) >= 3).await;
    assert!(sent_before_kill, "the burst started");
    a.kill_hard();
    let restarted = Replica::start_with(&db, &sim, &capped);
    let others = submit(&restarted, &small, "the other user's [sim:run=2000]").await;

    let mut all = burst.clone();
    all.push(others.clone());
    let everyone_final = eventually(Duration::from_secs(60), async || {
        let (in_flight, _) = fal_capacity(&restarted).await;
        assert!(in_flight <= 2, "never above the cap: {in_flight}");
        let key = |id: &String| if *id == others { small.clone() } else { big.clone() };
        let states =
            futures_util::future::join_all(all.iter().map(|id| async { job(&b, &key(id), id, 0).await })).await;
        states.iter().all(|j| ["succeeded", "failed", "canceled"].contains(&j["state"].as_str().unwrap()))
    })
    .await;
    assert!(everyone_final, "every job ended after the kill");
    for replica in [&restarted, &b] {
        assert_eq!(fal_capacity(replica).await, (0, 0), "every slot returned, nothing waiting");
    }
    let stats = sim.stats();
    // A job the kill caught while it was being sent ends failed (its submission ambiguous): if
    // fal had taken it, it gives its slot back while its request still runs there, the one way
    // the provider may see one more than the cap; if not, fal never saw it.
    let mut failed = 0;
    for id in &burst {
        failed += usize::from(job(&b, &big, id, 0).await["state"] == "failed");
    }
    assert!(failed <= 1, "{failed} jobs of the burst failed; only the one the kill caught may");
    let peak = stats.peak_in_flight_by_key["kkkk"];
    assert!(peak == 2 || peak == 2 + failed as u64, "the cap held at the provider: {stats:?}");
    // The job the kill caught may have failed before its request left, or after fal took it.
    let sent = stats.routes["submit"];
    assert!(sent <= 13 && sent + failed as u64 >= 13, "each job sent once, but the one the kill caught: {stats:?}");
    assert!(stats.submits_by_prompt.values().all(|n| *n == 1), "no job sent twice: {stats:?}");

    // Fair order: when the other user's job came, the burst's user had its slots full; the next
    // slot to free was that job's, whatever of the burst still waited (a burst job already being
    // sent then, at most one per slot, may end up sent just after it).
    let adapters = connect(&PgSettings { key_cache_ttl: Duration::ZERO, ..db.settings() }).unwrap();
    let store = &*adapters.store;
    let sent = async |id: &str| {
        let job = genjobs_domain::ports::JobStore::job(store, JobId::parse(id).unwrap()).await.unwrap().unwrap();
        (job.created_at(), job.sent_at())
    };
    let (accepted, Some(sent_at)) = sent(&others).await else { panic!("the other user's job was never sent") };
    let mut overtaking = 0;
    for id in &burst {
        // A burst job the kill caught in the middle of its submission was never recorded as sent.
        if let (_, Some(burst_sent)) = sent(id).await {
            overtaking += usize::from(burst_sent > accepted && burst_sent < sent_at);
        }
    }
    assert!(overtaking <= 2, "{overtaking} jobs of the burst were sent ahead of the other user's job");
    assert_ledger_balances(&db, &big_id, 1_000).await;
    assert_ledger_balances(&db, &small_id, 1_000).await;
}
