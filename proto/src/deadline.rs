//! Deadlines from caller-given durations without overflow: `Instant +
//! Duration` panics past what the clock can represent, and
//! `Duration::MAX` is a natural way to say "no limit".

use std::time::{Duration, Instant};

/// The longest wait scheduled: about 100 years, "never" for any process,
/// and far enough below the clock's range that adding it to any `Instant`
/// the system hands out cannot overflow.
pub const FAR_FUTURE: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// `now + timeout`, with `timeout` capped at [`FAR_FUTURE`].
///
/// ```
/// use std::time::{Duration, Instant};
/// let now = Instant::now();
/// assert_eq!(zklock_proto::deadline::after(now, Duration::MAX), now + zklock_proto::deadline::FAR_FUTURE);
/// ```
pub fn after(now: Instant, timeout: Duration) -> Instant {
    let capped = timeout.min(FAR_FUTURE);
    // Unreachable fallbacks: a monotonic clock 100 years from its end.
    now.checked_add(capped)
        .or_else(|| now.checked_add(Duration::from_secs(24 * 60 * 60)))
        .unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extreme_timeouts_give_deadlines_without_panicking() {
        let now = Instant::now();
        assert_eq!(after(now, Duration::ZERO), now);
        assert_eq!(
            after(now, Duration::from_nanos(1)),
            now + Duration::from_nanos(1)
        );
        assert_eq!(after(now, Duration::MAX), now + FAR_FUTURE);
        assert_eq!(
            after(now, Duration::from_secs(u64::MAX / 2)),
            now + FAR_FUTURE
        );
    }

    /// Only "never" is capped: a long wait a caller asks for, ten or
    /// ninety-nine years, ends when asked, not sooner (each mutant of the
    /// constant's product makes it two years or less).
    ///
    /// Kills: `FAR_FUTURE` any `*` → `+` or `/`
    #[test]
    fn long_timeouts_below_a_century_are_kept_as_asked() {
        let now = Instant::now();
        for years in [10, 99] {
            let timeout = Duration::from_secs(years * 365 * 24 * 60 * 60);
            assert_eq!(after(now, timeout), now + timeout, "{years} years");
        }
    }
}
