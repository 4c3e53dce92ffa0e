//! The soak's clients: each a user doing what users do, at random, against whichever replica is
//! up, and recording every answer that breaks a rule.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::processes::{ADMIN_TOKEN, Cluster};

/// How long after a database termination a 503 is what the rules expect.
const DATABASE_AWAY: Duration = Duration::from_secs(5);

/// The random clients' jobs active at once: few, so that the backlog they leave at fal's capped
/// keys drains in seconds at the end, and so that the small user's wait measures fair order
/// rather than their pile.
const RANDOM_CLIENT_MAX_CONCURRENT_JOBS: u64 = 3;

/// A user of the soak.
#[derive(Debug, Clone)]
pub struct User {
    /// Its id.
    pub id: String,
    /// Its API key.
    pub key: String,
}

/// What every client shares: the replicas, what was accepted, and what went wrong.
pub struct Shared {
    cluster: Arc<Cluster>,
    http: reqwest::Client,
    state: Mutex<SharedState>,
}

#[derive(Default)]
struct SharedState {
    /// Job ids accepted (a 202 seen), by user id.
    accepted: BTreeMap<String, BTreeSet<String>>,
    /// The job an idempotency key first answered with.
    idempotent: HashMap<String, String>,
    violations: Vec<String>,
    database_away_since: Option<Instant>,
    /// Spans of wall-clock time (seconds since the epoch) when a replica was down, fal was down
    /// or database sessions were cut: a job that waited across one waited for the chaos.
    disturbances: Vec<(f64, f64)>,
}

/// One client's counts.
#[derive(Debug, Default)]
pub struct Tally {
    /// Requests answered, by status.
    pub statuses: BTreeMap<u16, u64>,
    /// Requests that got no answer (a replica killed under them).
    pub transport_errors: u64,
}

fn random(below: u64) -> u64 {
    u64::try_from(uuid::Uuid::new_v4().as_u128() % u128::from(below.max(1))).unwrap_or(0)
}

impl Shared {
    /// Shared state over `cluster`.
    #[must_use]
    pub fn new(cluster: Arc<Cluster>) -> Self {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(45)).build().unwrap_or_default();
        Self { cluster, http, state: Mutex::new(SharedState::default()) }
    }

    fn state(&self) -> MutexGuard<'_, SharedState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes that the database's sessions are being terminated now.
    pub fn mark_database_away(&self) {
        self.state().database_away_since = Some(Instant::now());
    }

    /// Notes that the chaos disturbed the service from `from` to `to` (seconds since the epoch).
    pub fn disturbed(&self, from: f64, to: f64) {
        self.state().disturbances.push((from, to));
    }

    /// The spans noted by [`Shared::disturbed`].
    #[must_use]
    pub fn disturbances(&self) -> Vec<(f64, f64)> {
        self.state().disturbances.clone()
    }

    /// Records a broken rule.
    pub fn violation(&self, what: String) {
        eprintln!("soak: VIOLATION {what}");
        self.state().violations.push(what);
    }

    /// The violations so far.
    #[must_use]
    pub fn violations(&self) -> Vec<String> {
        self.state().violations.clone()
    }

    /// The replicas' base URLs now.
    #[must_use]
    pub fn bases(&self) -> Vec<String> {
        self.cluster.bases()
    }

    /// The metrics of the replica at `base`, read with the admin token; `None` without an answer.
    pub async fn metrics(&self, base: &str) -> Option<String> {
        let response = self.http.get(format!("{base}/metrics")).bearer_auth(ADMIN_TOKEN).send().await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        response.text().await.ok()
    }

    /// The accepted job ids of `user`.
    #[must_use]
    pub fn accepted(&self, user: &str) -> BTreeSet<String> {
        self.state().accepted.get(user).cloned().unwrap_or_default()
    }

    /// Sends one request to a random replica; `None` when no answer came (a killed replica).
    /// Checks the rules every answer must keep: no 5xx but a 503 while the database is away,
    /// and every error in the envelope.
    pub async fn call(
        &self,
        tally: &mut Tally,
        method: Method,
        path: &str,
        bearer: &str,
        body: Option<&Value>,
        idempotency: Option<&str>,
    ) -> Option<(StatusCode, Value)> {
        let bases = self.cluster.bases();
        let base = &bases[usize::try_from(random(bases.len() as u64)).unwrap_or(0)];
        self.call_at(base, tally, method, path, bearer, body, idempotency).await
    }

    /// [`Shared::call`] to the replica at `base`.
    #[allow(clippy::too_many_arguments, reason = "`call`'s arguments and the replica")]
    pub async fn call_at(
        &self,
        base: &str,
        tally: &mut Tally,
        method: Method,
        path: &str,
        bearer: &str,
        body: Option<&Value>,
        idempotency: Option<&str>,
    ) -> Option<(StatusCode, Value)> {
        let mut request = self.http.request(method.clone(), format!("{base}{path}")).bearer_auth(bearer);
        if let Some(body) = body {
            request = request.json(body);
        }
        if let Some(key) = idempotency {
            request = request.header("idempotency-key", key);
        }
        let Ok(response) = request.send().await else {
            tally.transport_errors += 1;
            return None;
        };
        let status = response.status();
        *tally.statuses.entry(status.as_u16()).or_default() += 1;
        let Ok(text) = response.text().await else {
            tally.transport_errors += 1;
            return None;
        };
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        self.check(method.as_str(), path, status, &value, &text);
        Some((status, value))
    }

    fn check(&self, method: &str, path: &str, status: StatusCode, value: &Value, text: &str) {
        let away = self.state().database_away_since.is_some_and(|at| at.elapsed() < DATABASE_AWAY);
        if status.is_server_error() && !(status == StatusCode::SERVICE_UNAVAILABLE && away) {
            self.violation(format!("{method} {path} answered {status} outside a database outage: {text}"));
        }
        let error = &value["error"];
        let enveloped = ["type", "code", "message"].iter().all(|field| error[field].is_string());
        if !status.is_success() && !enveloped {
            self.violation(format!("{method} {path} answered {status} without the envelope: {text}"));
        }
    }

    /// Creates a user through the admin API, retrying while replicas restart.
    ///
    /// # Errors
    /// When no replica creates it.
    pub async fn create_user(&self, name: &str, credits: u64) -> Result<User, String> {
        self.create_user_with(name, credits, RANDOM_CLIENT_MAX_CONCURRENT_JOBS).await
    }

    /// Creates a user that may have `max_concurrent_jobs` jobs active, retrying while replicas
    /// restart.
    ///
    /// # Errors
    /// When no replica creates it.
    pub async fn create_user_with(&self, name: &str, credits: u64, max_concurrent_jobs: u64) -> Result<User, String> {
        let body = json!({"name": name, "credits": credits, "max_concurrent_jobs": max_concurrent_jobs});
        let mut tally = Tally::default();
        for _ in 0..20 {
            if let Some((StatusCode::CREATED, user)) =
                self.call(&mut tally, Method::POST, "/api/admin/users", ADMIN_TOKEN, Some(&body), None).await
            {
                let field = |f: &str| user[f].as_str().map(str::to_owned).ok_or(format!("no {f} in {user}"));
                return Ok(User { id: field("id")?, key: field("api_key")? });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Err(format!("could not create user {name}"))
    }

    pub(crate) fn note_accepted(&self, user: &User, receipt: &Value, idempotency: Option<&str>) {
        let Some(job) = receipt["job_id"].as_str() else {
            self.violation(format!("a 202 without a job id: {receipt}"));
            return;
        };
        let mut state = self.state();
        state.accepted.entry(user.id.clone()).or_default().insert(job.to_owned());
        if let Some(key) = idempotency {
            let first = state.idempotent.entry(format!("{}/{key}", user.id)).or_insert_with(|| job.to_owned()).clone();
            if first != job {
                drop(state);
                self.violation(format!("idempotency key {key} answered with job {job} after job {first}"));
            }
        }
    }
}

/// One user's client.
pub struct Client {
    shared: Arc<Shared>,
    user: User,
    jobs: Vec<String>,
    tally: Tally,
}

impl Client {
    /// A client acting as `user`.
    #[must_use]
    pub fn new(shared: Arc<Shared>, user: User) -> Self {
        Self { shared, user, jobs: Vec::new(), tally: Tally::default() }
    }

    /// Acts at random until `deadline`; returns its counts.
    pub async fn run_until(mut self, deadline: Instant) -> Tally {
        while Instant::now() < deadline {
            match random(20) {
                0..=7 => self.submit().await,
                8..=10 => self.cancel().await,
                11..=14 => self.read().await,
                15..=16 => self.stream().await,
                _ => self.list().await,
            }
            tokio::time::sleep(Duration::from_millis(10 + random(40))).await;
        }
        self.tally
    }

    fn body() -> (&'static str, Value) {
        let directive = ["", "", "", " [sim:run=1500]", " [sim:fail]", " [sim:reject]", " [sim:flaky=2]"]
            [usize::try_from(random(7)).unwrap_or(0)];
        // Unique, so that the simulator's count of each prompt shows a job sent twice.
        let prompt = format!("soak {}{directive}", uuid::Uuid::new_v4());
        match random(4) {
            0 => ("video", json!({"prompt": prompt, "resolution": "720p", "duration_sec": 4})),
            1 => ("images", json!({"prompt": prompt, "model": "flux-pro", "n": 1 + random(2)})),
            2 => ("images", json!({"prompt": prompt, "model": "ideogram-v3", "aspect_ratio": "16:9"})),
            _ => ("images", json!({"prompt": prompt, "n": 1 + random(3), "seed": random(1000)})),
        }
    }

    async fn submit(&mut self) {
        let (endpoint, body) = Self::body();
        let path = format!("/api/v1/{endpoint}/generations");
        let key = (random(2) == 0).then(|| format!("soak-{}", uuid::Uuid::new_v4()));
        // An idempotent submission is sometimes sent twice at once, as a client retrying early does.
        let attempts = if key.is_some() && random(3) == 0 { 2 } else { 1 };
        let shared = Arc::clone(&self.shared);
        let (user, key_ref) = (&self.user, key.as_deref());
        let mut tallies: Vec<Tally> = (0..attempts).map(|_| Tally::default()).collect();
        let answers = futures_util::future::join_all(
            tallies.iter_mut().map(|tally| shared.call(tally, Method::POST, &path, &user.key, Some(&body), key_ref)),
        )
        .await;
        for tally in tallies {
            merge(&mut self.tally, tally);
        }
        for (status, receipt) in answers.into_iter().flatten() {
            if status == StatusCode::ACCEPTED {
                self.shared.note_accepted(&self.user, &receipt, key.as_deref());
                if let Some(job) = receipt["job_id"].as_str() {
                    self.jobs.push(job.to_owned());
                }
            }
        }
    }

    fn some_job(&self) -> Option<String> {
        (!self.jobs.is_empty()).then(|| self.jobs[usize::try_from(random(self.jobs.len() as u64)).unwrap_or(0)].clone())
    }

    async fn cancel(&mut self) {
        if let Some(job) = self.some_job() {
            let path = format!("/api/v1/jobs/{job}/cancel");
            self.shared.call(&mut self.tally, Method::POST, &path, &self.user.key, None, None).await;
        }
    }

    async fn read(&mut self) {
        if let Some(job) = self.some_job() {
            let path = format!("/api/v1/jobs/{job}?wait={}", random(3));
            self.shared.call(&mut self.tally, Method::GET, &path, &self.user.key, None, None).await;
        }
    }

    async fn list(&mut self) {
        self.shared.call(&mut self.tally, Method::GET, "/api/v1/jobs?limit=20", &self.user.key, None, None).await;
    }

    /// Follows a job's stream for up to 3 s, or until it ends.
    async fn stream(&mut self) {
        let Some(job) = self.some_job() else { return };
        let bases = self.shared.cluster.bases();
        let base = &bases[usize::try_from(random(bases.len() as u64)).unwrap_or(0)];
        let request = self.shared.http.get(format!("{base}/api/v1/jobs/{job}/stream")).bearer_auth(&self.user.key);
        let Ok(response) = request.send().await else {
            self.tally.transport_errors += 1;
            return;
        };
        *self.tally.statuses.entry(response.status().as_u16()).or_default() += 1;
        if !response.status().is_success() {
            let status = response.status();
            let text = response.text().await.unwrap_or_default();
            let value = serde_json::from_str(&text).unwrap_or(Value::Null);
            self.shared.check("GET", "/stream", status, &value, &text);
            return;
        }
        let mut body = response.bytes_stream();
        let _ = tokio::time::timeout(Duration::from_secs(3), async {
            while let Some(Ok(chunk)) = body.next().await {
                let text = String::from_utf8_lossy(&chunk);
                if text.contains("event: done") || text.contains("event: error") {
                    break;
                }
            }
        })
        .await;
    }
}

/// Adds `other`'s counts to `into`.
pub fn merge(into: &mut Tally, other: Tally) {
    for (status, count) in other.statuses {
        *into.statuses.entry(status).or_default() += count;
    }
    into.transport_errors += other.transport_errors;
}
