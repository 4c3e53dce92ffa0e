//! The `jobs` table's columns, listed once. From the one list come the row type diesel reads and
//! writes, the accept statements (a group's, a budgeted key's, and a batch's items) and the group
//! update of changed jobs (their column lists, casts and binds), so that a new column is added in
//! one place.
//!
//! Each statement is a query fragment of its own with a static query id, so that every
//! connection prepares it once and reuses it: diesel never caches `sql_query` text or `UPDATE`
//! statements, and these run for every job.

use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::sql_types::{Array, BigInt, Bool, Integer, Jsonb, Nullable, SmallInt, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::schema::jobs;

macro_rules! job_columns {
    (
        fixed { $($fixed:ident: $fixed_rust:ty => $fixed_sql:ty as $fixed_pg:literal,)* }
        changing { $($col:ident: $rust:ty => $sql:ty as $pg:literal,)* }
    ) => {
        /// A row of `jobs`. `lease_id` names the lease of the driver holding the job: an accept
        /// writes the accepting driver's, if any, and a transition leaves it as it is.
        #[derive(Debug, Clone, Queryable, QueryableByName, Selectable, Insertable)]
        #[diesel(table_name = jobs, check_for_backend(diesel::pg::Pg))]
        pub(crate) struct JobRow {
            $(pub $fixed: $fixed_rust,)*
            $(pub $col: $rust,)*
            pub lease_id: Option<Uuid>,
        }

        /// The columns an accept writes.
        const INSERTED: &[&str] = &[$(stringify!($fixed),)* $(stringify!($col),)* "lease_id"];

        /// The columns a transition may change.
        const CHANGING: &[&str] = &[$(stringify!($col),)*];

        /// `WITH new AS (…)`: the row's binds as the columns of `new`, first in the budgeted
        /// accept statement.
        fn push_new<'b>(row: &'b JobRow, out: &mut AstPass<'_, 'b, Pg>) -> QueryResult<()> {
                out.push_sql("WITH new AS (SELECT ");
                $(
                    out.push_bind_param::<$fixed_sql, _>(&row.$fixed)?;
                    out.push_sql(concat!("::", $fixed_pg, " AS ", stringify!($fixed), ", "));
                )*
                $(
                    out.push_bind_param::<$sql, _>(&row.$col)?;
                    out.push_sql(concat!("::", $pg, " AS ", stringify!($col), ", "));
                )*
                out.push_bind_param::<Nullable<SqlUuid>, _>(&row.lease_id)?;
                out.push_sql("::uuid AS lease_id)");
                Ok(())
        }

        /// The jobs of a group accept, column by column, borrowed from their rows: a batch's
        /// 5,000 items are bound without a copy of their JSON.
        pub(crate) struct AcceptMany<'a> {
            $($fixed: Vec<&'a $fixed_rust>,)*
            $($col: Vec<&'a $rust>,)*
            lease_id: Vec<Option<Uuid>>,
        }

        impl<'a> AcceptMany<'a> {
            /// The accept of `rows`, whose owners must differ: see [`ACCEPT_MANY_REST`].
            pub(crate) fn of(rows: &[&'a JobRow]) -> Self {
                Self {
                    $($fixed: rows.iter().map(|r| &r.$fixed).collect(),)*
                    $($col: rows.iter().map(|r| &r.$col).collect(),)*
                    lease_id: rows.iter().map(|r| r.lease_id).collect(),
                }
            }
        }

        impl AcceptMany<'_> {
            /// `WITH new AS (SELECT * FROM unnest(…)`: the rows' arrays, one bind per column,
            /// however many rows; the statement names the columns of `new` after it.
            fn push_unnest<'b>(&'b self, out: &mut AstPass<'_, 'b, Pg>) -> QueryResult<()> {
                out.push_sql("WITH new AS (SELECT * FROM unnest(");
                $(
                    out.push_bind_param::<Array<$fixed_sql>, _>(&self.$fixed)?;
                    out.push_sql(concat!("::", $fixed_pg, "[], "));
                )*
                $(
                    out.push_bind_param::<Array<$sql>, _>(&self.$col)?;
                    out.push_sql(concat!("::", $pg, "[], "));
                )*
                out.push_bind_param::<Array<Nullable<SqlUuid>>, _>(&self.lease_id)?;
                out.push_sql("::uuid[])");
                Ok(())
            }
        }

        impl QueryFragment<Pg> for AcceptMany<'_> {
            fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
                self.push_unnest(&mut out)?;
                out.push_sql(&ACCEPT_MANY_REST);
                Ok(())
            }
        }

        impl QueryFragment<Pg> for InsertItems<'_> {
            fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
                self.rows.push_unnest(&mut out)?;
                out.push_sql(" AS new(");
                out.push_sql(&INSERTED.join(", "));
                out.push_sql(")), period AS (SELECT ");
                out.push_bind_param::<Nullable<Timestamptz>, _>(&self.budget_period_start)?;
                out.push_sql("::timestamptz AS start)");
                out.push_sql(&INSERT_ITEMS_REST);
                Ok(())
            }
        }

        impl QueryFragment<Pg> for AcceptBudgeted<'_> {
            fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
                push_new(self.row, &mut out)?;
                out.push_sql(", period AS (SELECT ");
                out.push_bind_param::<Timestamptz, _>(&self.period_start)?;
                out.push_sql("::timestamptz AS start, ");
                out.push_bind_param::<Text, _>(self.period)?;
                out.push_sql("::text AS name)");
                out.push_sql(&ACCEPT_BUDGETED_REST);
                Ok(())
            }
        }

        /// The changed rows of a group update, column by column.
        pub(crate) struct UpdateMany {
            ids: Vec<Uuid>,
            expected: Vec<i64>,
            $($col: Vec<$rust>,)*
        }

        impl UpdateMany {
            pub(crate) fn of(rows: &[(&JobRow, i64)]) -> Self {
                Self {
                    ids: rows.iter().map(|(r, _)| r.id).collect(),
                    expected: rows.iter().map(|(_, expected)| *expected).collect(),
                    $($col: rows.iter().map(|(r, _)| r.$col.clone()).collect(),)*
                }
            }
        }

        impl QueryFragment<Pg> for UpdateMany {
            fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
                out.push_sql(UPDATE_MANY_SET);
                out.push_bind_param::<Array<SqlUuid>, _>(&self.ids)?;
                out.push_sql("::uuid[], ");
                out.push_bind_param::<Array<BigInt>, _>(&self.expected)?;
                out.push_sql("::int8[]");
                $(
                    out.push_sql(", ");
                    out.push_bind_param::<Array<$sql>, _>(&self.$col)?;
                    out.push_sql(concat!("::", $pg, "[]"));
                )*
                out.push_sql(&UPDATE_MANY_REST);
                Ok(())
            }
        }
    };
}

job_columns! {
    fixed {
        id: Uuid => SqlUuid as "uuid",
        user_id: Uuid => SqlUuid as "uuid",
        model: String => Text as "text",
        modality: String => Text as "text",
        created_at: OffsetDateTime => Timestamptz as "timestamptz",
        credits_held: i64 => BigInt as "int8",
        input: Value => Jsonb as "jsonb",
        webhook_url: Option<String> => Nullable<Text> as "text",
        request: Option<Value> => Nullable<Jsonb> as "jsonb",
        trace_parent: Option<String> => Nullable<Text> as "text",
        rate_per: String => Text as "text",
        rate_credits: i64 => BigInt as "int8",
        key_prefix: Option<String> => Nullable<Text> as "text",
        rate_percent: i32 => Integer as "int4",
        priority: String => Text as "text",
        start_by: Option<OffsetDateTime> => Nullable<Timestamptz> as "timestamptz",
        routing: Option<Value> => Nullable<Jsonb> as "jsonb",
        batch_id: Option<Uuid> => Nullable<SqlUuid> as "uuid",
        batch_custom_id: Option<String> => Nullable<Text> as "text",
        rate_batch_percent: i32 => Integer as "int4",
    }
    changing {
        state: String => Text as "text",
        moderation: Option<String> => Nullable<Text> as "text",
        progress: i16 => SmallInt as "int2",
        outputs: Option<Value> => Nullable<Jsonb> as "jsonb",
        error: Option<Value> => Nullable<Jsonb> as "jsonb",
        started_at: Option<OffsetDateTime> => Nullable<Timestamptz> as "timestamptz",
        finished_at: Option<OffsetDateTime> => Nullable<Timestamptz> as "timestamptz",
        canceled_at: Option<OffsetDateTime> => Nullable<Timestamptz> as "timestamptz",
        credits_actual: Option<i64> => Nullable<BigInt> as "int8",
        upstream: Option<Value> => Nullable<Jsonb> as "jsonb",
        upstream_key: Option<String> => Nullable<Text> as "text",
        queue_position: Option<i32> => Nullable<Integer> as "int4",
        submit_attempted: bool => Bool as "bool",
        next_poll_at: Option<OffsetDateTime> => Nullable<Timestamptz> as "timestamptz",
        poll_failures: i32 => Integer as "int4",
        waiting_for_capacity: bool => Bool as "bool",
        sent_at: Option<OffsetDateTime> => Nullable<Timestamptz> as "timestamptz",
        billing: Option<Value> => Nullable<Jsonb> as "jsonb",
        provider_units: Option<i64> => Nullable<BigInt> as "int8",
        units_charged: Option<i64> => Nullable<BigInt> as "int8",
        provider_cost: Option<i64> => Nullable<BigInt> as "int8",
        batch_admitted: bool => Bool as "bool",
        version: i64 => BigInt as "int8",
    }
}

/// How both accept statements hold a job's credits on its owner's row (the `UPDATE users` of
/// their `held`, joined to `new`).
const HELD_SET: &str = "SET credits_available = users.credits_available - new.credits_held,
                credits_held = users.credits_held + new.credits_held, active_jobs = users.active_jobs + 1";

/// The ledger row of each job both accept statements inserted (`job`), as their CTE `hold`.
const LEDGER_HOLD: &str = "hold AS (
            INSERT INTO ledger (user_id, job_id, kind, amount)
            SELECT job.user_id, job.id, 'hold', job.credits_held FROM job RETURNING job_id
        )";

/// The owner's jobs a job submitted on its own is checked against: every job counted in
/// `active_jobs` but the admitted batch items, which never refuse one.
const COUNTED_AGAINST_LIMIT: &str = "(users.active_jobs - users.admitted_batch_items)";

/// A batch's items, inserted with their ledger holds in one statement, however many: each
/// column is one array (see [`AcceptMany`]), so the statement has as many binds for 5,000 items
/// as for one. The account's hold and the key's counter are the caller's, in the same
/// transaction.
pub(crate) struct InsertItems<'a> {
    rows: AcceptMany<'a>,
    budget_period_start: Option<OffsetDateTime>,
}

impl<'a> InsertItems<'a> {
    /// The insert of `rows`, counted under the budget period that starts at
    /// `budget_period_start` when their key's budget counts them.
    pub(crate) fn of(rows: &[&'a JobRow], budget_period_start: Option<OffsetDateTime>) -> Self {
        Self { rows: AcceptMany::of(rows), budget_period_start }
    }
}

impl QueryId for InsertItems<'_> {
    type QueryId = InsertItems<'static>;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl Query for InsertItems<'_> {
    /// How many holds it inserted.
    type SqlType = BigInt;
}

/// What follows `new` and `period` in [`InsertItems`].
static INSERT_ITEMS_REST: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        ", job AS (
            INSERT INTO jobs ({columns}, budget_period_start) SELECT new.*, period.start FROM new, period
            RETURNING id, user_id, credits_held
        ), {ledger_hold}
        SELECT count(*) FROM hold",
        columns = INSERTED.join(", "),
        ledger_hold = LEDGER_HOLD,
    )
});

/// Inserts a batch's `rows` and a ledger hold for each; how many.
pub(crate) async fn insert_items(
    conn: &mut AsyncPgConnection,
    rows: &[&JobRow],
    budget_period_start: Option<OffsetDateTime>,
) -> Result<i64, diesel::result::Error> {
    InsertItems::of(rows, budget_period_start).get_result(conn).await
}

/// What one job of a group accept saw and did: its id, the credits available, the active jobs
/// and the concurrent-job limit of its owner in the statement's snapshot, and whether it was
/// inserted. No row for a job whose owner does not exist.
pub(crate) type AcceptedRow = (Uuid, i64, i32, i32, bool);

impl QueryId for AcceptMany<'_> {
    type QueryId = AcceptMany<'static>;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl Query for AcceptMany<'_> {
    type SqlType = (SqlUuid, BigInt, Integer, Integer, Bool);
}

/// What follows the arrays in the group accept: for each job, holds its credits on its owner's
/// row if the owner has enough and a free slot, then inserts the job and its ledger row only if
/// that hold matched; one statement for the whole group, so one round trip, one implicit
/// transaction and one flush. The owners of one group must differ: an `UPDATE` changes a row
/// once however many jobs join it, so a second job of the same owner would be inserted under
/// the first one's hold.
///
/// The owners are locked in the order of their ids first (as every statement that locks several
/// accounts does), so that two groups never wait for each other. The hold's conditions are on
/// the updated row itself, so that Postgres re-checks them against the newest version when
/// another transaction changed the row meanwhile; `account` is the snapshot the statement
/// started from, answered so that a refusal is named by the state its check ran against.
static ACCEPT_MANY_REST: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let values: Vec<String> = INSERTED.iter().map(|c| format!("new.{c}")).collect();
    format!(
        " AS new({columns})), account AS (
            SELECT users.id, users.credits_available, {counted} AS active_jobs, users.max_concurrent_jobs
            FROM users JOIN new ON users.id = new.user_id
        ), locked AS (
            SELECT users.id FROM users JOIN new ON users.id = new.user_id ORDER BY users.id FOR NO KEY UPDATE OF users
        ), held AS (
            UPDATE users
            {held_set}
            FROM new, locked
            WHERE users.id = new.user_id AND users.id = locked.id AND users.credits_available >= new.credits_held
              AND {counted} < users.max_concurrent_jobs
            RETURNING users.id
        ), job AS (
            INSERT INTO jobs ({columns}) SELECT {values} FROM new JOIN held ON held.id = new.user_id
            RETURNING id, user_id, credits_held
        ), {ledger_hold}
        SELECT new.id, account.credits_available, account.active_jobs, account.max_concurrent_jobs,
            hold.job_id IS NOT NULL
        FROM new JOIN account ON account.id = new.user_id LEFT JOIN hold ON hold.job_id = new.id",
        columns = INSERTED.join(", "),
        values = values.join(", "),
        held_set = HELD_SET,
        ledger_hold = LEDGER_HOLD,
        counted = COUNTED_AGAINST_LIMIT,
    )
});

/// Accepts `rows` in one statement (see [`ACCEPT_MANY_REST`]); their owners must differ.
pub(crate) async fn accept_rows(
    conn: &mut AsyncPgConnection,
    rows: &[&JobRow],
) -> Result<Vec<AcceptedRow>, diesel::result::Error> {
    AcceptMany::of(rows).load(conn).await
}

/// The accept statement for a job of a key with a budget (and no concurrency limit of its own):
/// [`Accept`]'s hold, with the key's row locked first (as every statement that locks both does)
/// and its budget counter checked and raised in the same statement, so that an accept on a
/// budgeted key is one round trip as a plain one is. The counter counts from 0 when it counts an
/// earlier period; the job records the period it was counted under. `period` is the budget's
/// period as the cached credentials read it: a key whose budget changed meanwhile matches no row,
/// and the accept takes the transaction instead.
pub(crate) struct AcceptBudgeted<'a> {
    /// The job's row.
    pub row: &'a JobRow,
    /// The start of the budget's current period, as the counter keeps it.
    pub period_start: OffsetDateTime,
    /// The budget's period, as `api_keys.budget_period` keeps it.
    pub period: &'a str,
}

impl QueryId for AcceptBudgeted<'_> {
    type QueryId = AcceptBudgeted<'static>;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl Query for AcceptBudgeted<'_> {
    /// [`Accept`]'s answer, then the key's budget and what it had used in the current period
    /// when its row was locked (both null when the key or its budget was not found).
    type SqlType = (BigInt, Integer, Integer, BigInt, Nullable<BigInt>, Nullable<BigInt>);
}

/// What follows `new` and `period` in the budgeted accept statement. `key` locks the key's row
/// (in READ COMMITTED a locking read answers the newest version, so two accepts on one key count
/// one after the other); the hold matches only if the key's budget fits, and the counter and the
/// job are written only if the hold matched.
static ACCEPT_BUDGETED_REST: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let values: Vec<String> = INSERTED.iter().map(|c| format!("new.{c}")).collect();
    format!(
        ", account AS (
            SELECT users.credits_available, {counted} AS active_jobs, users.max_concurrent_jobs
            FROM users JOIN new ON users.id = new.user_id
        ), key AS (
            SELECT api_keys.prefix, api_keys.budget_credits,
                CASE WHEN api_keys.budget_period_start = period.start THEN api_keys.budget_used ELSE 0 END AS used
            FROM api_keys JOIN new ON api_keys.prefix = new.key_prefix JOIN period ON api_keys.budget_period = period.name
            WHERE api_keys.budget_credits IS NOT NULL AND NOT api_keys.has_children
            FOR NO KEY UPDATE OF api_keys
        ), held AS (
            UPDATE users
            {held_set}
            FROM new, key
            WHERE users.id = new.user_id AND users.credits_available >= new.credits_held
              AND {counted} < users.max_concurrent_jobs AND key.used + new.credits_held <= key.budget_credits
            RETURNING users.id
        ), counted AS (
            UPDATE api_keys SET budget_used = key.used + new.credits_held, budget_period_start = period.start
            FROM new, key, period, held WHERE api_keys.prefix = key.prefix
            RETURNING api_keys.prefix
        ), job AS (
            INSERT INTO jobs ({columns}, budget_period_start) SELECT {values}, period.start FROM new, period, held
            WHERE EXISTS (SELECT 1 FROM counted)
            RETURNING id, user_id, credits_held
        ), {ledger_hold}
        SELECT account.credits_available, account.active_jobs, account.max_concurrent_jobs,
            (SELECT count(*) FROM hold), (SELECT used FROM key), (SELECT budget_credits FROM key)
        FROM account",
        columns = INSERTED.join(", "),
        values = values.join(", "),
        held_set = HELD_SET,
        ledger_hold = LEDGER_HOLD,
        counted = COUNTED_AGAINST_LIMIT,
    )
});

impl QueryId for UpdateMany {
    type QueryId = UpdateMany;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl Query for UpdateMany {
    type SqlType = SqlUuid;
}

/// The group update up to its arrays.
const UPDATE_MANY_SET: &str = "WITH t AS (SELECT * FROM unnest(";

/// The group update after its arrays: locks the rows in the order of their ids (every
/// statement that locks several jobs does, so that two of them never wait for each other
/// whatever plan joins them), applies each whose stored version is still the expected one, and
/// returns the ids applied.
static UPDATE_MANY_REST: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let set: Vec<String> = CHANGING.iter().map(|c| format!("{c} = t.{c}")).collect();
    format!(
        ") AS t(id, expected, {names})),
        locked AS (SELECT jobs.id FROM jobs JOIN t ON jobs.id = t.id ORDER BY jobs.id FOR NO KEY UPDATE OF jobs)
        UPDATE jobs SET {set} FROM t, locked
        WHERE jobs.id = t.id AND jobs.id = locked.id AND jobs.version = t.expected
        RETURNING jobs.id",
        names = CHANGING.join(", "),
        set = set.join(", "),
    )
});

/// Writes every `(row, expected version)` whose stored version is still the expected one, in
/// one statement; returns the ids written.
pub(crate) async fn update_rows(
    conn: &mut AsyncPgConnection,
    rows: &[(&JobRow, i64)],
) -> Result<Vec<Uuid>, diesel::result::Error> {
    UpdateMany::of(rows).load(conn).await
}

#[cfg(test)]
mod tests {
    use diesel::debug_query;
    use genjobs_domain::ids::UserId;
    use genjobs_store_contract::cases::new_job;

    use super::*;

    fn row() -> JobRow {
        let now = OffsetDateTime::now_utc();
        JobRow::from_job(&new_job(UserId::new_at(now), 4, now)).unwrap()
    }

    #[test]
    fn every_column_is_inserted_and_each_bind_is_numbered_once() {
        assert_eq!(
            INSERTED.len(),
            44,
            "jobs has 47 columns, and an accept writes all but the provider slot's and the budget period"
        );
        let row = row();
        let accept = debug_query::<Pg, _>(&AcceptMany::of(&[&row])).to_string();
        assert!(accept.contains("$44::uuid[])") && !accept.contains("$45"), "{accept}");
        let items = debug_query::<Pg, _>(&InsertItems::of(&[&row, &row], None)).to_string();
        assert!(items.contains("$45::timestamptz") && !items.contains("$46"), "{items}");
        let update = debug_query::<Pg, _>(&UpdateMany::of(&[(&row, 0)])).to_string();
        assert!(update.contains(&format!("${}::int8[]", CHANGING.len() + 2)), "{update}");
        assert!(!update.contains(&format!("${}", CHANGING.len() + 3)), "{update}");
        assert!(!CHANGING.contains(&"user_id"), "a transition never changes the owner");
    }

    #[test]
    fn both_hot_statements_are_prepared_once_per_connection() {
        let row = row();
        assert_eq!(AcceptMany::of(&[&row]).is_safe_to_cache_prepared(&Pg), Ok(true));
        assert_eq!(UpdateMany::of(&[(&row, 0)]).is_safe_to_cache_prepared(&Pg), Ok(true));
        assert_eq!(InsertItems::of(&[&row], None).is_safe_to_cache_prepared(&Pg), Ok(true));
        assert!(<AcceptMany<'_> as QueryId>::query_id().is_some(), "cached by its type, not its text");
        assert!(<UpdateMany as QueryId>::query_id().is_some(), "cached by its type, not its text");
    }
}
