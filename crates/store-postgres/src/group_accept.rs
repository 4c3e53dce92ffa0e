//! Group accept: the plain accepts (no idempotency key, no budget, no concurrency limit of the
//! key's own) that arrive while a group is being accepted wait for it, then go together in one
//! statement ([`Grouped`]). Each accept alone pays for a statement's set-up (its plan, the check
//! constraints of three tables read again, a commit and its flush) for a single row; a group
//! pays for it once. With no load an accept goes alone at once, so grouping adds no wait.
//!
//! One statement holds each owner's credits once, so a group goes in rounds whose owners
//! differ. A round that fails for a reason other than the database being out of reach is
//! accepted again job by job, so that a job the statement could not take fails only itself.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use genjobs_domain::ports::StoreError;
use uuid::Uuid;

use crate::group::Grouped;
use crate::pool::{Durability, count_job_commit};
use crate::rows::{AcceptedRow, JobRow, accept_rows};
use crate::session::Db;

/// What an accept statement saw of one job: its owner's credits available, active jobs and
/// concurrent-job limit in the statement's snapshot, and whether the job was inserted; `None`
/// when the owner does not exist.
pub(crate) type AcceptSeen = Option<(i64, i32, i32, bool)>;

/// Each job of a group, by id, with what its accept saw or why it failed.
type Written = HashMap<Uuid, Result<AcceptSeen, StoreError>>;

/// One group accept per store: one group is written at a time, and the accepts that arrive
/// meanwhile make the next. (Two or four groups at once were measured too: each group was
/// smaller, each job cost more, and no more jobs were accepted a second.)
#[derive(Default)]
pub(crate) struct GroupAccept {
    group: Grouped<JobRow, Result<AcceptSeen, StoreError>>,
}

impl GroupAccept {
    /// Accepts `row` with the group it joins: holds its credits if its owner has enough and a
    /// free slot, and inserts it and its ledger row only then.
    ///
    /// The accept runs on a task of its own, so that a caller gone half-way (a request whose
    /// client hung up) never cuts short the statement that carries other callers' jobs, nor
    /// leaves them without the answer: each of them learns whether its job was accepted.
    pub(crate) async fn accept(self: &Arc<Self>, db: &Db, row: JobRow) -> Result<AcceptSeen, StoreError> {
        let (accepts, db) = (Arc::clone(self), db.clone());
        // Boxed, as the driver's steps are: the runtime copies a task's future as it spawns,
        // polls and ends it, and this one holds a whole group's statement.
        let joined = tokio::spawn(Box::pin(async move {
            accepts
                .group
                .join(row, async |group: &[JobRow]| write(&db, group).await, |written, row| answer(written, row.id))
                .await
        }));
        match joined.await {
            Ok(Some(answer)) => answer,
            Ok(None) => Err(StoreError::Unavailable("the group accept was interrupted".into())),
            Err(e) => Err(StoreError::Internal(format!("the group accept failed: {e}"))),
        }
    }
}

fn answer(written: &Written, id: Uuid) -> Result<AcceptSeen, StoreError> {
    written.get(&id).cloned().unwrap_or_else(|| Err(StoreError::Internal("the group accept left a job out".into())))
}

/// Accepts `group` round by round. One after the other, not side by side: a round that met an
/// owner of another would wait for that round's commit while holding the rows it locked.
async fn write(db: &Db, group: &[JobRow]) -> Written {
    let mut written = Written::with_capacity(group.len());
    for round in rounds(group) {
        written.extend(write_round(db, round).await);
    }
    written
}

/// Accepts `round` in one statement, or job by job when the statement failed for a reason other
/// than the database being out of reach.
async fn write_round(db: &Db, round: Vec<&JobRow>) -> Written {
    match accept_round(db, &round).await {
        Ok(accepted) => accepted,
        Err(e) if round.len() == 1 || matches!(e, StoreError::Unavailable(_)) => {
            round.iter().map(|row| (row.id, Err(e.clone()))).collect()
        }
        Err(e) => {
            tracing::warn!(error = %e, jobs = round.len(), "a group accept failed; its jobs are accepted one by one");
            let mut written = Written::with_capacity(round.len());
            for row in round {
                match accept_round(db, &[row]).await {
                    Ok(accepted) => written.extend(accepted),
                    Err(e) => {
                        written.insert(row.id, Err(e));
                    }
                }
            }
            written
        }
    }
}

/// Accepts `round` (whose owners differ) in one statement.
async fn accept_round(db: &Db, round: &[&JobRow]) -> Result<Written, StoreError> {
    let seen: Vec<AcceptedRow> = db.run(async |conn| accept_rows(conn, round).await).await?;
    if seen.iter().any(|(_, _, _, _, inserted)| *inserted) {
        count_job_commit(Durability::Durable);
    }
    let mut written: Written = round.iter().map(|row| (row.id, Ok(None))).collect();
    for (id, available, active, limit, inserted) in seen {
        written.insert(id, Ok(Some((available, active, limit, inserted))));
    }
    Ok(written)
}

/// `group` in rounds whose owners differ, each job in the first round without its owner.
fn rounds(group: &[JobRow]) -> Vec<Vec<&JobRow>> {
    let mut rounds: Vec<(HashSet<Uuid>, Vec<&JobRow>)> = Vec::new();
    for row in group {
        let free = rounds.iter().position(|(owners, _)| !owners.contains(&row.user_id));
        let index = free.unwrap_or_else(|| {
            rounds.push((HashSet::new(), Vec::new()));
            rounds.len() - 1
        });
        let (owners, rows) = &mut rounds[index];
        owners.insert(row.user_id);
        rows.push(row);
    }
    rounds.into_iter().map(|(_, rows)| rows).collect()
}

#[cfg(test)]
mod tests {
    use genjobs_domain::ids::UserId;
    use genjobs_store_contract::cases::new_job;
    use time::OffsetDateTime;

    use super::*;

    fn row_of(user: UserId) -> JobRow {
        JobRow::from_job(&new_job(user, 4, OffsetDateTime::now_utc())).expect("a job's row")
    }

    #[test]
    fn rounds_hold_each_owner_once_and_keep_each_owners_order() {
        let now = OffsetDateTime::now_utc();
        let (a, b, c) = (UserId::new_at(now), UserId::new_at(now), UserId::new_at(now));
        let group = [row_of(a), row_of(b), row_of(a), row_of(a), row_of(c), row_of(b)];
        let rounds = rounds(&group);
        let ids = |round: &Vec<&JobRow>| round.iter().map(|row| row.id).collect::<Vec<_>>();
        assert_eq!(rounds.len(), 3, "owner a has three jobs");
        assert_eq!(ids(&rounds[0]), [group[0].id, group[1].id, group[4].id]);
        assert_eq!(ids(&rounds[1]), [group[2].id, group[5].id]);
        assert_eq!(ids(&rounds[2]), [group[3].id]);
        for round in &rounds {
            let owners: HashSet<Uuid> = round.iter().map(|row| row.user_id).collect();
            assert_eq!(owners.len(), round.len(), "no owner twice in one statement");
        }
    }
}
