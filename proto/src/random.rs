//! Random bits without a crate for them. std seeds each thread's hash keys
//! from the operating system's random source once; every `RandomState`
//! after that gets keys of its own, and its SipHash of a fixed input is
//! unpredictable to whoever does not know them. That is enough for what
//! the client draws: attempt ids (unique per client), the order hosts are
//! tried in, and a SASL client nonce. (The `uuid` crate's `v4` feature
//! would pull in `getrandom` and `cfg-if` for the same.)

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

/// 128 unpredictable bits, for seeds ([`lock::AttemptIds::with_seed`](crate::lock::AttemptIds::with_seed),
/// a host order), with no system call per draw.
pub fn random_seed() -> u128 {
    let state = RandomState::new();
    let half = |tag: u8| {
        let mut h = state.build_hasher();
        h.write_u8(tag);
        h.finish()
    };
    u128::from(half(1)) << 64 | u128::from(half(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_differ() {
        let draws: std::collections::BTreeSet<u128> = (0..1000).map(|_| random_seed()).collect();
        assert_eq!(draws.len(), 1000);
        // Both halves vary, not only the counter std bumps.
        let highs: std::collections::BTreeSet<u64> =
            draws.iter().map(|d| (d >> 64) as u64).collect();
        assert_eq!(highs.len(), 1000);
    }

    #[test]
    fn other_threads_draw_other_bits() {
        let here = random_seed();
        let there = std::thread::spawn(random_seed).join().expect("a thread");
        assert_ne!(here, there);
    }
}
