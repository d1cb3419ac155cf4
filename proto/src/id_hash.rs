//! A hasher for maps that hold one key per thing of this process's own:
//! request tokens, attempt ids, a thread's locks by session and lock path,
//! the nodes a session holds.
//!
//! std's default hasher is built to resist keys an attacker picks, and costs
//! a few hundred instructions per lookup; a lock cycle does dozens of
//! lookups. A map here holds no more keys than the process has requests,
//! attempts or held nodes, whoever chose their names, so no one can fill it
//! with keys that collide, and one multiply per word serves. A lookup with a
//! key from the wire (the path of a watch event) costs at most a probe per
//! key inside.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A map keyed by ids this process made.
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// Multiply-rotate hashing of whole words (the scheme of rustc's FxHash).
/// Sequential keys get distinct low bits and well-mixed high bits, the two
/// parts a hash table reads.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

const K: u64 = 0xf135_7aea_2e62_a9c5;

impl IdHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
    }
}

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let mut rest = [0u8; 8];
        rest[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        self.add(u64::from_le_bytes(rest) ^ bytes.len() as u64);
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, Hash};

    fn hash<T: Hash>(value: T) -> u64 {
        BuildHasherDefault::<IdHasher>::default().hash_one(value)
    }

    /// The table's bucket is the low bits and its tag the top seven: a run of
    /// ids (how tokens and attempts are handed out) must spread over both.
    #[test]
    fn a_run_of_ids_spreads_over_the_low_bits_and_the_tags() {
        let ids = 0..1024u64;
        let buckets: std::collections::HashSet<u64> = ids.clone().map(|i| hash(i) & 1023).collect();
        assert_eq!(
            buckets.len(),
            1024,
            "sequential ids collide in a 1024-bucket table"
        );
        let tags: std::collections::HashSet<u64> = ids.map(|i| hash(i) >> 57).collect();
        assert!(tags.len() > 100, "only {} of 128 tags used", tags.len());
    }

    /// Bytes that differ only in length or in their last byte hash apart.
    #[test]
    fn byte_strings_that_differ_in_length_or_tail_hash_apart() {
        assert_ne!(hash(&b"abcdefgh"[..]), hash(&b"abcdefghi"[..]));
        assert_ne!(hash(&b"abc"[..]), hash(&b"abc\0"[..]));
        assert_ne!(hash(&b"abcdefghij"[..]), hash(&b"abcdefghik"[..]));
    }
}
