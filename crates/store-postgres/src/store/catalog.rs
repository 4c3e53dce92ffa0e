//! The catalog port over Postgres: one `models` row per model (the jsonb document, its catalog
//! version from a sequence, a `deleted_at` for deleted ones). Every change is announced with
//! `pg_notify` on [`CATALOG_CHANNEL`] in its own transaction, so a replica hears it only once it
//! is committed; the listener (`events`) passes it to [`CatalogSignal`].

use std::sync::Arc;

use async_trait::async_trait;
use diesel::prelude::*;
use diesel::sql_types::{Jsonb, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use futures_util::stream::BoxStream;
use genjobs_domain::catalog::ModelDocument;
use genjobs_domain::ids::ModelId;
use genjobs_domain::ports::{CatalogChanges, CatalogStore, PutOutcome, StoreError, StoredModel};
use serde_json::Value;
use time::OffsetDateTime;

use super::PgStore;
use crate::catalog_signal::CatalogSignal;
use crate::channels::CATALOG_CHANNEL;
use crate::error::from_diesel;
use crate::schema::models;

#[derive(Queryable, Selectable)]
#[diesel(table_name = models, check_for_backend(diesel::pg::Pg))]
struct ModelRow {
    id: String,
    document: Value,
    version: i64,
    updated_at: OffsetDateTime,
    deleted_at: Option<OffsetDateTime>,
}

impl ModelRow {
    fn into_stored(self) -> Result<StoredModel, StoreError> {
        let document = serde_json::from_value(self.document)
            .map_err(|e| StoreError::Internal(format!("stored model {} cannot be read: {e}", self.id)))?;
        Ok(StoredModel {
            id: ModelId::new(self.id),
            document,
            version: u64::try_from(self.version).unwrap_or_default(),
            updated_at: self.updated_at,
            deleted: self.deleted_at.is_some(),
        })
    }
}

fn jsonb(document: &ModelDocument) -> Value {
    ModelDocument { id: None, ..document.clone() }.to_value()
}

/// Stores one document; whether a live model was there before.
async fn upsert(conn: &mut AsyncPgConnection, id: &ModelId, document: &ModelDocument) -> QueryResult<bool> {
    let live_before: Vec<String> = models::table
        .filter(models::id.eq(id.as_str()))
        .filter(models::deleted_at.is_null())
        .select(models::id)
        .for_update()
        .load(conn)
        .await?;
    diesel::sql_query(
        "INSERT INTO models (id, document) VALUES ($1, $2)
         ON CONFLICT (id) DO UPDATE SET document = EXCLUDED.document,
             version = nextval('models_version'), updated_at = now(), deleted_at = NULL",
    )
    .bind::<Text, _>(id.as_str())
    .bind::<Jsonb, _>(jsonb(document))
    .execute(conn)
    .await?;
    announce(conn, id).await?;
    Ok(!live_before.is_empty())
}

/// Marks one model deleted; whether a live one was there.
async fn tombstone(conn: &mut AsyncPgConnection, id: &ModelId) -> QueryResult<bool> {
    let deleted = diesel::sql_query(
        "UPDATE models SET deleted_at = now(), updated_at = now(), version = nextval('models_version')
         WHERE id = $1 AND deleted_at IS NULL",
    )
    .bind::<Text, _>(id.as_str())
    .execute(conn)
    .await?;
    if deleted > 0 {
        announce(conn, id).await?;
    }
    Ok(deleted > 0)
}

async fn announce(conn: &mut AsyncPgConnection, id: &ModelId) -> QueryResult<()> {
    diesel::sql_query("SELECT pg_notify($1, $2)")
        .bind::<Text, _>(CATALOG_CHANNEL)
        .bind::<Text, _>(id.as_str())
        .execute(conn)
        .await
        .map(|_| ())
}

#[async_trait]
impl CatalogStore for PgStore {
    async fn list_models(&self) -> Result<Vec<StoredModel>, StoreError> {
        self.within(async {
            let mut session = self.session().await?;
            let rows: Vec<ModelRow> = models::table
                .order(models::position)
                .select(ModelRow::as_select())
                .load(&mut *session)
                .await
                .map_err(from_diesel)?;
            session.finish().await?;
            rows.into_iter().map(ModelRow::into_stored).collect()
        })
        .await
    }

    async fn get_model(&self, id: &ModelId) -> Result<Option<StoredModel>, StoreError> {
        self.within(async {
            let mut session = self.session().await?;
            let row: Option<ModelRow> = models::table
                .find(id.as_str())
                .filter(models::deleted_at.is_null())
                .select(ModelRow::as_select())
                .first(&mut *session)
                .await
                .optional()
                .map_err(from_diesel)?;
            session.finish().await?;
            row.map(ModelRow::into_stored).transpose()
        })
        .await
    }

    async fn put_model(&self, id: &ModelId, document: &ModelDocument) -> Result<PutOutcome, StoreError> {
        self.within(async {
            let mut conn = self.conn().await?;
            let replaced =
                conn.transaction(async |conn| upsert(conn, id, document).await).await.map_err(from_diesel)?;
            Ok(if replaced { PutOutcome::Replaced } else { PutOutcome::Created })
        })
        .await
    }

    async fn delete_model(&self, id: &ModelId) -> Result<bool, StoreError> {
        self.within(async {
            let mut conn = self.conn().await?;
            conn.transaction(async |conn| tombstone(conn, id).await).await.map_err(from_diesel)
        })
        .await
    }

    async fn apply_models(&self, changes: &CatalogChanges) -> Result<(), StoreError> {
        self.within(async {
            let mut conn = self.conn().await?;
            conn.transaction(async |conn| -> QueryResult<()> {
                for (id, document) in &changes.puts {
                    upsert(conn, id, document).await?;
                }
                for id in &changes.deletes {
                    tombstone(conn, id).await?;
                }
                Ok(())
            })
            .await
            .map_err(from_diesel)
        })
        .await
    }

    async fn seed_models(&self, documents: &[(ModelId, ModelDocument)]) -> Result<bool, StoreError> {
        self.within(async {
            let mut conn = self.conn().await?;
            conn.transaction(async |conn| -> QueryResult<bool> {
                // Replicas starting together take turns; the first fills the table, the others
                // find it filled.
                diesel::sql_query("LOCK TABLE models IN SHARE ROW EXCLUSIVE MODE").execute(conn).await?;
                let held: i64 = models::table.count().get_result(conn).await?;
                if held > 0 {
                    return Ok(false);
                }
                for (id, document) in documents {
                    upsert(conn, id, document).await?;
                }
                Ok(true)
            })
            .await
            .map_err(from_diesel)
        })
        .await
    }

    fn catalog_changes(&self) -> BoxStream<'static, ()> {
        self.catalog_signal.subscribe()
    }
}

impl PgStore {
    /// Announces catalog changes heard by `signal` to this store's followers.
    #[must_use]
    pub fn with_catalog_signal(self, signal: Arc<CatalogSignal>) -> Self {
        Self { catalog_signal: signal, ..self }
    }
}
