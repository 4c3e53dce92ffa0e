//! The reconciliation in memory: the live jobs created since the last seal plus the rollup, per day,
//! provider and provider key, as the Postgres store counts them; and the live jobs billed more
//! units than they were charged for.

use std::collections::BTreeMap;

use genjobs_domain::ports::{MAX_MISMATCHES, Reconciliation, ReconciliationQuery, ReconciliationRow, UnitsMismatch};
use time::Date;

use super::State;
use super::usage::{Counts, counted, utc_day};

pub(super) fn reconcile(state: &State, query: &ReconciliationQuery) -> Reconciliation {
    let mut groups: BTreeMap<(Date, String, Option<String>), Counts> = BTreeMap::new();
    for ((day, _, _, provider, _, key_hint), counts) in counted(state) {
        let Some(provider) = provider else { continue };
        let in_range = (query.from..=query.to).contains(&day);
        if counts.billed == 0 || !in_range || query.provider.as_ref().is_some_and(|only| *only != provider) {
            continue;
        }
        groups.entry((day, provider, key_hint)).or_default().add(counts);
    }
    let rows = groups
        .into_iter()
        .map(|((day, provider, key_hint), counts)| ReconciliationRow {
            day,
            provider,
            key_hint,
            jobs: counts.billed,
            units: counts.provider_units,
            cost_usd: counts.provider_cost,
        })
        .collect();
    let mut mismatched: Vec<_> = state
        .jobs
        .values()
        .map(|row| &row.job)
        .filter(|job| (query.from..=query.to).contains(&utc_day(job.created_at())))
        .filter(|job| {
            let provider = job.upstream().map(|upstream| upstream.provider());
            query.provider.as_deref().is_none_or(|only| provider == Some(only))
        })
        .filter_map(|job| {
            let bill = job.provider_bill()?;
            let charged = bill.units_charged?;
            (bill.units > charged).then(|| {
                let mismatch = UnitsMismatch {
                    job_id: job.id(),
                    model: job.model().to_string(),
                    units_charged: charged,
                    units_reported: bill.units,
                };
                (job.created_at(), mismatch)
            })
        })
        .collect();
    mismatched.sort_by_key(|(at, mismatch)| (*at, mismatch.job_id));
    let mismatches = mismatched.into_iter().take(MAX_MISMATCHES).map(|(_, mismatch)| mismatch).collect();
    Reconciliation { rows, mismatches }
}
