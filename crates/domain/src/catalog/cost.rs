//! What a provider bills the operator for a route: a price per unit (image, megapixel, second of
//! video, second of compute, request), and what one job's units and cost come to. The units
//! come from the provider's own report when it makes one, else from what was delivered.

use serde::{Deserialize, Deserializer, Serialize};

use crate::decimal::Decimal;
use crate::output::OutputItem;

/// What a provider counts when it bills.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CostUnit {
    /// Each image delivered.
    Image,
    /// Each million pixels delivered (width × height / 1,000,000, summed over the images).
    Megapixel,
    /// Each second of video delivered.
    Second,
    /// Each second the provider's machine ran (Replicate's `predict_time`).
    ComputeSecond,
    /// Each request, whatever it delivered.
    Request,
}

impl CostUnit {
    /// The name the catalog spells it by.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            CostUnit::Image => "image",
            CostUnit::Megapixel => "megapixel",
            CostUnit::Second => "second",
            CostUnit::ComputeSecond => "compute_second",
            CostUnit::Request => "request",
        }
    }

    /// Reads [`CostUnit::as_str`].
    #[must_use]
    pub fn parse(text: &str) -> Option<CostUnit> {
        [CostUnit::Image, CostUnit::Megapixel, CostUnit::Second, CostUnit::ComputeSecond, CostUnit::Request]
            .into_iter()
            .find(|unit| unit.as_str() == text)
    }
}

/// A route's cost: `{"per": "megapixel", "usd": "0.05"}`, what the provider bills per unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cost {
    /// What is counted.
    pub per: CostUnit,
    /// US dollars per unit, a decimal string of at least zero.
    #[serde(deserialize_with = "not_negative")]
    pub usd: Decimal,
}

fn not_negative<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Decimal, D::Error> {
    let usd = Decimal::deserialize(deserializer)?;
    if usd.is_negative() {
        return Err(serde::de::Error::custom(format!("a cost is at least 0; got {usd}")));
    }
    Ok(usd)
}

/// What a job sent on a route with a cost keeps from its submission on: the route's cost (a
/// later change of the catalog does not reprice it) and the last characters of the provider key
/// it went on, when the provider has several.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Billing {
    /// The route's cost per unit.
    pub cost: Cost,
    /// The provider key's last 4 characters, when known.
    pub key_hint: Option<String>,
}

/// What a final job cost the operator at its provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderBill {
    /// Units billed: the provider's report, else what was delivered.
    pub units: Decimal,
    /// Units the user paid for (what was delivered, in the cost's unit); `None` where delivery
    /// does not say (compute seconds).
    pub units_charged: Option<Decimal>,
    /// `units × usd`, to the billionth.
    pub cost_usd: Decimal,
}

impl Billing {
    /// A succeeded job's bill: the provider's `reported` units when it reported some, else
    /// those of the `outputs` delivered (`requested_secs` standing in for a video whose length
    /// the provider did not give).
    #[must_use]
    pub fn delivered(&self, outputs: &[OutputItem], reported: Option<Decimal>, requested_secs: u32) -> ProviderBill {
        let units_charged = delivered_units(self.cost.per, outputs, requested_secs);
        let units = reported.or(units_charged).unwrap_or(Decimal::ZERO);
        ProviderBill { units, units_charged, cost_usd: units.times(self.cost.usd) }
    }

    /// A failed or canceled job's bill: nothing delivered, so 0 units unless the provider
    /// `reported` some (which the user did not pay for).
    #[must_use]
    pub fn undelivered(&self, reported: Option<Decimal>) -> ProviderBill {
        let units = reported.unwrap_or(Decimal::ZERO);
        ProviderBill { units, units_charged: Some(Decimal::ZERO), cost_usd: units.times(self.cost.usd) }
    }
}

/// The units of `outputs` counted as `per` counts them; `None` for compute seconds, which no
/// output tells.
fn delivered_units(per: CostUnit, outputs: &[OutputItem], requested_secs: u32) -> Option<Decimal> {
    match per {
        CostUnit::Image => Some(Decimal::whole(outputs.len() as u64)),
        CostUnit::Megapixel => {
            let pixels: u64 = outputs
                .iter()
                .map(|o| u64::from(o.meta.width.unwrap_or(0)) * u64::from(o.meta.height.unwrap_or(0)))
                .sum();
            Some(Decimal::ratio(pixels, 1_000_000))
        }
        CostUnit::Second => Some(
            outputs
                .iter()
                .filter_map(|o| o.meta.duration_sec.and_then(Decimal::from_report))
                .max()
                .unwrap_or_else(|| Decimal::whole(u64::from(requested_secs))),
        ),
        CostUnit::ComputeSecond => None,
        CostUnit::Request => Some(Decimal::whole(1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::{OutputKind, OutputMeta};

    fn image(width: u32, height: u32) -> OutputItem {
        OutputItem {
            url: "https://example.com/a.png".into(),
            kind: OutputKind::Image,
            meta: OutputMeta { width: Some(width), height: Some(height), ..OutputMeta::default() },
            copy: None,
        }
    }

    fn billing(per: CostUnit, usd: &str) -> Billing {
        Billing { cost: Cost { per, usd: usd.parse().unwrap() }, key_hint: None }
    }

    #[test]
    fn delivered_units_follow_the_costs_unit() {
        let two = [image(1024, 1024), image(1000, 500)];
        let per_image = billing(CostUnit::Image, "0.04").delivered(&two, None, 0);
        assert_eq!((per_image.units.to_string(), per_image.cost_usd.to_string()), ("2".into(), "0.08".into()));
        let per_megapixel = billing(CostUnit::Megapixel, "0.05").delivered(&two, None, 0);
        assert_eq!(per_megapixel.units.to_string(), "1.548576");
        assert_eq!(per_megapixel.cost_usd.to_string(), "0.0774288");
        let per_request = billing(CostUnit::Request, "0.3").delivered(&two, None, 0);
        assert_eq!(per_request.units, Decimal::whole(1));
        let compute = billing(CostUnit::ComputeSecond, "0.001").delivered(&two, None, 0);
        assert_eq!((compute.units, compute.units_charged), (Decimal::ZERO, None));
    }

    #[test]
    fn a_providers_report_comes_first_and_a_video_counts_its_seconds() {
        let reported = billing(CostUnit::Image, "0.04").delivered(&[image(1, 1)], Some(Decimal::whole(4)), 0);
        assert_eq!(reported.units, Decimal::whole(4));
        assert_eq!(reported.units_charged, Some(Decimal::whole(1)), "what the user paid for stays apart");
        let mut video = image(1280, 720);
        video.kind = OutputKind::Video;
        video.meta.duration_sec = Some(4.2);
        let seconds = billing(CostUnit::Second, "0.1").delivered(&[video.clone()], None, 5);
        assert_eq!((seconds.units.to_string(), seconds.cost_usd.to_string()), ("4.2".into(), "0.42".into()));
        video.meta.duration_sec = None;
        assert_eq!(billing(CostUnit::Second, "0.1").delivered(&[video], None, 5).units, Decimal::whole(5));
    }

    #[test]
    fn an_undelivered_job_costs_only_what_its_provider_reported() {
        let nothing = billing(CostUnit::ComputeSecond, "0.002").undelivered(None);
        assert_eq!((nothing.units, nothing.cost_usd), (Decimal::ZERO, Decimal::ZERO));
        let ran = billing(CostUnit::ComputeSecond, "0.002").undelivered(Some("3.5".parse().unwrap()));
        assert_eq!(ran.cost_usd.to_string(), "0.007");
    }

    #[test]
    fn a_cost_is_read_strictly() {
        let read = |value: serde_json::Value| serde_json::from_value::<Cost>(value);
        assert_eq!(read(serde_json::json!({"per": "megapixel", "usd": "0.05"})).unwrap().per, CostUnit::Megapixel);
        assert!(read(serde_json::json!({"per": "minute", "usd": "0.05"})).is_err());
        assert!(read(serde_json::json!({"per": "image", "usd": "-1"})).is_err());
        assert!(read(serde_json::json!({"per": "image", "usd": 0.05})).is_err(), "a decimal string, not a float");
        assert!(read(serde_json::json!({"per": "image", "usd": "1e-2"})).is_err());
    }
}
