//! Credit movements as ledger rows, and the ledger's sums, to check against the account row.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use genjobs_domain::credits::CreditMovement;
use genjobs_domain::ids::UserId;
use genjobs_domain::ports::StoreError;

use super::PgStore;
use crate::rows::amount;
use crate::schema::ledger;

impl PgStore {
    pub(super) fn movement_columns(movement: CreditMovement) -> Result<(&'static str, i64, i64, i64, i64), StoreError> {
        // (ledger kind, ledger amount, released, Δheld, Δspent); Δavailable = released.
        Ok(match movement {
            CreditMovement::Settle { held, actual } => {
                let released =
                    held.checked_sub(actual).ok_or_else(|| StoreError::Internal("settle above hold".into()))?;
                ("settle", amount(actual)?, amount(released)?, amount(held)?, amount(actual)?)
            }
            CreditMovement::Release(held) => ("release", amount(held)?, amount(held)?, amount(held)?, 0),
            CreditMovement::Hold(_) => return Err(StoreError::Internal("a hold is only made by accept".into())),
        })
    }
}

/// Sums of the ledger for one user, to check it against the account row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedgerTotals {
    /// All grants, net.
    pub granted: i64,
    /// All holds.
    pub held: i64,
    /// All charges of settled jobs.
    pub spent: i64,
    /// All credits returned by settles and releases.
    pub released: i64,
}

impl PgStore {
    /// The ledger's sums for a user: `granted - held + released` must equal what is available,
    /// `held - spent - released` what is held, `spent` what is spent.
    ///
    /// # Errors
    /// [`StoreError`] when the database fails.
    pub async fn ledger_totals(&self, user_id: UserId) -> Result<LedgerTotals, StoreError> {
        let entries = ledger::table.filter(ledger::user_id.eq(user_id.as_uuid())).select((
            ledger::kind,
            ledger::amount,
            ledger::released,
        ));
        let rows: Vec<(String, i64, i64)> = self.in_session(async |conn| entries.load(conn).await).await?;
        let mut totals = LedgerTotals { granted: 0, held: 0, spent: 0, released: 0 };
        for (kind, amount, released) in rows {
            match kind.as_str() {
                "grant" => totals.granted += amount,
                "hold" => totals.held += amount,
                "settle" => totals.spent += amount,
                _ => {}
            }
            totals.released += released;
        }
        Ok(totals)
    }
}
