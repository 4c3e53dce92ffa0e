//! A transition that moves credits, in one statement: the job's compare-and-set update, then,
//! only if it applied, the owner's balances and the ledger row. One round trip and one
//! implicit transaction instead of five (begin, three statements, commit), and prepared once
//! per connection like the other hot statements.

use diesel::pg::Pg;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::result::QueryResult;
use diesel::sql_types::{BigInt, Integer, Text, Uuid as SqlUuid};
use uuid::Uuid;

use super::job_columns::UpdateMany;

/// The job's update and the credits it moves.
pub(crate) struct Settle {
    /// The job's row, compared and set on its version.
    pub update: UpdateMany,
    /// The owner.
    pub user_id: Uuid,
    /// The ledger row's kind: `settle` or `release`.
    pub kind: &'static str,
    /// The ledger row's amount.
    pub amount: i64,
    /// Credits returned to what is available.
    pub released: i64,
    /// Credits no longer held.
    pub held: i64,
    /// Credits spent.
    pub spent: i64,
    /// 1 when the job becomes final and frees one of its owner's slots.
    pub finished: i32,
    /// 1 when that slot was an admitted batch item's.
    pub batch_finished: i32,
}

impl QueryId for Settle {
    type QueryId = Settle;
    const HAS_STATIC_QUERY_ID: bool = true;
}

/// Returns the job's id when the transition applied, nothing when the version had moved on.
impl Query for Settle {
    type SqlType = SqlUuid;
}

impl QueryFragment<Pg> for Settle {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql("WITH applied AS (");
        self.update.walk_ast(out.reborrow())?;
        // What the job releases goes back to its key's budget counter too, if the counter still
        // counts the period the job was counted under (a job of an earlier period gives nothing
        // to the next). Locked after the job and before the account, as accepts lock the key
        // before the account: `moved` reads `given`, so that it runs first.
        out.push_sql("), given AS (UPDATE api_keys SET budget_used = api_keys.budget_used - ");
        out.push_bind_param::<BigInt, _>(&self.released)?;
        out.push_sql(
            " FROM jobs, applied WHERE jobs.id = applied.id AND api_keys.prefix = jobs.key_prefix \
             AND api_keys.budget_period_start = jobs.budget_period_start RETURNING api_keys.prefix",
        );
        out.push_sql("), moved AS (UPDATE users SET credits_available = credits_available + ");
        out.push_bind_param::<BigInt, _>(&self.released)?;
        out.push_sql(", credits_held = credits_held - ");
        out.push_bind_param::<BigInt, _>(&self.held)?;
        out.push_sql(", credits_spent = credits_spent + ");
        out.push_bind_param::<BigInt, _>(&self.spent)?;
        out.push_sql(", active_jobs = active_jobs - ");
        out.push_bind_param::<Integer, _>(&self.finished)?;
        out.push_sql(", admitted_batch_items = admitted_batch_items - ");
        out.push_bind_param::<Integer, _>(&self.batch_finished)?;
        out.push_sql(" WHERE users.id = ");
        out.push_bind_param::<SqlUuid, _>(&self.user_id)?;
        // Data-modifying CTEs run whether or not they are read; this one moves credits only
        // when the job's update applied.
        out.push_sql(" AND EXISTS (SELECT 1 FROM applied) AND (SELECT count(*) FROM given) >= 0 RETURNING users.id) ");
        out.push_sql("INSERT INTO ledger (user_id, job_id, kind, amount, released) SELECT ");
        out.push_bind_param::<SqlUuid, _>(&self.user_id)?;
        out.push_sql(", applied.id, ");
        out.push_bind_param::<Text, _>(self.kind)?;
        out.push_sql(", ");
        out.push_bind_param::<BigInt, _>(&self.amount)?;
        out.push_sql(", ");
        out.push_bind_param::<BigInt, _>(&self.released)?;
        out.push_sql(" FROM applied RETURNING ledger.job_id");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use diesel::debug_query;
    use genjobs_domain::ids::UserId;
    use genjobs_store_contract::cases::new_job;
    use time::OffsetDateTime;

    use super::*;
    use crate::rows::JobRow;

    #[test]
    fn a_settle_is_one_statement_prepared_once_per_connection() {
        let now = OffsetDateTime::now_utc();
        let row = JobRow::from_job(&new_job(UserId::new_at(now), 4, now)).unwrap();
        let settle = Settle {
            update: UpdateMany::of(&[(&row, 0)]),
            user_id: row.user_id,
            kind: "settle",
            amount: 3,
            released: 1,
            held: 4,
            spent: 3,
            finished: 1,
            batch_finished: 0,
        };
        assert_eq!(settle.is_safe_to_cache_prepared(&Pg), Ok(true));
        assert!(<Settle as QueryId>::query_id().is_some(), "cached by its type, not its text");
        let sql = debug_query::<Pg, _>(&settle).to_string();
        let binds = sql.matches('$').count();
        assert!(sql.contains(&format!("${binds}")) && !sql.contains(&format!("${}", binds + 1)), "{sql}");
        assert!(sql.starts_with("WITH applied AS (WITH t AS"), "{sql}");
    }
}
