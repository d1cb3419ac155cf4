//! Deadlines from caller-given durations: every timeout the API takes
//! becomes a deadline here, capped so that it cannot overflow.

use std::time::{Duration, Instant};

pub(crate) use zklock_proto::deadline::{after, FAR_FUTURE};

/// [`after`] from the present moment.
pub(crate) fn from_now(timeout: Duration) -> Instant {
    after(Instant::now(), timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_from_now_lies_ahead_even_for_no_limit() {
        let now = Instant::now();
        assert!(from_now(Duration::MAX) > now + FAR_FUTURE / 2);
        assert!(from_now(Duration::ZERO) >= now);
    }
}
