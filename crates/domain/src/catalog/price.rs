//! What a model costs, and the rate a job keeps from its acceptance on: a later price change
//! moves neither its hold nor its charge.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::credits::Credits;
use crate::input::GenerationInput;
use crate::invalid::InvalidRequest;
use crate::output::OutputItem;

/// A user's price tier: what a job costs them, in percent of the catalog's price, rounded up to
/// whole credits per job. 1 to 1,000; 100 is the catalog's price.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PricePercent(u32);

impl PricePercent {
    /// The catalog's price.
    pub const FULL: PricePercent = PricePercent(100);
    /// Lowest tier.
    pub const MIN: u32 = 1;
    /// Highest tier.
    pub const MAX: u32 = 1000;

    /// The tier of `percent`.
    ///
    /// # Errors
    /// [`InvalidRequest`] naming `price_percent` outside 1 to 1,000.
    pub fn new(percent: u64) -> Result<Self, InvalidRequest> {
        u32::try_from(percent).ok().filter(|p| (Self::MIN..=Self::MAX).contains(p)).map(Self).ok_or_else(|| {
            InvalidRequest::param(
                "price_percent",
                format!("`price_percent` must be an integer from {} to {}", Self::MIN, Self::MAX),
            )
        })
    }

    /// The percent.
    #[must_use]
    pub fn get(self) -> u32 {
        self.0
    }

    /// `credits` at this tier, rounded up.
    #[must_use]
    pub fn apply(self, credits: Credits) -> Credits {
        let scaled = u128::from(credits.get()) * u128::from(self.0);
        Credits::new(u64::try_from(scaled.div_ceil(100)).unwrap_or(u64::MAX))
    }
}

impl Default for PricePercent {
    fn default() -> Self {
        Self::FULL
    }
}

/// What a price counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// Each image delivered.
    Image,
    /// Each second of video delivered.
    Second,
}

/// A model's price: `{"per": "image", "credits": N}` or `{"per": "second", "credits": N,
/// "by_resolution": {"720p": N, …}}`, where `by_resolution` replaces `credits` for the
/// resolutions it names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// What is counted.
    pub per: Unit,
    /// Credits per unit.
    pub credits: u64,
    /// Credits per unit at the resolutions named.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_resolution: BTreeMap<String, u64>,
}

impl Price {
    /// The rate a request pays: per unit, at its resolution.
    #[must_use]
    pub fn rate(&self, input: &GenerationInput) -> Rate {
        let credits =
            input.resolution.as_deref().and_then(|r| self.by_resolution.get(r)).copied().unwrap_or(self.credits);
        Rate { per: self.per, credits, percent: PricePercent::FULL, batch_percent: PricePercent::FULL }
    }
}

/// What one unit of a job's output costs, and the owner's tier, fixed when the job is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// What is counted.
    pub per: Unit,
    /// Credits per unit, at the catalog's price.
    pub credits: u64,
    /// The owner's tier, applied to the whole job's price (so rounded once per job).
    pub percent: PricePercent,
    /// The batch price, in percent of the tier's: [`PricePercent::FULL`] for a job submitted on
    /// its own, the operator's batch percent for a batch's item. Applied with the tier, so that
    /// the job's price is rounded up once.
    pub batch_percent: PricePercent,
}

impl Rate {
    /// The same rate at the tier `percent`.
    #[must_use]
    pub fn at(self, percent: PricePercent) -> Rate {
        Rate { percent, ..self }
    }

    /// The same rate at the batch price `batch_percent`.
    #[must_use]
    pub fn in_batch(self, batch_percent: PricePercent) -> Rate {
        Rate { batch_percent, ..self }
    }

    /// `credits` at the tier and the batch price, rounded up once.
    fn priced(&self, credits: u64) -> Credits {
        let scaled = u128::from(credits) * u128::from(self.percent.get()) * u128::from(self.batch_percent.get());
        Credits::new(u64::try_from(scaled.div_ceil(10_000)).unwrap_or(u64::MAX))
    }

    /// The most a request can cost: what is held at acceptance (the images asked for, or the
    /// seconds asked for).
    #[must_use]
    pub fn to_hold(&self, input: &GenerationInput) -> Credits {
        let units = match self.per {
            Unit::Image => u64::from(input.n.unwrap_or(1)),
            Unit::Second => u64::from(input.duration_sec.unwrap_or(0)),
        };
        self.priced(self.credits.saturating_mul(units))
    }

    /// What the delivered outputs cost: images delivered, or seconds of video delivered (the
    /// duration requested when the provider does not say), never more than `held`.
    #[must_use]
    pub fn delivered(&self, input: &GenerationInput, outputs: &[OutputItem], held: Credits) -> Credits {
        let units = match self.per {
            Unit::Image => outputs.len() as u64,
            Unit::Second => {
                let requested = input.duration_sec.unwrap_or(0);
                outputs
                    .iter()
                    .filter_map(|o| o.meta.duration_sec)
                    .map(|d| d.ceil().clamp(0.0, f64::from(requested)) as u64)
                    .max()
                    .unwrap_or(u64::from(requested))
            }
        };
        self.priced(self.credits.saturating_mul(units)).min(held)
    }
}
