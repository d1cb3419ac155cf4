//! Durations as decimal seconds (`1.5`, `10`), read and written with
//! integers: no floating-point parsing or printing is linked into the CLI
//! for them, which keeps the stripped binary smaller (issue 26,
//! bench/FIGURES.md).

use std::time::Duration;

/// The largest whole number of seconds accepted.
const MAX_SECS: u64 = 999_999_999;

/// `text` as seconds: digits, optionally a point and up to nine more
/// digits (nanoseconds; more are cut off). `None` for anything else.
pub fn parse(text: &str) -> Option<Duration> {
    let (whole, fraction) = match text.split_once('.') {
        Some((w, f)) => (w, f),
        None => (text, ""),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits(whole) || !digits(fraction) {
        return None;
    }
    let secs = if whole.is_empty() {
        0
    } else {
        whole.parse::<u64>().ok().filter(|s| *s <= MAX_SECS)?
    };
    let mut nanos = 0u32;
    for (i, b) in fraction.bytes().take(9).enumerate() {
        nanos += u32::from(b - b'0') * 10u32.pow(8 - i as u32);
    }
    Some(Duration::new(secs, nanos))
}

/// `d` in decimal seconds, as short as it is exact: `10`, `1.5`, `0.001`.
pub fn decimal(d: Duration) -> String {
    let nanos = d.subsec_nanos();
    if nanos == 0 {
        return d.as_secs().to_string();
    }
    let fraction = format!("{nanos:09}");
    format!("{}.{}", d.as_secs(), fraction.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_whole_and_decimal_seconds() {
        assert_eq!(parse("10"), Some(Duration::from_secs(10)));
        assert_eq!(parse("1.5"), Some(Duration::from_millis(1500)));
        assert_eq!(parse("0.001"), Some(Duration::from_millis(1)));
        assert_eq!(parse(".25"), Some(Duration::from_millis(250)));
        assert_eq!(parse("3."), Some(Duration::from_secs(3)));
        assert_eq!(parse("0"), Some(Duration::ZERO));
        assert_eq!(parse("0.0000000019"), Some(Duration::from_nanos(1)));
        assert_eq!(
            parse("999999999.5"),
            Some(Duration::new(999_999_999, 500_000_000))
        );
    }

    #[test]
    fn refuses_what_is_not_plain_decimal_seconds() {
        for bad in [
            "",
            ".",
            "-1",
            "+1",
            "1e3",
            "1.2.3",
            "1,5",
            "inf",
            "nan",
            "1s",
            " 1",
            "1000000000",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn writes_as_short_as_exact_and_reads_back() {
        for (d, text) in [
            (Duration::from_secs(10), "10"),
            (Duration::from_millis(1500), "1.5"),
            (Duration::from_millis(1), "0.001"),
            (Duration::from_nanos(1), "0.000000001"),
            (Duration::ZERO, "0"),
        ] {
            assert_eq!(decimal(d), text);
            assert_eq!(parse(text), Some(d));
        }
    }
}
