//! The end of a soak, for money: every job's charge is its price × the units it delivered
//! (never more than it held), the charges add up to what was spent, each job's provider cost is
//! its units × its route's cost, and the reconciliation's sums per provider key are the usage
//! report's and the jobs' own.

use std::collections::BTreeMap;

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::clients::{Shared, Tally};
use crate::processes::ADMIN_TOKEN;

/// What the money checks found.
#[derive(Debug, Default)]
pub struct CostReport {
    /// Jobs checked.
    pub jobs: u64,
    /// Credits charged, over every job.
    pub charged: u64,
    /// What the providers billed, per provider, in billionths of a dollar.
    pub cost_by_provider: BTreeMap<String, i128>,
}

impl CostReport {
    /// Prints the figures.
    pub fn print(&self) {
        let costs: BTreeMap<&String, String> = self.cost_by_provider.iter().map(|(p, c)| (p, dollars(*c))).collect();
        println!("soak: costs: {} jobs, {} credits charged, provider cost {costs:?}", self.jobs, self.charged);
    }
}

/// A decimal string in billionths.
fn billionths(text: &str) -> Option<i128> {
    let (negative, unsigned) = text.strip_prefix('-').map_or((false, text), |rest| (true, rest));
    let (whole, fraction) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    if fraction.len() > 9 {
        return None;
    }
    let value = whole.parse::<i128>().ok()? * 1_000_000_000 + format!("{fraction:0<9}").parse::<i128>().ok()?;
    Some(if negative { -value } else { value })
}

fn dollars(billionths: i128) -> String {
    format!("{}.{:09}", billionths / 1_000_000_000, (billionths % 1_000_000_000).abs())
}

async fn get(shared: &Shared, tally: &mut Tally, path: &str) -> Option<Value> {
    match shared.call(tally, Method::GET, path, ADMIN_TOKEN, None, None).await {
        Some((StatusCode::OK, body)) => Some(body),
        _ => None,
    }
}

/// Every job of every user, as the operators' listing pages them.
async fn every_job(shared: &Shared, tally: &mut Tally) -> Option<Vec<Value>> {
    let mut jobs = Vec::new();
    let mut path = "/api/admin/jobs?limit=100".to_owned();
    loop {
        let page = get(shared, tally, &path).await?;
        jobs.extend(page["data"].as_array().cloned().unwrap_or_default());
        match page["next"].as_str() {
            Some(next) => path = format!("/api/admin/jobs?limit=100&before={next}"),
            None => return Some(jobs),
        }
    }
}

/// What a succeeded job should have been charged: its model's price × the images it delivered,
/// or × the seconds its video lasted (the seconds asked for when the provider did not say),
/// never more than it held.
fn expected_charge(job: &Value, request: &Value, model: &Value) -> u64 {
    let price = &model["price"];
    let outputs = job["outputs"].as_array().cloned().unwrap_or_default();
    let units = match price["per"].as_str() {
        Some("second") => {
            let asked = request["duration_sec"].as_u64().unwrap_or(0);
            let delivered = outputs
                .iter()
                .filter_map(|o| o["meta"]["duration_sec"].as_f64())
                .map(f64::ceil)
                .fold(None, |m: Option<f64>, d| Some(m.map_or(d, |m| m.max(d))));
            delivered.map_or(asked, |d| (d as u64).min(asked))
        }
        _ => outputs.len() as u64,
    };
    let resolution = request["resolution"].as_str().unwrap_or_default();
    let rate = price["by_resolution"][resolution].as_u64().or_else(|| price["credits"].as_u64()).unwrap_or(0);
    (rate * units).min(job["credits_held"].as_u64().unwrap_or(0))
}

/// Checks every job's charge and provider cost, then the reconciliation against the usage report
/// and the jobs.
pub async fn check_costs(shared: &Shared, tally: &mut Tally) -> CostReport {
    let mut report = CostReport::default();
    let violation = |what: String| shared.violation(format!("costs: {what}"));
    let (Some(models), Some(jobs)) = (get(shared, tally, "/api/admin/models").await, every_job(shared, tally).await)
    else {
        violation("the catalog or the jobs could not be read".into());
        return report;
    };
    let models: BTreeMap<String, Value> = models["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| Some((m["id"].as_str()?.to_owned(), m.clone())))
        .collect();
    let (mut expected_total, mut charged_total) = (0u64, 0u64);
    for listed in &jobs {
        let id = listed["id"].as_str().unwrap_or_default();
        let Some(detail) = get(shared, tally, &format!("/api/admin/jobs/{id}")).await else {
            violation(format!("job {id} could not be read"));
            continue;
        };
        report.jobs += 1;
        let charged: u64 = detail["ledger"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["kind"] == "charge")
            .filter_map(|e| e["credits"].as_u64())
            .sum();
        let model = models.get(detail["model"].as_str().unwrap_or_default()).cloned().unwrap_or(Value::Null);
        let expected = match detail["state"].as_str() {
            Some("succeeded") => expected_charge(&detail, &detail["request"], &model),
            _ => 0,
        };
        if charged != expected {
            violation(format!("job {id} was charged {charged}, its price × units delivered is {expected}"));
        }
        (expected_total, charged_total) = (expected_total + expected, charged_total + charged);
        let provider = detail["upstream"].as_str().unwrap_or("none").to_owned();
        let route = model["routes"].as_array().into_iter().flatten().find(|r| r["provider"] == provider.as_str());
        let usd = route.and_then(|r| r["cost"]["usd"].as_str()).and_then(billionths);
        let (units, cost) = (
            detail["provider_units"].as_str().and_then(billionths),
            detail["provider_cost_usd"].as_str().and_then(billionths),
        );
        if let (Some(units), Some(cost), Some(usd)) = (units, cost, usd) {
            let product = units * usd;
            let rounded = (product + 500_000_000) / 1_000_000_000;
            if rounded != cost {
                violation(format!("job {id} cost {cost} billionths, its units × its route's cost is {rounded}"));
            }
            *report.cost_by_provider.entry(provider).or_default() += cost;
        }
    }
    report.charged = charged_total;
    if expected_total != charged_total {
        violation(format!("charges add up to {charged_total}, prices × units delivered to {expected_total}"));
    }
    check_reconciliation(shared, tally, &report).await;
    report
}

/// The reconciliation's cost per provider key is the usage report's, and per provider the jobs'.
async fn check_reconciliation(shared: &Shared, tally: &mut Tally, report: &CostReport) {
    let violation = |what: String| shared.violation(format!("costs: {what}"));
    let (Some(reconciled), Some(usage)) = (
        get(shared, tally, "/api/admin/reconciliation").await,
        get(shared, tally, "/api/admin/usage?group_by=provider_key").await,
    ) else {
        violation("the reconciliation or the usage report could not be read".into());
        return;
    };
    let mut by_key: BTreeMap<String, i128> = BTreeMap::new();
    let mut by_provider: BTreeMap<String, i128> = BTreeMap::new();
    for row in reconciled["data"].as_array().into_iter().flatten() {
        let cost = row["cost_usd"].as_str().and_then(billionths).unwrap_or(0);
        *by_key.entry(row["key_hint"].as_str().unwrap_or_default().to_owned()).or_default() += cost;
        *by_provider.entry(row["provider"].as_str().unwrap_or_default().to_owned()).or_default() += cost;
    }
    let used: BTreeMap<String, i128> = usage["data"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|row| {
            let key = row["provider_key"].as_str().unwrap_or_default().to_owned();
            (key, row["provider_cost_usd"].as_str().and_then(billionths).unwrap_or(0))
        })
        .filter(|(_, cost)| *cost != 0)
        .collect();
    by_key.retain(|_, cost| *cost != 0);
    if by_key != used {
        violation(format!("the reconciliation's cost per provider key {by_key:?} is not the usage report's {used:?}"));
    }
    by_provider.retain(|_, cost| *cost != 0);
    let jobs: BTreeMap<String, i128> =
        report.cost_by_provider.iter().filter(|(_, c)| **c != 0).map(|(p, c)| (p.clone(), *c)).collect();
    if by_provider != jobs {
        violation(format!("the reconciliation's cost per provider {by_provider:?} is not the jobs' {jobs:?}"));
    }
}
