//! Counts in sentences: "1 job", "2 jobs".

use std::fmt::Display;

/// `n` and `noun`, the noun plural unless `n` is one.
pub(crate) fn counted(n: impl Display, noun: &str) -> String {
    let n = n.to_string();
    if n == "1" { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

#[cfg(test)]
mod tests {
    use super::counted;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(counted(1u64, "job"), "1 job");
        assert_eq!(counted(0u32, "job"), "0 jobs");
        assert_eq!(counted(12usize, "change"), "12 changes");
    }
}
