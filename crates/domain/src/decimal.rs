//! [`Decimal`]: an exact decimal with nine fractional digits, for what money and provider units
//! are summed in. No floating point touches a sum: a provider's price per unit, a job's units and
//! its cost are each held as a whole number of billionths.
//!
//! Rounding, decided once: a product (units × price per unit) is rounded to the nearest
//! billionth, halves away from zero; sums add the rounded figures, so a report's total is the
//! sum of its jobs' costs exactly. A provider's fractional report (billable units, compute
//! seconds) is read to the nearest billionth the same way.

use std::fmt;
use std::str::FromStr;

/// Fractional digits kept.
pub const DECIMAL_PLACES: u32 = 9;
const ONE: i64 = 1_000_000_000;

/// An exact decimal of nine fractional digits (billionths), signed so that a margin can be
/// negative; shown and read as a decimal string (`"0.055"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Decimal(i64);

/// Why a text is not a [`Decimal`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a decimal number of at most {DECIMAL_PLACES} fractional digits")]
pub struct NotADecimal(pub String);

impl Decimal {
    /// Zero.
    pub const ZERO: Decimal = Decimal(0);

    /// The decimal of `billionths` billionths (how stores keep it).
    #[must_use]
    pub const fn from_billionths(billionths: i64) -> Self {
        Self(billionths)
    }

    /// The whole number `n`.
    #[must_use]
    pub fn whole(n: u64) -> Self {
        Self(i64::try_from(n).unwrap_or(i64::MAX / ONE).saturating_mul(ONE))
    }

    /// Its billionths.
    #[must_use]
    pub const fn billionths(self) -> i64 {
        self.0
    }

    /// Whether it is below zero.
    #[must_use]
    pub const fn is_negative(self) -> bool {
        self.0 < 0
    }

    /// `numerator / denominator`, rounded to the nearest billionth (megapixels: pixels over a
    /// million); zero for a zero denominator.
    #[must_use]
    pub fn ratio(numerator: u64, denominator: u64) -> Self {
        if denominator == 0 {
            return Self::ZERO;
        }
        let scaled = u128::from(numerator) * ONE as u128;
        let d = u128::from(denominator);
        Self(i64::try_from((scaled + d / 2) / d).unwrap_or(i64::MAX))
    }

    /// The nearest decimal to a provider's floating-point report (Replicate's seconds); `None`
    /// for one that is not a finite number of at least zero.
    #[must_use]
    pub fn from_report(value: f64) -> Option<Self> {
        (value.is_finite() && value >= 0.0 && value < (i64::MAX / ONE) as f64)
            .then(|| Self((value * ONE as f64).round() as i64))
    }

    /// `self × other`, rounded to the nearest billionth (halves away from zero), saturating.
    #[must_use]
    pub fn times(self, other: Decimal) -> Decimal {
        let product = i128::from(self.0) * i128::from(other.0);
        let half = i128::from(ONE / 2) * product.signum();
        let rounded = (product + half) / i128::from(ONE);
        Decimal(i64::try_from(rounded).unwrap_or(if rounded < 0 { i64::MIN } else { i64::MAX }))
    }

    /// `self + other`, saturating.
    #[must_use]
    pub fn plus(self, other: Decimal) -> Decimal {
        Decimal(self.0.saturating_add(other.0))
    }

    /// `self − other`, saturating.
    #[must_use]
    pub fn minus(self, other: Decimal) -> Decimal {
        Decimal(self.0.saturating_sub(other.0))
    }

    /// Rounded up to a whole number (a video's seconds delivered); 0 for a negative one.
    #[must_use]
    pub fn ceil_whole(self) -> u64 {
        u64::try_from(self.0.max(0)).unwrap_or(0).div_ceil(ONE as u64)
    }
}

impl fmt::Display for Decimal {
    /// The shortest exact decimal: `"0.055"`, `"3"`, `"-1.5"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let magnitude = self.0.unsigned_abs();
        let (whole, fraction) = (magnitude / ONE as u64, magnitude % ONE as u64);
        if fraction == 0 {
            return write!(f, "{sign}{whole}");
        }
        let digits = format!("{fraction:09}");
        write!(f, "{sign}{whole}.{}", digits.trim_end_matches('0'))
    }
}

impl FromStr for Decimal {
    type Err = NotADecimal;

    /// Reads `"12"`, `"0.055"`, `"-1.5"`: digits, at most one point, at most nine digits after
    /// it; no exponent, no spaces.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let refuse = || NotADecimal(text.to_owned());
        let (negative, unsigned) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (whole, fraction) = unsigned.split_once('.').unwrap_or((unsigned, ""));
        let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        let shaped = !whole.is_empty()
            && all_digits(whole)
            && all_digits(fraction)
            && (fraction.len() as u32) <= DECIMAL_PLACES
            && (!unsigned.contains('.') || !fraction.is_empty());
        if !shaped {
            return Err(refuse());
        }
        let whole: i64 = whole.parse().map_err(|_| refuse())?;
        let padded = format!("{fraction:0<9}");
        let fraction: i64 = padded.parse().map_err(|_| refuse())?;
        let magnitude = whole.checked_mul(ONE).and_then(|w| w.checked_add(fraction)).ok_or_else(refuse)?;
        Ok(Self(if negative { -magnitude } else { magnitude }))
    }
}

impl serde::Serialize for Decimal {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Decimal {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(text: &str) -> Decimal {
        text.parse().unwrap()
    }

    #[test]
    fn reads_and_shows_the_shortest_exact_decimal() {
        for (text, shown) in
            [("0.055", "0.055"), ("3", "3"), ("3.000", "3"), ("-1.5", "-1.5"), ("0.000000001", "0.000000001")]
        {
            assert_eq!(d(text).to_string(), shown);
        }
        for bad in ["", ".5", "5.", "1e3", "0.0000000001", "abc", " 1", "1.2.3", "--1", "99999999999"] {
            assert!(bad.parse::<Decimal>().is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn products_round_to_the_nearest_billionth_and_sums_are_exact() {
        assert_eq!(d("1.048576").times(d("0.05")).to_string(), "0.0524288");
        assert_eq!(d("0.000000001").times(d("0.5")), d("0.000000001"), "a half rounds away from zero");
        assert_eq!(d("0.000000001").times(d("0.4")), Decimal::ZERO);
        let tenth = d("0.1");
        let sum = (0..10).fold(Decimal::ZERO, |sum, _| sum.plus(tenth));
        assert_eq!(sum, d("1"), "ten tenths are exactly one, as floating point would not make them");
        assert_eq!(d("0.5").minus(d("0.75")).to_string(), "-0.25");
    }

    #[test]
    fn ratios_reports_and_whole_seconds() {
        assert_eq!(Decimal::ratio(1024 * 1024, 1_000_000).to_string(), "1.048576");
        assert_eq!(Decimal::ratio(1, 0), Decimal::ZERO);
        assert_eq!(Decimal::from_report(2.5).unwrap().to_string(), "2.5");
        assert!(Decimal::from_report(f64::NAN).is_none() && Decimal::from_report(-1.0).is_none());
        assert_eq!(d("4.2").ceil_whole(), 5);
        assert_eq!(d("4").ceil_whole(), 4);
        assert_eq!(Decimal::whole(7), d("7"));
    }
}
