//! The `boundaries` phase: a user's tree of keys under the chaos, and a client that goes on
//! polling with a revoked key from the same address as everyone else. The tree is a root key
//! with a budget, three children with budgets of their own (together more than the root's),
//! and a grandchild, all made with `POST /api/v1/account/keys`; the children and the
//! grandchild submit jobs throughout the run. Early in the run, a child key is revoked and a
//! client hammers every replica with it, past the replicas' allowance of 401s, while the tree's
//! keys and the admin token, in use from the same address, must never be refused for it.
//!
//! At the end ([`check_trees`]) every key of the tree is at most at its budget, and each
//! parent's `used` is its children's together (the root submits nothing itself): no ancestor
//! was taken past its budget by its descendants' jobs.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::clients::{Shared, Tally, User};
use crate::processes::ADMIN_TOKEN;

/// The root's budget: spent in the first seconds of a run.
const ROOT_BUDGET: u64 = 48;

/// Each child's budget: together more than the root's, so the root's is the one that binds.
const CHILD_BUDGET: u64 = 24;

/// The grandchild's budget, within its parent's.
const GRANDCHILD_BUDGET: u64 = 12;

/// When the hammering starts and stops, as shares of the run: before the first kill, so that
/// the replicas it spends the allowance of keep the keys they saw in use.
const HAMMER_FROM: f64 = 0.1;
const HAMMER_UNTIL: f64 = 0.3;

/// Requests with the revoked key per replica in each round of the hammering, and the pause
/// between rounds: some hundreds a second, far past the allowance, without starving the run.
const HAMMER_ROUND: usize = 20;
const HAMMER_PAUSE: Duration = Duration::from_millis(50);

/// Time between two jobs of each key of the tree.
const SUBMIT_EVERY: Duration = Duration::from_millis(400);

/// A user's tree of keys.
#[derive(Debug, Clone)]
pub struct KeyTree {
    /// The user, with its unrestricted key (which reads every job for the final checks).
    pub user: User,
    /// The root's prefix.
    pub root: String,
    /// The keys that submit (children, then the grandchild): their secret and prefix.
    pub submitters: Vec<(String, String)>,
    /// A child revoked before the hammering: what the hammering client presents.
    pub revoked: String,
}

/// What the phase saw.
#[derive(Debug, Default)]
pub struct BoundariesTally {
    /// The tree's keys' requests answered, by status.
    pub tree: Tally,
    /// The revoked key's requests answered, by status.
    pub hammer: Tally,
    /// Jobs the tree's keys had accepted.
    pub accepted: usize,
    /// 402 `KEY_BUDGET_EXCEEDED` answers to the tree's keys.
    pub budget_refusals: u64,
}

/// A key made with `maker`, retried while replicas restart: its secret and prefix.
async fn make_key(shared: &Shared, maker: &str, body: &Value) -> Result<(String, String), String> {
    let mut tally = Tally::default();
    for _ in 0..20 {
        if let Some((StatusCode::CREATED, key)) =
            shared.call(&mut tally, Method::POST, "/api/v1/account/keys", maker, Some(body), None).await
        {
            let field = |f: &str| key[f].as_str().map(str::to_owned).ok_or(format!("no {f} in {key}"));
            return Ok((field("api_key")?, field("prefix")?));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!("could not make a key with {body}"))
}

fn budget(credits: u64) -> Value {
    json!({"budget": {"credits": credits, "period": "total"}})
}

/// Creates the user and its tree of keys; the revoked key is used once on every replica first,
/// so that each knew it as valid before its revocation.
///
/// # Errors
/// When the user or a key cannot be made.
pub async fn plant(shared: &Shared, credits: u64) -> Result<KeyTree, String> {
    let user = shared.create_user_with("soak-tree", credits, 100).await?;
    let (root_secret, root) = make_key(shared, &user.key, &budget(ROOT_BUDGET)).await?;
    let mut submitters = Vec::new();
    for _ in 0..3 {
        submitters.push(make_key(shared, &root_secret, &budget(CHILD_BUDGET)).await?);
    }
    let grandchild = make_key(shared, &submitters[0].0, &budget(GRANDCHILD_BUDGET)).await?;
    submitters.push(grandchild);
    let (revoked, revoked_prefix) = make_key(shared, &root_secret, &json!({})).await?;
    let mut tally = Tally::default();
    for base in shared.bases() {
        for (secret, _) in submitters.iter().chain(std::iter::once(&(revoked.clone(), revoked_prefix.clone()))) {
            shared.call_at(&base, &mut tally, Method::GET, "/api/v1/account", secret, None, None).await;
        }
    }
    let path = format!("/api/v1/account/keys/{revoked_prefix}");
    let revoked_answer = shared.call(&mut tally, Method::DELETE, &path, &user.key, None, None).await;
    if !matches!(revoked_answer, Some((StatusCode::NO_CONTENT, _))) {
        return Err(format!("could not revoke the tree's key: {revoked_answer:?}"));
    }
    Ok(KeyTree { user, root, submitters, revoked })
}

/// Runs the phase until `deadline`: the tree's keys submit and read; between [`HAMMER_FROM`] and
/// [`HAMMER_UNTIL`] of the run, the revoked key hammers every replica.
pub async fn run_until(shared: &Shared, tree: &KeyTree, started: Instant, deadline: Instant) -> BoundariesTally {
    let run = deadline.saturating_duration_since(started);
    let (from, until) = (started + run.mul_f64(HAMMER_FROM), started + run.mul_f64(HAMMER_UNTIL));
    let mut seen = BoundariesTally::default();
    let (work, hammer) = tokio::join!(work_until(shared, tree, deadline), hammer(shared, tree, from, until));
    (seen.tree, seen.accepted, seen.budget_refusals) = work;
    seen.hammer = hammer;
    seen
}

/// The tree's keys submit a job each, and read the admin API, every [`SUBMIT_EVERY`]; an answer
/// 429 to any of them is a violation: their users' rate limits are far above what they send,
/// so only the address's allowance could have refused them.
async fn work_until(shared: &Shared, tree: &KeyTree, deadline: Instant) -> (Tally, usize, u64) {
    let (mut tally, mut accepted, mut refusals) = (Tally::default(), 0, 0);
    while Instant::now() < deadline {
        for (secret, prefix) in &tree.submitters {
            let body = json!({"prompt": format!("tree {}", uuid::Uuid::new_v4()), "model": "nano-banana"});
            let answer =
                shared.call(&mut tally, Method::POST, "/api/v1/images/generations", secret, Some(&body), None).await;
            match answer {
                Some((StatusCode::ACCEPTED, receipt)) => {
                    shared.note_accepted(&tree.user, &receipt, None);
                    accepted += 1;
                }
                Some((StatusCode::PAYMENT_REQUIRED, value)) if value["error"]["code"] == "KEY_BUDGET_EXCEEDED" => {
                    refusals += 1;
                }
                Some((StatusCode::TOO_MANY_REQUESTS, value)) => {
                    shared.violation(format!("the tree's key {prefix}, in use, was refused 429: {value}"));
                }
                Some((StatusCode::OK | StatusCode::SERVICE_UNAVAILABLE, _)) | None => {}
                Some((status, value)) => {
                    shared.violation(format!("the tree's key {prefix}: a submission was answered {status}: {value}"));
                }
            }
        }
        let path = format!("/api/admin/users/{}/keys", tree.user.id);
        if let Some((StatusCode::TOO_MANY_REQUESTS, value)) =
            shared.call(&mut tally, Method::GET, &path, ADMIN_TOKEN, None, None).await
        {
            shared.violation(format!("the admin token was refused 429: {value}"));
        }
        tokio::time::sleep(SUBMIT_EVERY).await;
    }
    (tally, accepted, refusals)
}

/// The revoked key polls every replica from `from` to `until`, [`HAMMER_ROUND`] requests a
/// replica at a time; it must only ever be answered 401 or 429.
async fn hammer(shared: &Shared, tree: &KeyTree, from: Instant, until: Instant) -> Tally {
    let mut tally = Tally::default();
    tokio::time::sleep_until(from.into()).await;
    while Instant::now() < until {
        for base in shared.bases() {
            let polls = (0..HAMMER_ROUND).map(|_| {
                let base = base.clone();
                async move {
                    let mut one = Tally::default();
                    let answer =
                        shared.call_at(&base, &mut one, Method::GET, "/api/v1/jobs", &tree.revoked, None, None).await;
                    (answer, one)
                }
            });
            for (answer, one) in futures_util::future::join_all(polls).await {
                crate::clients::merge(&mut tally, one);
                match answer {
                    Some((StatusCode::UNAUTHORIZED | StatusCode::TOO_MANY_REQUESTS, _)) | None => {}
                    Some((status, value)) => {
                        shared.violation(format!("a revoked key was answered {status}: {value}"));
                    }
                }
            }
        }
        tokio::time::sleep(HAMMER_PAUSE).await;
    }
    tally
}

/// Checks the tree's budgets after the run: every key at most at its budget, and each parent's
/// `used` its children's together.
pub async fn check_trees(shared: &Shared, tree: &KeyTree, seen: &BoundariesTally) {
    let path = format!("/api/admin/users/{}/keys", tree.user.id);
    let mut tally = Tally::default();
    let Some((StatusCode::OK, listed)) = shared.call(&mut tally, Method::GET, &path, ADMIN_TOKEN, None, None).await
    else {
        shared.violation("the tree's keys could not be listed at the end".to_owned());
        return;
    };
    let keys = listed["data"].as_array().cloned().unwrap_or_default();
    let used = |prefix: &str| {
        keys.iter().find(|k| k["prefix"] == prefix).and_then(|k| k["budget"]["used"].as_u64()).unwrap_or(u64::MAX)
    };
    for key in &keys {
        let (Some(credits), Some(spent)) = (key["budget"]["credits"].as_u64(), key["budget"]["used"].as_u64()) else {
            continue;
        };
        if spent > credits {
            shared.violation(format!("key {} used {spent} of a budget of {credits}", key["prefix"]));
        }
    }
    let children: u64 = tree.submitters[..3].iter().map(|(_, prefix)| used(prefix)).sum();
    if used(&tree.root) != children {
        shared.violation(format!("the root used {} but its children {children} together", used(&tree.root)));
    }
    let (first_child, grandchild) = (&tree.submitters[0].1, &tree.submitters[3].1);
    if used(first_child) < used(grandchild) {
        shared.violation(format!("a child used {} but its own child {}", used(first_child), used(grandchild)));
    }
    if seen.budget_refusals == 0 {
        shared.violation("the tree's budgets were never spent: no 402 KEY_BUDGET_EXCEEDED seen".to_owned());
    }
    if seen.hammer.statuses.get(&429).copied().unwrap_or(0) == 0 {
        shared.violation("the revoked key's hammering never spent the allowance: no 429 seen".to_owned());
    }
    println!(
        "soak: boundaries: the tree had {} jobs accepted, {} refused by a budget, root used {}/{ROOT_BUDGET}; the revoked key answered {:?}; the tree's keys {:?}",
        seen.accepted,
        seen.budget_refusals,
        used(&tree.root),
        seen.hammer.statuses,
        seen.tree.statuses
    );
}
