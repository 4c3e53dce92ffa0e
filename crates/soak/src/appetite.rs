//! Two users of very different appetite, alongside the random clients: one bursts many jobs at
//! once, one submits a job now and then. Each submits with a key of its own that has a budget
//! and a model allowlist, so that the soak sees budgets spent and refused (402
//! `KEY_BUDGET_EXCEEDED`) and models refused (403 `MODEL_NOT_ALLOWED`) under the same chaos.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::clients::{Shared, Tally, User, merge};
use crate::processes::ADMIN_TOKEN;

/// The only model the budgeted keys may use.
pub const ALLOWED_MODEL: &str = "nano-banana";

/// Jobs in one burst of the big user, half with its budgeted key.
const BURST: usize = 16;

/// Time between the big user's bursts.
const BURST_EVERY: Duration = Duration::from_secs(8);

/// Time between the small user's jobs.
const TRICKLE_EVERY: Duration = Duration::from_millis(1_500);

/// A key with a budget and an allowlist.
#[derive(Debug, Clone)]
pub struct BudgetKey {
    /// The key, to submit with.
    pub secret: String,
    /// Its prefix, as the admin API names it.
    pub prefix: String,
    /// Its budget's period.
    pub period: &'static str,
    /// The UTC day it was created on (days since the epoch).
    pub created_day: f64,
}

/// A user of the soak with a budgeted key.
#[derive(Debug, Clone)]
pub struct Appetite {
    /// The user, with its unrestricted key.
    pub user: User,
    /// Its key with a budget.
    pub key: BudgetKey,
}

/// What the two users saw.
#[derive(Debug, Default)]
pub struct AppetiteTally {
    /// Requests answered, by status, and those that got no answer.
    pub tally: Tally,
    /// Jobs the big user had accepted.
    pub burst_accepted: usize,
    /// Jobs the small user had accepted.
    pub trickle_accepted: usize,
    /// 402 `KEY_BUDGET_EXCEEDED` answers, expected once a budget is spent.
    pub budget_refusals: u64,
    /// 403 `MODEL_NOT_ALLOWED` answers, expected for a model outside a key's list.
    pub model_refusals: u64,
}

impl Shared {
    /// Creates a user and a key of it with `budget` credits per `period` for [`ALLOWED_MODEL`]
    /// only.
    ///
    /// # Errors
    /// When the user or its key cannot be created.
    pub async fn create_appetite(
        &self,
        name: &str,
        credits: u64,
        max_concurrent_jobs: u64,
        budget: u64,
        period: &'static str,
    ) -> Result<Appetite, String> {
        let user = self.create_user_with(name, credits, max_concurrent_jobs).await?;
        let body = json!({"name": format!("{name}-budgeted"), "models": [ALLOWED_MODEL],
            "budget": {"credits": budget, "period": period}});
        let path = format!("/api/admin/users/{}/keys", user.id);
        let mut tally = Tally::default();
        for _ in 0..20 {
            if let Some((StatusCode::CREATED, key)) =
                self.call(&mut tally, Method::POST, &path, ADMIN_TOKEN, Some(&body), None).await
            {
                let field = |f: &str| key[f].as_str().map(str::to_owned).ok_or(format!("no {f} in {key}"));
                let key = BudgetKey {
                    secret: field("api_key")?,
                    prefix: field("prefix")?,
                    period,
                    created_day: (crate::clock::epoch_now() / 86_400.0).floor(),
                };
                return Ok(Appetite { user, key });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Err(format!("could not create the budgeted key of {name}"))
    }
}

fn job_body(label: &str, model: &str) -> Value {
    json!({"prompt": format!("{label} {}", uuid::Uuid::new_v4()), "model": model})
}

/// Submits one job; records what the answer means.
async fn submit(shared: &Shared, who: &Appetite, bearer: &str, body: &Value, seen: &mut AppetiteTally) -> bool {
    let mut tally = Tally::default();
    let answer = shared.call(&mut tally, Method::POST, "/api/v1/images/generations", bearer, Some(body), None).await;
    merge(&mut seen.tally, tally);
    let Some((status, value)) = answer else { return false };
    let code = value["error"]["code"].as_str().unwrap_or_default();
    match status {
        StatusCode::ACCEPTED => {
            shared.note_accepted(&who.user, &value, None);
            return true;
        }
        StatusCode::PAYMENT_REQUIRED if code == "KEY_BUDGET_EXCEEDED" && bearer == who.key.secret => {
            seen.budget_refusals += 1;
        }
        StatusCode::FORBIDDEN if code == "MODEL_NOT_ALLOWED" && bearer == who.key.secret => seen.model_refusals += 1,
        StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS => {}
        _ => shared.violation(format!("user {}: a submission was answered {status}: {value}", who.user.id)),
    }
    false
}

/// The big user: every [`BURST_EVERY`], [`BURST`] jobs at once, half with its budgeted key.
pub async fn burst_until(shared: &Shared, big: &Appetite, deadline: Instant) -> AppetiteTally {
    let mut seen = AppetiteTally::default();
    while Instant::now() < deadline {
        let submissions = (0..BURST).map(|i| {
            let bearer = if i % 2 == 0 { big.user.key.clone() } else { big.key.secret.clone() };
            (bearer, job_body("burst", ALLOWED_MODEL))
        });
        let answers = futures_util::future::join_all(submissions.map(|(bearer, body)| async move {
            let mut one = AppetiteTally::default();
            let accepted = submit(shared, big, &bearer, &body, &mut one).await;
            (accepted, one)
        }))
        .await;
        for (accepted, one) in answers {
            seen.burst_accepted += usize::from(accepted);
            add(&mut seen, one);
        }
        tokio::time::sleep(BURST_EVERY).await;
    }
    seen
}

/// The small user: a job every [`TRICKLE_EVERY`] with its budgeted key, and now and then one for
/// a model its key may not use.
pub async fn trickle_until(shared: &Shared, small: &Appetite, deadline: Instant) -> AppetiteTally {
    let mut seen = AppetiteTally::default();
    let mut round = 0u64;
    while Instant::now() < deadline {
        round += 1;
        let accepted = submit(shared, small, &small.key.secret, &job_body("trickle", ALLOWED_MODEL), &mut seen).await;
        seen.trickle_accepted += usize::from(accepted);
        if round.is_multiple_of(5)
            && submit(shared, small, &small.key.secret, &job_body("trickle", "flux-pro"), &mut seen).await
        {
            shared.violation(format!("user {}: a key limited to {ALLOWED_MODEL} had flux-pro accepted", small.user.id));
        }
        tokio::time::sleep(TRICKLE_EVERY).await;
    }
    seen
}

fn add(into: &mut AppetiteTally, other: AppetiteTally) {
    merge(&mut into.tally, other.tally);
    into.burst_accepted += other.burst_accepted;
    into.trickle_accepted += other.trickle_accepted;
    into.budget_refusals += other.budget_refusals;
    into.model_refusals += other.model_refusals;
}

/// Both users' counts together.
#[must_use]
pub fn combine(mut first: AppetiteTally, second: AppetiteTally) -> AppetiteTally {
    add(&mut first, second);
    first
}
