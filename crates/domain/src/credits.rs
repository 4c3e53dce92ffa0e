//! Credits and the balance rules: every credit is available, held or spent, and moves once per job.

use std::fmt;

/// A whole number of credits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Credits(u64);

impl Credits {
    /// No credits.
    pub const ZERO: Credits = Credits(0);

    /// Wraps an amount.
    #[must_use]
    pub const fn new(amount: u64) -> Self {
        Self(amount)
    }

    /// The amount as a number.
    #[must_use]
    pub const fn get(self) -> u64 {
        self.0
    }

    /// `self + other`, or `None` on overflow.
    #[must_use]
    pub fn checked_add(self, other: Credits) -> Option<Credits> {
        self.0.checked_add(other.0).map(Credits)
    }

    /// `self - other`, or `None` when `other` is larger.
    #[must_use]
    pub fn checked_sub(self, other: Credits) -> Option<Credits> {
        self.0.checked_sub(other.0).map(Credits)
    }
}

impl fmt::Display for Credits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// One movement of credits for one job. Accepting a job holds; reaching a final state either
/// settles (charges `actual`, releases the rest of `held`) or releases everything held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreditMovement {
    /// Available to held, at acceptance.
    Hold(Credits),
    /// Held to spent (`actual`) and back to available (`held - actual`), on success.
    Settle {
        /// What was held for the job.
        held: Credits,
        /// What the delivered outputs cost; never more than `held`.
        actual: Credits,
    },
    /// Held back to available, on failure or cancel.
    Release(Credits),
}

/// A movement that the balances cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BalanceError {
    /// Fewer credits available than the hold needs.
    #[error("needs {needed} credits, {available} available")]
    Insufficient {
        /// The hold asked for.
        needed: Credits,
        /// What the account had available.
        available: Credits,
    },
    /// The movement would take more out of `held` than is held, or settle more than was held;
    /// a store that sees this has a bug or a corrupted row.
    #[error("ledger inconsistency: {0}")]
    Inconsistent(&'static str),
    /// The grant would take the account past [`MAX_CREDITS`].
    #[error("the grant of {amount} would take the account past {max} credits", max = MAX_CREDITS)]
    GrantTooLarge {
        /// The grant.
        amount: i64,
    },
    /// The grant would make `available` negative.
    #[error("the grant would leave {available} + ({amount}) credits available")]
    GrantBelowZero {
        /// What the account had available.
        available: Credits,
        /// The (negative) grant.
        amount: i64,
    },
}

/// The most credits an account can ever have been granted: what a signed 64-bit ledger counts.
pub const MAX_CREDITS: u64 = i64::MAX as u64;

/// Where an account's credits are. `available + held + spent` equals all credits ever granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Balances {
    /// Free to hold for new jobs.
    pub available: Credits,
    /// Held for jobs that are not final.
    pub held: Credits,
    /// Charged for succeeded jobs.
    pub spent: Credits,
}

impl Balances {
    /// The balances after `movement`.
    ///
    /// # Errors
    /// [`BalanceError::Insufficient`] for a hold larger than `available`;
    /// [`BalanceError::Inconsistent`] when a settle or release exceeds `held`.
    ///
    /// ```
    /// use genjobs_domain::credits::{Balances, CreditMovement, Credits};
    ///
    /// let opened = Balances::default().grant(10)?;
    /// let held = opened.apply(CreditMovement::Hold(Credits::new(8)))?;
    /// let settled = held.apply(CreditMovement::Settle { held: Credits::new(8), actual: Credits::new(6) })?;
    /// assert_eq!((settled.available, settled.held, settled.spent), (Credits::new(4), Credits::ZERO, Credits::new(6)));
    /// assert_eq!(settled.total(), 10, "credits are only moved, never made or lost");
    /// # Ok::<(), genjobs_domain::credits::BalanceError>(())
    /// ```
    pub fn apply(self, movement: CreditMovement) -> Result<Balances, BalanceError> {
        let inconsistent = BalanceError::Inconsistent;
        match movement {
            CreditMovement::Hold(amount) => Ok(Balances {
                available: self
                    .available
                    .checked_sub(amount)
                    .ok_or(BalanceError::Insufficient { needed: amount, available: self.available })?,
                held: self.held.checked_add(amount).ok_or(inconsistent("held overflow"))?,
                spent: self.spent,
            }),
            CreditMovement::Settle { held, actual } => {
                let refund = held.checked_sub(actual).ok_or(inconsistent("settled more than was held"))?;
                Ok(Balances {
                    available: self.available.checked_add(refund).ok_or(inconsistent("overflow"))?,
                    held: self.held.checked_sub(held).ok_or(inconsistent("held underflow"))?,
                    spent: self.spent.checked_add(actual).ok_or(inconsistent("overflow"))?,
                })
            }
            CreditMovement::Release(amount) => Ok(Balances {
                available: self.available.checked_add(amount).ok_or(inconsistent("overflow"))?,
                held: self.held.checked_sub(amount).ok_or(inconsistent("held underflow"))?,
                spent: self.spent,
            }),
        }
    }

    /// The balances after an operator's grant (positive or negative).
    ///
    /// # Errors
    /// [`BalanceError::GrantBelowZero`] when a negative grant exceeds `available`;
    /// [`BalanceError::GrantTooLarge`] when the account's total would pass [`MAX_CREDITS`].
    pub fn grant(self, amount: i64) -> Result<Balances, BalanceError> {
        let below_zero = BalanceError::GrantBelowZero { available: self.available, amount };
        let magnitude = Credits::new(amount.unsigned_abs());
        if amount > 0 && self.total() + u128::from(magnitude.get()) > u128::from(MAX_CREDITS) {
            return Err(BalanceError::GrantTooLarge { amount });
        }
        let available =
            if amount >= 0 { self.available.checked_add(magnitude) } else { self.available.checked_sub(magnitude) }
                .ok_or(below_zero)?;
        Ok(Balances { available, ..self })
    }

    /// `available + held + spent`: all credits ever granted, net.
    #[must_use]
    pub fn total(&self) -> u128 {
        u128::from(self.available.get()) + u128::from(self.held.get()) + u128::from(self.spent.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn balances(available: u64, held: u64, spent: u64) -> Balances {
        Balances { available: Credits::new(available), held: Credits::new(held), spent: Credits::new(spent) }
    }

    #[test]
    fn hold_moves_available_to_held() {
        let after = balances(100, 0, 0).apply(CreditMovement::Hold(Credits::new(40))).unwrap();
        assert_eq!(after, balances(60, 40, 0));
    }

    #[test]
    fn hold_beyond_available_is_refused_with_both_amounts() {
        let err = balances(12, 0, 0).apply(CreditMovement::Hold(Credits::new(40))).unwrap_err();
        assert_eq!(err.to_string(), "needs 40 credits, 12 available");
    }

    #[test]
    fn settle_charges_actual_and_releases_the_rest() {
        let movement = CreditMovement::Settle { held: Credits::new(40), actual: Credits::new(30) };
        assert_eq!(balances(60, 40, 0).apply(movement).unwrap(), balances(70, 0, 30));
    }

    #[test]
    fn settle_of_more_than_held_is_inconsistent() {
        let movement = CreditMovement::Settle { held: Credits::new(10), actual: Credits::new(30) };
        assert!(matches!(balances(0, 10, 0).apply(movement), Err(BalanceError::Inconsistent(_))));
    }

    #[test]
    fn release_returns_everything_held() {
        let after = balances(60, 40, 5).apply(CreditMovement::Release(Credits::new(40))).unwrap();
        assert_eq!(after, balances(100, 0, 5));
    }

    #[test]
    fn release_of_more_than_held_is_inconsistent() {
        assert!(balances(0, 5, 0).apply(CreditMovement::Release(Credits::new(6))).is_err());
    }

    #[test]
    fn every_movement_keeps_the_total() {
        let start = balances(100, 0, 0);
        let held = start.apply(CreditMovement::Hold(Credits::new(30))).unwrap();
        let settled = held.apply(CreditMovement::Settle { held: Credits::new(30), actual: Credits::new(20) }).unwrap();
        assert_eq!(start.total(), held.total());
        assert_eq!(start.total(), settled.total());
    }

    #[test]
    fn grants_may_be_negative_but_never_below_zero() {
        assert_eq!(balances(10, 5, 0).grant(-10).unwrap(), balances(0, 5, 0));
        assert_eq!(balances(10, 5, 0).grant(7).unwrap(), balances(17, 5, 0));
        assert!(balances(10, 5, 0).grant(-11).is_err());
    }
}
