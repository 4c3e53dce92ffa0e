//! The kept secrets, in table `kept_secrets`: one row per name, made by the first start.

use async_trait::async_trait;
use diesel::prelude::*;
use diesel::sql_types::{Bool, Bytea, Text};
use diesel_async::RunQueryDsl;
use genjobs_domain::ports::{Kept, KeptName, KeptSecrets, StoreError};

use super::PgStore;
use crate::error::from_diesel;

#[derive(QueryableByName)]
struct KeptRow {
    #[diesel(sql_type = Bytea)]
    value: Vec<u8>,
    #[diesel(sql_type = Bool)]
    made_now: bool,
}

#[async_trait]
impl KeptSecrets for PgStore {
    async fn keep_first(&self, name: KeptName, candidate: Vec<u8>) -> Result<Kept, StoreError> {
        let mut session = self.session().await?;
        // The conflict's no-op update waits for a racing insert and returns its row, which a
        // plain `DO NOTHING` and a second read in the same snapshot would miss; `xmax = 0` holds
        // only for a row this statement inserted.
        let kept: Vec<KeptRow> = diesel::sql_query(
            "INSERT INTO kept_secrets (name, value) VALUES ($1, $2) \
             ON CONFLICT (name) DO UPDATE SET value = kept_secrets.value \
             RETURNING value, (xmax = 0) AS made_now",
        )
        .bind::<Text, _>(name.as_str())
        .bind::<Bytea, _>(candidate)
        .load(&mut *session)
        .await
        .map_err(from_diesel)?;
        session.finish().await?;
        let row = kept.into_iter().next().ok_or_else(|| StoreError::Internal("secret not kept".into()))?;
        Ok(Kept { value: row.value, made_now: row.made_now })
    }

    async fn replace(&self, name: KeptName, value: Vec<u8>) -> Result<(), StoreError> {
        let mut session = self.session().await?;
        diesel::sql_query(
            "INSERT INTO kept_secrets (name, value) VALUES ($1, $2) \
             ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
        )
        .bind::<Text, _>(name.as_str())
        .bind::<Bytea, _>(value)
        .execute(&mut *session)
        .await
        .map_err(from_diesel)?;
        session.finish().await
    }
}
