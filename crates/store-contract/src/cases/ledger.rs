//! The ledger invariant, checked after every case: for each user the case made, the account's
//! available, held and spent credits are the sums of its ledger. The cases make their users
//! through `user_with`, which records them here by store, so that the check finds them.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};

use genjobs_domain::credits::Credits;
use genjobs_domain::ids::UserId;
use genjobs_domain::ports::LedgerMovement;

use super::Store;

/// The users each store (by its address) was given during a case.
static USERS: LazyLock<Mutex<HashMap<usize, Vec<UserId>>>> = LazyLock::new(Mutex::default);

fn key<S>(store: &S) -> usize {
    std::ptr::from_ref(store) as usize
}

/// Remembers that `store` has `user`, for [`ledgers_match_accounts`].
pub(super) fn remember<S: Store>(store: &S, user: UserId) {
    USERS.lock().unwrap_or_else(PoisonError::into_inner).entry(key(store)).or_default().push(user);
}

/// Asserts, for every user the case made on `store`, that available = grants − holds + releases,
/// held = holds − releases − charges and spent = charges, summed over the whole ledger.
pub async fn ledgers_match_accounts<S: Store>(store: &S) {
    let users = USERS.lock().unwrap_or_else(PoisonError::into_inner).remove(&key(store)).unwrap_or_default();
    for user in users {
        let records = store.ledger(user, None, None, usize::MAX >> 1).await.expect("ledger");
        let (mut available, mut held, mut spent) = (0i64, 0i64, 0i64);
        let signed = |c: Credits| i64::try_from(c.get()).expect("credits fit i64");
        for record in &records {
            match record.movement {
                LedgerMovement::Grant(amount) => available += amount,
                LedgerMovement::Hold(c) => (available, held) = (available - signed(c), held + signed(c)),
                LedgerMovement::Release(c) => (available, held) = (available + signed(c), held - signed(c)),
                LedgerMovement::Settle { charged, released } => {
                    available += signed(released);
                    held -= signed(charged) + signed(released);
                    spent += signed(charged);
                }
            }
        }
        let account = store.account(user).await.expect("account").expect("the user exists");
        let balances = account.balances;
        assert_eq!(
            (available, held, spent),
            (signed(balances.available), signed(balances.held), signed(balances.spent)),
            "the ledger of {user} ({} records) must sum to its account",
            records.len()
        );
    }
}
