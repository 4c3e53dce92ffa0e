//! The ledger and usage reports on the wire: the ledger page, usage rows in JSON, and the same
//! rows as CSV with a header row naming the JSON fields.

use genjobs_domain::ports::{UsageGrouping, UsageRow};
use genjobs_domain::usecases::{LedgerEntry, LedgerPage};
use serde::Serialize;
use utoipa::ToSchema;

use super::responses::iso;
use super::schemas::timestamp_schema;

/// One credit movement.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = LedgerEntry)]
pub struct LedgerEntryView {
    /// The entry's id, increasing with time.
    id: String,
    /// When it was recorded.
    #[schema(schema_with = timestamp_schema)]
    created_at: String,
    /// `grant`, `hold`, `release` or `charge`.
    kind: &'static str,
    /// The job it belongs to; null for grants.
    job_id: Option<String>,
    /// Credits moved; negative only for a negative grant.
    credits: i64,
}

/// A page of the caller's ledger, newest first.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = LedgerPage)]
pub struct LedgerPageView {
    /// The entries.
    data: Vec<LedgerEntryView>,
    /// The `before` of the next page, or null.
    next: Option<String>,
}

impl From<LedgerPage> for LedgerPageView {
    fn from(page: LedgerPage) -> Self {
        let entry = |e: LedgerEntry| LedgerEntryView {
            id: e.id.to_string(),
            created_at: iso(e.at),
            kind: e.kind.as_str(),
            job_id: e.job_id.map(|id| id.to_string()),
            credits: e.credits,
        };
        Self { data: page.entries.into_iter().map(entry).collect(), next: page.next.map(|id| id.to_string()) }
    }
}

/// One group of a usage report.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = UsageRow)]
pub struct UsageRowView {
    /// The UTC day (`YYYY-MM-DD`), when grouped by day.
    #[serde(skip_serializing_if = "Option::is_none")]
    day: Option<String>,
    /// The model, when grouped by model.
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<String>,
    /// The user, when grouped by user (operators' report).
    #[serde(skip_serializing_if = "Option::is_none")]
    user_id: Option<String>,
    /// Jobs created in the group.
    jobs: u64,
    /// Of which succeeded.
    succeeded: u64,
    /// Of which failed.
    failed: u64,
    /// Of which were canceled.
    canceled: u64,
    /// Credits charged for them.
    credits_spent: u64,
}

impl From<UsageRow> for UsageRowView {
    fn from(row: UsageRow) -> Self {
        Self {
            day: row.day.map(|day| day.to_string()),
            model: row.model,
            user_id: row.user_id.map(|id| id.to_string()),
            jobs: row.jobs,
            succeeded: row.succeeded,
            failed: row.failed,
            canceled: row.canceled,
            credits_spent: row.credits_spent,
        }
    }
}

/// The rows as CSV: a header naming the JSON fields (the group's column first), one line a row.
#[must_use]
pub fn usage_csv(group_by: UsageGrouping, rows: &[UsageRowView]) -> String {
    let group = match group_by {
        UsageGrouping::Day => "day",
        UsageGrouping::Model => "model",
        UsageGrouping::User => "user_id",
        UsageGrouping::DayAndModel => "day,model",
    };
    let mut csv = format!("{group},jobs,succeeded,failed,canceled,credits_spent\n");
    for row in rows {
        let key: Vec<String> =
            [&row.day, &row.model, &row.user_id].into_iter().flatten().map(|value| csv_field(value)).collect();
        csv.push_str(&format!(
            "{},{},{},{},{},{}\n",
            key.join(","),
            row.jobs,
            row.succeeded,
            row.failed,
            row.canceled,
            row.credits_spent
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
        let row = UsageRowView {
            day: None,
            model: Some("a,b".into()),
            user_id: None,
            jobs: 3,
            succeeded: 2,
            failed: 1,
            canceled: 0,
            credits_spent: 8,
        };
        assert_eq!(
            usage_csv(UsageGrouping::Model, &[row]),
            "model,jobs,succeeded,failed,canceled,credits_spent\n\"a,b\",3,2,1,0,8\n"
        );
    }
}
