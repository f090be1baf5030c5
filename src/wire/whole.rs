//! Whole numbers as JSON carries them: `5`, or `5.0`. JSON has one number
//! type, and JSON Schema's `integer` is any number without a fraction, so a
//! client (or a model) that writes `5.0` means 5: the relay reads it so,
//! and refuses `5.5` saying why.

use serde::{Deserialize, Deserializer, de};
use std::fmt;

/// For `#[serde(default, deserialize_with = "whole::option")]`.
pub fn option<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i128>,
{
    Option::<Whole>::deserialize(deserializer)?
        .map(|Whole(n)| {
            T::try_from(n).map_err(|_| de::Error::custom(format!("{n} is out of range")))
        })
        .transpose()
}

/// For `#[serde(deserialize_with = "whole::required")]`: a field that
/// must be there.
pub fn required<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i128>,
{
    let Whole(n) = Whole::deserialize(deserializer)?;
    T::try_from(n).map_err(|_| de::Error::custom(format!("{n} is out of range")))
}

/// A field that is present, even as `null` (see `attention.rs`), and whole.
pub fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i128>,
{
    option(deserializer).map(Some)
}

struct Whole(i128);

impl<'de> Deserialize<'de> for Whole {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(WholeVisitor)
    }
}

struct WholeVisitor;

impl de::Visitor<'_> for WholeVisitor {
    type Value = Whole;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a whole number")
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Whole, E> {
        Ok(Whole(n.into()))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Whole, E> {
        Ok(Whole(n.into()))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Whole, E> {
        // Within ±2^64 an f64 without a fraction is exactly a whole number.
        if n.fract() == 0.0 && n.abs() < 18_446_744_073_709_551_616.0 {
            Ok(Whole(n as i128))
        } else {
            Err(E::custom(format!("{n} is not a whole number")))
        }
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Whole, E> {
        match text.parse::<i128>() {
            Ok(n) => Ok(Whole(n)),
            Err(_) => match text.parse::<f64>() {
                Ok(n) => self.visit_f64(n),
                Err(_) => Err(E::custom(format!("{text:?} is not a whole number"))),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Args {
        #[serde(default, deserialize_with = "super::option")]
        id: Option<i64>,
    }

    fn read(json: &str) -> Result<Option<i64>, String> {
        serde_json::from_str::<Args>(json)
            .map(|a| a.id)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn reads_integral_numbers_and_refuses_the_rest() {
        assert_eq!(read(r#"{"id": 5}"#), Ok(Some(5)));
        assert_eq!(read(r#"{"id": 5.0}"#), Ok(Some(5)));
        assert_eq!(read(r#"{"id": -2}"#), Ok(Some(-2)));
        assert_eq!(read(r#"{"id": null}"#), Ok(None));
        assert_eq!(read(r#"{}"#), Ok(None));
        assert!(
            read(r#"{"id": 5.5}"#)
                .unwrap_err()
                .contains("not a whole number")
        );
        assert!(
            read(r#"{"id": 1e300}"#)
                .unwrap_err()
                .contains("not a whole number")
        );
        assert!(
            read(r#"{"id": 9223372036854775808}"#)
                .unwrap_err()
                .contains("out of range")
        );
        assert!(read(r#"{"id": "x"}"#).is_err());
    }
}
