//! [`TraceParent`]: where a job's trace goes on, kept with the job so that every replica's driver
//! continues the trace its submission started.

/// A W3C `traceparent` value (`00-<trace id>-<parent span id>-<flags>`, lower-case hex), checked
/// once; adapters make and read it, the domain only keeps it and hands it back.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TraceParent(String);

impl TraceParent {
    /// `text` when it is a `traceparent` of version `00` with a trace id and a span id that are
    /// not all zeros.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        let parts: Vec<&str> = text.split('-').collect();
        let hex = |part: &str, len: usize| {
            part.len() == len && part.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        let fine = matches!(parts.as_slice(), [version, trace, span, flags]
            if *version == "00" && hex(trace, 32) && hex(span, 16) && hex(flags, 2)
                && trace.bytes().any(|b| b != b'0') && span.bytes().any(|b| b != b'0'));
        fine.then(|| Self(text.to_owned()))
    }

    /// The value, as a `traceparent` header carries it.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::TraceParent;

    #[test]
    fn only_well_formed_version_00_values_are_taken() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(TraceParent::parse(good).map(|t| t.as_str().to_owned()), Some(good.to_owned()));
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            assert!(TraceParent::parse(bad).is_none(), "{bad}");
        }
    }
}
