//! The ledger and usage reports on the wire: the ledger page, usage rows in JSON, and the same
//! rows as CSV with a header row naming the JSON fields.

use genjobs_api::{LedgerEntry, LedgerPage, UsageRow};
use genjobs_domain::decimal::Decimal;
use genjobs_domain::ports::{self, UsageGrouping};
use genjobs_domain::usecases;

use super::responses::iso;

/// One entry of a ledger.
#[must_use]
pub fn ledger_entry_view(e: usecases::LedgerEntry) -> LedgerEntry {
    LedgerEntry {
        id: e.id.to_string(),
        created_at: iso(e.at),
        kind: e.kind.as_str().to_owned(),
        job_id: e.job_id.map(|id| id.to_string()),
        credits: e.credits,
    }
}

/// A page of the caller's ledger.
#[must_use]
pub fn ledger_page_view(page: usecases::LedgerPage) -> LedgerPage {
    LedgerPage {
        data: page.entries.into_iter().map(ledger_entry_view).collect(),
        next: page.next.map(|id| id.to_string()),
    }
}

/// One group of a usage report grouped by `group_by`.
#[must_use]
pub fn usage_row_view(group_by: UsageGrouping, row: ports::UsageRow) -> UsageRow {
    UsageRow {
        day: row.day.map(|day| day.to_string()),
        model: row.model,
        user_id: row.user_id.map(|id| id.to_string()),
        provider: (group_by == UsageGrouping::Provider).then_some(row.provider),
        key: (group_by == UsageGrouping::Key).then_some(row.key),
        jobs: row.jobs,
        succeeded: row.succeeded,
        failed: row.failed,
        canceled: row.canceled,
        credits_spent: row.credits_spent,
        content_refused: row.content_refused,
        provider_key: (group_by == UsageGrouping::ProviderKey).then_some(row.provider_key),
        provider_cost_usd: None,
        revenue_usd: None,
        margin_usd: None,
    }
}

/// One group of the operators' usage report: the row with what the providers billed for it,
/// what its credits are worth at `credit_usd` a credit, and the difference.
#[must_use]
pub fn admin_usage_row_view(group_by: UsageGrouping, row: ports::UsageRow, credit_usd: Decimal) -> UsageRow {
    let (cost, revenue, margin) = (row.provider_cost_usd, row.revenue_usd(credit_usd), row.margin_usd(credit_usd));
    UsageRow {
        provider_cost_usd: Some(cost.to_string()),
        revenue_usd: Some(revenue.to_string()),
        margin_usd: Some(margin.to_string()),
        ..usage_row_view(group_by, row)
    }
}

/// A CSV column of a group: its header (the JSON field's name) and its value in a row.
type GroupColumn = (&'static str, fn(&UsageRow) -> Option<&str>);

const DAY: GroupColumn = ("day", |row| row.day.as_deref());
const MODEL: GroupColumn = ("model", |row| row.model.as_deref());
const USER: GroupColumn = ("user_id", |row| row.user_id.as_deref());
const PROVIDER: GroupColumn = ("provider", |row| row.provider.as_ref().and_then(Option::as_deref));
const KEY: GroupColumn = ("key", |row| row.key.as_ref().and_then(Option::as_deref));
const PROVIDER_KEY: GroupColumn = ("provider_key", |row| row.provider_key.as_ref().and_then(Option::as_deref));

/// The rows as CSV: a header naming the JSON fields (the group's columns first), one line a row;
/// a group's value that JSON gives as null (the jobs no provider took) is an empty field.
#[must_use]
pub fn usage_csv(group_by: UsageGrouping, rows: &[UsageRow]) -> String {
    let group: &[GroupColumn] = match group_by {
        UsageGrouping::Day => &[DAY],
        UsageGrouping::Model => &[MODEL],
        UsageGrouping::User => &[USER],
        UsageGrouping::DayAndModel => &[DAY, MODEL],
        UsageGrouping::Provider => &[PROVIDER],
        UsageGrouping::Key => &[KEY],
        UsageGrouping::ProviderKey => &[PROVIDER_KEY],
    };
    let header: Vec<&str> = group.iter().map(|(name, _)| *name).collect();
    let mut csv = format!(
        "{},jobs,succeeded,failed,canceled,credits_spent,content_refused,provider_cost_usd,revenue_usd,margin_usd\n",
        header.join(",")
    );
    for row in rows {
        let key: Vec<String> = group.iter().map(|(_, value)| value(row).map(csv_field).unwrap_or_default()).collect();
        let money = [&row.provider_cost_usd, &row.revenue_usd, &row.margin_usd].map(|m| m.clone().unwrap_or_default());
        csv.push_str(&format!(
            "{},{},{},{},{},{},{},{}\n",
            key.join(","),
            row.jobs,
            row.succeeded,
            row.failed,
            row.canceled,
            row.credits_spent,
            row.content_refused,
            money.join(",")
        ));
    }
    csv
}

/// A field quoted when it holds a comma, a quote or a line break (RFC 4180).
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) { format!("\"{}\"", text.replace('"', "\"\"")) } else { text.to_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_names_the_json_fields_and_quotes_what_needs_it() {
        let row = UsageRow {
            day: None,
            model: Some("a,b".into()),
            user_id: None,
            provider: None,
            key: None,
            jobs: 3,
            succeeded: 2,
            failed: 1,
            canceled: 0,
            credits_spent: 8,
            provider_key: None,
            provider_cost_usd: Some("0.5".into()),
            revenue_usd: Some("0.08".into()),
            margin_usd: Some("-0.42".into()),
            content_refused: 1,
        };
        assert_eq!(
            usage_csv(UsageGrouping::Model, &[row]),
            "model,jobs,succeeded,failed,canceled,credits_spent,content_refused,provider_cost_usd,revenue_usd,margin_usd\n\"a,b\",3,2,1,0,8,1,0.5,0.08,-0.42\n"
        );
    }

    #[test]
    fn csv_by_provider_leaves_the_jobs_no_provider_took_empty() {
        let row = |provider: Option<&str>| UsageRow {
            day: None,
            model: None,
            user_id: None,
            provider: Some(provider.map(str::to_owned)),
            key: None,
            jobs: 1,
            succeeded: 0,
            failed: 1,
            canceled: 0,
            credits_spent: 0,
            provider_key: None,
            provider_cost_usd: Some("0".into()),
            revenue_usd: Some("0".into()),
            margin_usd: Some("0".into()),
            content_refused: 0,
        };
        assert_eq!(
            usage_csv(UsageGrouping::Provider, &[row(None), row(Some("replicate"))]),
            "provider,jobs,succeeded,failed,canceled,credits_spent,content_refused,provider_cost_usd,revenue_usd,margin_usd\n,1,0,1,0,0,0,0,0,0\nreplicate,1,0,1,0,0,0,0,0,0\n"
        );
    }
}
