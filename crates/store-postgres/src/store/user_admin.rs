//! The operators' view of users: a change to a user's limits and tier (announced on the keys'
//! `NOTIFY` channel for each of the user's keys, whose cached credentials carry them), and the
//! listing of users, newest first, by the beginning of a name or of a key prefix.

use diesel::prelude::*;
use diesel::sql_types::{Text, Uuid as SqlUuid};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use futures_util::FutureExt;
use genjobs_domain::ids::{KeyPrefix, UserId};
use genjobs_domain::ports::{Account, AccountStore, StoreError, UserChange, UserQuery};

use super::PgStore;
use crate::channels::KEYS_CHANNEL;
use crate::error::from_diesel;
use crate::rows::UserRow;
use crate::schema::{api_keys, users};

/// `text` with the characters `LIKE` treats specially escaped, then `%`: "begins with".
fn begins_with(text: &str) -> String {
    let mut pattern: String =
        text.chars().flat_map(|c| if matches!(c, '%' | '_' | '\\') { vec!['\\', c] } else { vec![c] }).collect();
    pattern.push('%');
    pattern
}

fn column(value: u32) -> i32 {
    i32::try_from(value).unwrap_or(i32::MAX)
}

impl PgStore {
    pub(super) async fn change_user_row(
        &self,
        user_id: UserId,
        change: UserChange,
    ) -> Result<Option<Account>, StoreError> {
        self.within(async {
            let mut conn = self.conn().await?;
            let prefixes = conn
                .transaction(async |conn| -> Result<Option<Vec<String>>, diesel::result::Error> {
                    let target = users::table.find(user_id.as_uuid());
                    let changed = diesel::update(target)
                        .set((
                            change.rate_limit_per_minute.map(|v| users::rate_limit_per_minute.eq(column(v))),
                            change.max_concurrent_jobs.map(|v| users::max_concurrent_jobs.eq(column(v))),
                            change.price_percent.map(|p| users::price_percent.eq(column(p.get()))),
                            users::id.eq(users::id),
                        ))
                        .execute(conn)
                        .await?;
                    if changed == 0 {
                        return Ok(None);
                    }
                    let prefixes: Vec<String> = diesel::sql_query(
                        "SELECT prefix FROM (SELECT prefix, pg_notify($1, prefix) FROM api_keys WHERE user_id = $2) AS announced",
                    )
                    .bind::<Text, _>(KEYS_CHANNEL)
                    .bind::<SqlUuid, _>(user_id.as_uuid())
                    .load::<Prefix>(conn)
                    .await?
                    .into_iter()
                    .map(|row| row.prefix)
                    .collect();
                    Ok(Some(prefixes))
                })
                .await
                .map_err(from_diesel)?;
            drop(conn);
            let Some(prefixes) = prefixes else { return Ok(None) };
            for prefix in prefixes {
                self.keys.forget(&KeyPrefix::of(&prefix));
            }
            self.account(user_id).await
        })
        .await
    }

    pub(super) async fn user_rows(&self, query: &UserQuery) -> Result<Vec<Account>, StoreError> {
        let rows: Vec<UserRow> = self
            .repeatable(|conn: &mut AsyncPgConnection| {
                let mut select = users::table.select(UserRow::as_select()).order(users::id.desc()).into_boxed();
                if let Some(before) = query.before {
                    select = select.filter(users::id.lt(before.as_uuid()));
                }
                if let Some(q) = query.q.as_deref().filter(|q| !q.is_empty()) {
                    let pattern = begins_with(q);
                    let by_key =
                        api_keys::table.filter(api_keys::prefix.like(pattern.clone())).select(api_keys::user_id);
                    select = select.filter(users::name.like(pattern).or(users::id.eq_any(by_key)));
                }
                select.limit(i64::try_from(query.limit).unwrap_or(i64::MAX)).load(conn).boxed()
            })
            .await?;
        rows.into_iter().map(UserRow::into_account).collect()
    }
}

#[derive(QueryableByName)]
struct Prefix {
    #[diesel(sql_type = Text)]
    prefix: String,
}

#[cfg(test)]
mod tests {
    use super::begins_with;

    #[test]
    fn a_pattern_matches_only_the_beginning_given() {
        assert_eq!(begins_with("ad"), "ad%");
        assert_eq!(begins_with("50%_a\\"), "50\\%\\_a\\\\%");
    }
}
