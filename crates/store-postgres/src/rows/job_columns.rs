//! The `jobs` table's columns, listed once. From the one list come the row type diesel reads and
//! writes, the accept statement (its column list and its binds) and the group update of changed
//! jobs (its `SET` list, its `unnest` types and its array binds), so that a new column is added in
//! one place.

use std::sync::LazyLock;

use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::query_builder::{BoxedSqlQuery, SqlQuery};
use diesel::sql_types::{Array, BigInt, Bool, Integer, Jsonb, Nullable, SmallInt, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::schema::jobs;

macro_rules! job_columns {
    (
        fixed { $($fixed:ident: $fixed_rust:ty => $fixed_sql:ty,)* }
        changing { $($col:ident: $rust:ty => $sql:ty as $pg:literal,)* }
    ) => {
        /// A row of `jobs`. `lease_until` belongs to the driver holding the job: an accept
        /// writes none, and a transition leaves it as it is.
        #[derive(Debug, Clone, Queryable, QueryableByName, Selectable, Insertable)]
        #[diesel(table_name = jobs, check_for_backend(diesel::pg::Pg))]
        pub(crate) struct JobRow {
            $(pub $fixed: $fixed_rust,)*
            $(pub $col: $rust,)*
            pub lease_until: Option<OffsetDateTime>,
        }

        /// The columns an accept writes.
        const INSERTED: &[&str] = &[$(stringify!($fixed),)* $(stringify!($col),)*];

        /// The columns a transition may change.
        const CHANGING: &[(&str, &str)] = &[$((stringify!($col), $pg),)*];

        /// The accept statement with `row` bound: every inserted column, then the user and the
        /// hold. It inserts the job when the hold matched, nothing otherwise.
        pub(crate) fn bind_accept<'a>(row: &'a JobRow) -> BoxedSqlQuery<'a, Pg, SqlQuery> {
            let query = diesel::sql_query(ACCEPT.as_str()).into_boxed();
            $(let query = query.bind::<$fixed_sql, _>(&row.$fixed);)*
            $(let query = query.bind::<$sql, _>(&row.$col);)*
            query.bind::<SqlUuid, _>(row.user_id).bind::<BigInt, _>(row.credits_held)
        }

        fn bind_update<'a>(rows: &[(&JobRow, i64)]) -> BoxedSqlQuery<'a, Pg, SqlQuery> {
            diesel::sql_query(UPDATE_MANY.as_str())
                .into_boxed()
                .bind::<Array<SqlUuid>, _>(rows.iter().map(|(r, _)| r.id).collect::<Vec<_>>())
                .bind::<Array<BigInt>, _>(rows.iter().map(|(_, expected)| *expected).collect::<Vec<_>>())
                $(.bind::<Array<$sql>, _>(rows.iter().map(|(r, _)| r.$col.clone()).collect::<Vec<_>>()))*
        }
    };
}

job_columns! {
    fixed {
        id: Uuid => SqlUuid,
        user_id: Uuid => SqlUuid,
        model: String => Text,
        modality: String => Text,
        created_at: OffsetDateTime => Timestamptz,
        credits_held: i64 => BigInt,
        input: Value => Jsonb,
    }
    changing {
        state: String => Text as "text",
        progress: i16 => SmallInt as "int2",
        outputs: Option<Value> => Nullable<Jsonb> as "jsonb",
        error: Option<Value> => Nullable<Jsonb> as "jsonb",
        started_at: Option<OffsetDateTime> => Nullable<Timestamptz> as "timestamptz",
        finished_at: Option<OffsetDateTime> => Nullable<Timestamptz> as "timestamptz",
        canceled_at: Option<OffsetDateTime> => Nullable<Timestamptz> as "timestamptz",
        credits_actual: Option<i64> => Nullable<BigInt> as "int8",
        upstream: Option<Value> => Nullable<Jsonb> as "jsonb",
        upstream_key: Option<String> => Nullable<Text> as "text",
        submit_attempted: bool => Bool as "bool",
        next_poll_at: Option<OffsetDateTime> => Nullable<Timestamptz> as "timestamptz",
        poll_failures: i32 => Integer as "int4",
        version: i64 => BigInt as "int8",
    }
}

/// Holds credits on the account row if it has enough and a free slot, then inserts the job and
/// its ledger row only if the hold matched; one statement, so one implicit transaction.
static ACCEPT: LazyLock<String> = LazyLock::new(|| {
    let placeholders: Vec<String> = (1..=INSERTED.len()).map(|i| format!("${i}")).collect();
    let (user, hold) = (INSERTED.len() + 1, INSERTED.len() + 2);
    format!(
        "WITH held AS (
            UPDATE users
            SET credits_available = credits_available - ${hold}, credits_held = credits_held + ${hold},
                active_jobs = active_jobs + 1
            WHERE id = ${user} AND credits_available >= ${hold} AND active_jobs < max_concurrent_jobs
            RETURNING id
        ), job AS (
            INSERT INTO jobs ({columns}) SELECT {placeholders} FROM held RETURNING id, user_id
        )
        INSERT INTO ledger (user_id, job_id, kind, amount) SELECT job.user_id, job.id, 'hold', ${hold} FROM job",
        columns = INSERTED.join(", "),
        placeholders = placeholders.join(", "),
    )
});

/// Applies each row whose stored version is still the expected one; returns the ids applied.
static UPDATE_MANY: LazyLock<String> = LazyLock::new(|| {
    let set: Vec<String> = CHANGING.iter().map(|(c, _)| format!("{c} = t.{c}")).collect();
    let arrays: Vec<String> = CHANGING.iter().enumerate().map(|(i, (_, pg))| format!("${}::{pg}[]", i + 3)).collect();
    let names: Vec<&str> = CHANGING.iter().map(|(c, _)| *c).collect();
    format!(
        "UPDATE jobs SET {set}
         FROM unnest($1::uuid[], $2::int8[], {arrays}) AS t(id, expected, {names})
         WHERE jobs.id = t.id AND jobs.version = t.expected
         RETURNING jobs.id",
        set = set.join(", "),
        arrays = arrays.join(", "),
        names = names.join(", "),
    )
});

#[derive(QueryableByName)]
struct Updated {
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
}

/// Writes every `(row, expected version)` whose stored version is still the expected one, in
/// one statement; returns the ids written.
pub(crate) async fn update_rows(
    conn: &mut AsyncPgConnection,
    rows: &[(&JobRow, i64)],
) -> Result<Vec<Uuid>, diesel::result::Error> {
    let updated: Vec<Updated> = bind_update(rows).load(conn).await?;
    Ok(updated.into_iter().map(|u| u.id).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_column_but_the_lease_is_inserted_and_the_statements_number_their_binds() {
        assert_eq!(INSERTED.len() + 1, 22, "jobs has 22 columns, lease_until written only by the driver");
        assert!(ACCEPT.contains(&format!("${}", INSERTED.len() + 2)));
        assert!(UPDATE_MANY.contains(&format!("${}::int8[]", CHANGING.len() + 2)));
        assert!(!UPDATE_MANY.contains("user_id"), "a transition never changes the owner");
    }
}
