//! What a model costs, and the rate a job keeps from its acceptance on: a later price change
//! moves neither its hold nor its charge.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::credits::Credits;
use crate::input::GenerationInput;
use crate::output::OutputItem;

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
        Rate { per: self.per, credits }
    }
}

/// What one unit of a job's output costs, fixed when the job is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// What is counted.
    pub per: Unit,
    /// Credits per unit.
    pub credits: u64,
}

impl Rate {
    /// The most a request can cost: what is held at acceptance (the images asked for, or the
    /// seconds asked for).
    #[must_use]
    pub fn to_hold(&self, input: &GenerationInput) -> Credits {
        let units = match self.per {
            Unit::Image => u64::from(input.n.unwrap_or(1)),
            Unit::Second => u64::from(input.duration_sec.unwrap_or(0)),
        };
        Credits::new(self.credits.saturating_mul(units))
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
        Credits::new(self.credits.saturating_mul(units)).min(held)
    }
}
