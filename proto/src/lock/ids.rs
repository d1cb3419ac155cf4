//! Where an acquisition's names come from.

use super::AttemptId;

/// Attempt ids, unique per [`LockMachine`](super::LockMachine), and a
/// v4-shaped UUID for each: the protected id in the names of the
/// attempt's nodes (Curator's `_c_<uuid>-`).
#[derive(Debug)]
pub struct AttemptIds {
    next: std::sync::atomic::AtomicU64,
    /// Random once per client; each attempt's UUID is derived from it and
    /// the counter, so queueing costs no system call for randomness.
    seed: u128,
}

impl AttemptIds {
    /// Seeded from std's per-process random hash keys.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        AttemptIds::with_seed(crate::random_seed())
    }

    /// Seeded by the caller: a simulator's runs replay exactly.
    pub fn with_seed(seed: u128) -> Self {
        AttemptIds {
            next: std::sync::atomic::AtomicU64::new(1),
            seed,
        }
    }

    /// The next attempt's id and UUID.
    pub fn next(&self) -> (AttemptId, String) {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // The seed mixed with a bijection of the counter: distinct ids
        // give distinct UUIDs.
        let mixed = u128::from(splitmix64(id)) << 64 | u128::from(splitmix64(!id));
        let uuid = uuid::Builder::from_random_bytes((self.seed ^ mixed).to_be_bytes()).into_uuid();
        // Encoded straight into a buffer: `to_string` goes through the
        // formatting machinery, on every acquisition.
        let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
        let uuid = uuid.hyphenated().encode_lower(&mut text).to_owned();
        (id, uuid)
    }
}

/// A bijection on u64 that scatters its input (SplitMix64's finaliser).
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
