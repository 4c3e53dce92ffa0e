//! serde's refusals of a body field, in the words of the API rather than of Rust's types:
//! "invalid value: integer `-5`, expected u64" becomes "`credits` must be a whole number (0 or
//! more); got -5". A refusal of another shape keeps serde's words after the field's name.

/// The message for field `key`, which serde refused with `serde_message`.
pub(crate) fn field_refusal(key: &str, serde_message: &str) -> String {
    if let Some((got, expected)) =
        serde_message.strip_prefix("unknown variant ").and_then(|rest| rest.split_once(", expected "))
    {
        return format!("`{key}` must be {expected}; got {got}");
    }
    let worded = serde_message
        .strip_prefix("invalid type: ")
        .or_else(|| serde_message.strip_prefix("invalid value: "))
        .and_then(|rest| rest.rsplit_once(", expected "))
        .map(|(got, expected)| (got, expected_words(expected)));
    match worded {
        Some((got, Some(expected))) => {
            let expected = narrower_range(key).unwrap_or(expected);
            format!("`{key}` must be {expected}; got {}", got_words(got))
        }
        _ => format!("`{key}`: {serde_message}"),
    }
}

/// The range of a whole-number field whose rule is narrower than its type's, as the domain's
/// own refusal of it says, so that a value serde refuses is told the same range.
fn narrower_range(key: &str) -> Option<&'static str> {
    match key {
        "price_percent" => Some("an integer from 1 to 1000"),
        "rate_limit_per_minute" | "max_concurrent_jobs" => Some("a positive integer"),
        _ => None,
    }
}

/// What serde expected, as the API says it; `None` for what has no plainer words.
fn expected_words(expected: &str) -> Option<&'static str> {
    let unsigned = ["u8", "u16", "u32", "u64", "usize"];
    let signed = ["i8", "i16", "i32", "i64", "isize"];
    if unsigned.contains(&expected) || expected.starts_with("a whole number from 0") {
        Some("a whole number (0 or more)")
    } else if signed.contains(&expected) {
        Some("an integer")
    } else if expected == "a string" || expected == "a borrowed string" {
        Some("a string")
    } else if expected == "a boolean" {
        Some("true or false")
    } else if expected == "a sequence" {
        Some("a list")
    } else if expected == "a map" || expected.starts_with("struct ") {
        Some("an object")
    } else {
        None
    }
}

/// The value serde found (its `Unexpected`), as JSON spells it.
fn got_words(got: &str) -> String {
    let quoted = |prefix: &str| got.strip_prefix(prefix).map(|v| v.trim_matches('`').to_owned());
    if let Some(number) = quoted("integer ").or_else(|| quoted("floating point ")) {
        number
    } else if let Some(text) = got.strip_prefix("string ") {
        format!("the string {text}")
    } else if let Some(flag) = quoted("boolean ") {
        flag
    } else {
        match got {
            "sequence" => "a list".into(),
            "map" => "an object".into(),
            "unit value" | "null" => "null".into(),
            other => other.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_types_become_the_apis_words() {
        let cases = [
            (
                "credits",
                "invalid value: integer `-5`, expected u64",
                "`credits` must be a whole number (0 or more); got -5",
            ),
            (
                "seed",
                "invalid type: string \"2\", expected a whole number from 0 to 18446744073709551615",
                "`seed` must be a whole number (0 or more); got the string \"2\"",
            ),
            ("prompt", "invalid type: integer `3`, expected a string", "`prompt` must be a string; got 3"),
            ("amount", "invalid type: floating point `1.5`, expected i64", "`amount` must be an integer; got 1.5"),
            ("image_inputs", "invalid type: map, expected a sequence", "`image_inputs` must be a list; got an object"),
            ("extra", "invalid type: sequence, expected a map", "`extra` must be an object; got a list"),
            (
                "price_percent",
                "invalid value: integer `-3`, expected u64",
                "`price_percent` must be an integer from 1 to 1000; got -3",
            ),
            (
                "max_concurrent_jobs",
                "invalid value: integer `-1`, expected u64",
                "`max_concurrent_jobs` must be a positive integer; got -1",
            ),
        ];
        for (key, serde_message, worded) in cases {
            assert_eq!(field_refusal(key, serde_message), worded);
        }
        assert_eq!(
            field_refusal("price.per", "unknown variant `minute`, expected `image` or `second`"),
            "`price.per` must be `image` or `second`; got `minute`"
        );
        assert_eq!(field_refusal("x", "something else"), "`x`: something else");
    }
}
