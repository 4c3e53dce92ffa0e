//! How request bodies read whole numbers. Clients send `5`, and some send `5.0` (JavaScript has
//! one number type), or, from a form drawn from the models listing, the text of a `select`
//! option (`"10"`): each is the whole number it writes. Anything negative, fractional or too
//! large is refused by serde, so that the edge names the field from the serde path.

use std::fmt;

use serde::de::{self, Deserializer, Unexpected, Visitor};

/// Reads a whole number from 0 to `MAX`; `TEXT` says whether its text is taken too.
struct Whole<const MAX: u64, const TEXT: bool>;

impl<const MAX: u64, const TEXT: bool> Whole<MAX, TEXT> {
    fn at_most<E: de::Error>(&self, n: u64) -> Result<u64, E> {
        if n <= MAX { Ok(n) } else { Err(E::invalid_value(Unexpected::Unsigned(n), self)) }
    }
}

impl<'de, const MAX: u64, const TEXT: bool> Visitor<'de> for Whole<MAX, TEXT> {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a whole number from 0 to {MAX}")?;
        if TEXT { f.write_str(", or its text") } else { Ok(()) }
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<u64, E> {
        self.at_most(n)
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<u64, E> {
        let n = u64::try_from(n).map_err(|_| E::invalid_value(Unexpected::Signed(n), &self))?;
        self.at_most(n)
    }

    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "checked to be whole and in range")]
    fn visit_f64<E: de::Error>(self, f: f64) -> Result<u64, E> {
        if f.fract() == 0.0 && (0.0..=MAX as f64).contains(&f) {
            self.at_most(f as u64)
        } else {
            Err(E::invalid_value(Unexpected::Float(f), &self))
        }
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<u64, E> {
        if !TEXT {
            return Err(E::invalid_type(Unexpected::Str(text), &self));
        }
        let n = text.trim().parse::<u64>().map_err(|_| E::invalid_value(Unexpected::Str(text), &self))?;
        self.at_most(n)
    }
}

/// Reads an optional whole number; `null` is absent.
struct Optional<const MAX: u64, const TEXT: bool>;

impl<'de, const MAX: u64, const TEXT: bool> Visitor<'de> for Optional<MAX, TEXT> {
    type Value = Option<u64>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Whole::<MAX, TEXT>.expecting(f)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(Whole::<MAX, TEXT>).map(Some)
    }
}

const U32_MAX: u64 = u32::MAX as u64;

/// An optional `u32`, written as a number.
pub(crate) fn optional_u32<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
    let n = deserializer.deserialize_option(Optional::<U32_MAX, false>)?;
    Ok(n.and_then(|n| u32::try_from(n).ok()))
}

/// An optional `u32`, written as a number or as its text.
pub(crate) fn optional_u32_or_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
    let n = deserializer.deserialize_option(Optional::<U32_MAX, true>)?;
    Ok(n.and_then(|n| u32::try_from(n).ok()))
}

/// An optional `u64`, written as a number.
pub(crate) fn optional_u64<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    deserializer.deserialize_option(Optional::<{ u64::MAX }, false>)
}
