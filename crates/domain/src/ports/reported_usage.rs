//! What a provider says it billed for a job, from its result or from its failure.

use crate::catalog::CostUnit;
use crate::decimal::Decimal;

/// What a provider says it billed for a job, whether the job succeeded or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReportedUsage {
    /// The units the provider says it bills for the job, in its own unit for the endpoint
    /// (a queue provider's billable units), when it says.
    pub billable_units: Option<Decimal>,
    /// How long the provider's machine ran the job, in seconds, when it says (Replicate's
    /// `predict_time`): the units of a route billed per compute second.
    pub compute_seconds: Option<Decimal>,
}

impl ReportedUsage {
    /// The units the provider reported for a route billed `per` unit: its billable units when
    /// it gave them, else its compute time for a route billed per compute second.
    #[must_use]
    pub fn units(&self, per: CostUnit) -> Option<Decimal> {
        self.billable_units.or(self.compute_seconds.filter(|_| per == CostUnit::ComputeSecond))
    }

    /// Whether the provider reported anything at all.
    #[must_use]
    pub fn is_reported(&self) -> bool {
        self.billable_units.is_some() || self.compute_seconds.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(text: &str) -> Decimal {
        text.parse().unwrap_or(Decimal::ZERO)
    }

    #[test]
    fn billable_units_come_first_and_compute_time_counts_only_per_compute_second() {
        let both = ReportedUsage { billable_units: Some(d("2")), compute_seconds: Some(d("7.5")) };
        assert_eq!(both.units(CostUnit::ComputeSecond), Some(d("2")));
        let timed = ReportedUsage { billable_units: None, compute_seconds: Some(d("7.5")) };
        assert_eq!(timed.units(CostUnit::ComputeSecond), Some(d("7.5")));
        assert_eq!(timed.units(CostUnit::Image), None, "a route billed per image is not billed per second");
        assert!(timed.is_reported() && !ReportedUsage::default().is_reported());
    }
}
