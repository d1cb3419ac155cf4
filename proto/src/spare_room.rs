//! Queues and buffers that a burst grew give their room back once drained.
//!
//! A session that queues a hundred waiters at once fills its queues of
//! requests, replies awaited and events with hundreds of entries; a
//! `VecDeque` keeps that room for good, and over many sessions that adds
//! up (bench/FIGURES.md). Past a small size, a drained
//! queue starts again empty; a later burst grows it again, a few
//! reallocations.

use std::collections::{HashMap, VecDeque};

use bytes::BytesMut;

/// Room kept by a drained queue: what one caller's requests need.
const KEPT: usize = 32;

/// Room kept by a drained byte buffer: a few ordinary requests. A burst of
/// a hundred creates and their watches encodes to more than this.
const KEPT_BYTES: usize = 16 * 1024;

/// Pops the front of `queue`, and lets its room go if that emptied it and
/// it had grown past [`KEPT`].
pub(crate) fn pop_front<T>(queue: &mut VecDeque<T>) -> Option<T> {
    let item = queue.pop_front();
    if queue.is_empty() && queue.capacity() > KEPT {
        *queue = VecDeque::new();
    }
    item
}

/// Room kept by a drained table: the requests of a few acquisitions.
const KEPT_ENTRIES: usize = 64;

/// Lets `table`'s room go if it is empty and grew past [`KEPT_ENTRIES`].
pub(crate) fn release_drained_table<K, V, S: Default>(table: &mut HashMap<K, V, S>) {
    if table.is_empty() && table.capacity() > KEPT_ENTRIES {
        *table = HashMap::default();
    }
}

/// Lets `buf`'s room go if it is drained and grew past [`KEPT_BYTES`].
pub(crate) fn release_drained(buf: &mut BytesMut) {
    if !buf.is_empty() {
        return;
    }
    // `capacity` leaves out the bytes consumed from the front, which stay
    // allocated: take them back first, so that a buffer a burst grew and
    // then consumed is seen at its size (without it, every session of a
    // burst kept its grown output buffer: bench/FIGURES.md).
    let whole = buf.capacity() + 1;
    let _ = buf.try_reclaim(whole);
    if buf.capacity() > KEPT_BYTES {
        *buf = BytesMut::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drained_queue_lets_a_bursts_room_go() {
        let mut q: VecDeque<u32> = (0..1000).collect();
        while pop_front(&mut q).is_some() {}
        assert_eq!(q.capacity(), 0);
    }

    #[test]
    fn a_drained_buffer_lets_a_bursts_room_go_and_keeps_a_small_ones() {
        let mut buf = BytesMut::from(&[7u8; 100_000][..]);
        let _ = buf.split_to(50_000);
        release_drained(&mut buf);
        assert!(buf.capacity() >= 50_000, "not drained: kept");
        buf.clear();
        release_drained(&mut buf);
        assert_eq!(buf.capacity(), 0);
        let mut small = BytesMut::with_capacity(KEPT_BYTES);
        release_drained(&mut small);
        assert_eq!(small.capacity(), KEPT_BYTES);
    }

    #[test]
    fn a_buffer_consumed_from_the_front_is_seen_at_its_size() {
        use bytes::Buf;
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&[7u8; 40_000]);
        buf.advance(39_000);
        release_drained(&mut buf);
        assert!(buf.capacity() >= 1_000, "not drained: kept");
        buf.advance(1_000);
        release_drained(&mut buf);
        assert_eq!(buf.capacity(), 0);
        // A small one consumed the same way keeps its room, from the front.
        let mut small = BytesMut::with_capacity(KEPT_BYTES);
        small.extend_from_slice(&[7u8; 1_000]);
        small.advance(1_000);
        release_drained(&mut small);
        assert_eq!(small.capacity(), KEPT_BYTES);
    }

    #[test]
    fn an_emptied_table_lets_a_bursts_room_go_and_a_full_one_keeps_all() {
        let mut t: HashMap<u32, u32> = (0..1000).map(|i| (i, i)).collect();
        release_drained_table(&mut t);
        assert_eq!(t.len(), 1000, "not empty: kept");
        t.clear();
        release_drained_table(&mut t);
        assert_eq!(t.capacity(), 0);
    }

    #[test]
    fn a_small_queue_keeps_its_room() {
        let mut q: VecDeque<u32> = VecDeque::with_capacity(KEPT);
        q.extend(0..3);
        let room = q.capacity();
        while pop_front(&mut q).is_some() {}
        assert_eq!(q.capacity(), room);
        // Not drained: the room stays.
        let mut q: VecDeque<u32> = (0..1000).collect();
        assert_eq!(pop_front(&mut q), Some(0));
        assert!(q.capacity() >= 999);
    }
}
