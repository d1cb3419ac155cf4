//! A long frame (a listing of a queue of thousands) gathered in pieces of
//! bounded size rather than one buffer of its length.
//!
//! glibc maps a buffer past 128 KiB on its own and, once such a buffer is
//! freed, raises that bound to the freed size: from then on the buffers of
//! every later long reply come from the heap of the thread that read them,
//! and each of those heaps keeps its peak. A listing of a queue of
//! thousands is hundreds of KB, and many sessions list it at once: in
//! pieces, far less of it is live at a time, and with `PendingSet`'s table
//! also kept in small nodes the bench's many-waiters peak is lower
//! (bench/FIGURES.md). Pieces of `PIECE` bytes stay well under the bound;
//! jute reads a listing in place across them.

use bytes::{Bytes, BytesMut};

/// A frame longer than this is gathered in pieces of this size.
pub(super) const PIECE: usize = 32 * 1024;

/// The pieces of one frame, as they arrive.
#[derive(Debug)]
pub(super) struct LongFrame {
    /// Bytes of the frame still to come.
    left: usize,
    pieces: Vec<Bytes>,
    /// The piece being filled: its room is exactly what it will hold.
    filling: BytesMut,
}

impl LongFrame {
    /// A frame whose body is `len` bytes long.
    pub(super) fn new(len: usize) -> Self {
        LongFrame {
            left: len,
            pieces: Vec::with_capacity(len.div_ceil(PIECE)),
            filling: BytesMut::new(),
        }
    }

    /// Takes from the front of `bytes` what the frame still lacks; returns
    /// how many bytes it took.
    pub(super) fn feed(&mut self, bytes: &[u8]) -> usize {
        let took = self.left.min(bytes.len());
        let mut rest = &bytes[..took];
        self.left -= took;
        while !rest.is_empty() {
            if self.filling.len() == self.filling.capacity() {
                let full = std::mem::take(&mut self.filling);
                if !full.is_empty() {
                    self.pieces.push(full.freeze());
                }
                self.filling = BytesMut::with_capacity(PIECE.min(rest.len() + self.left));
            }
            let n = (self.filling.capacity() - self.filling.len()).min(rest.len());
            self.filling.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
        }
        took
    }

    pub(super) fn is_complete(&self) -> bool {
        self.left == 0
    }

    /// The frame's body, in order.
    pub(super) fn into_pieces(mut self) -> Vec<Bytes> {
        if !self.filling.is_empty() {
            self.pieces.push(self.filling.freeze());
        }
        self.pieces
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_fed_in_any_cuts_make_bounded_pieces_of_the_frame() {
        let body: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        for cut in [1, 7, 16 * 1024, PIECE, PIECE + 3, 100_000] {
            let mut frame = LongFrame::new(body.len());
            let mut at = 0;
            while !frame.is_complete() {
                let end = (at + cut).min(body.len());
                assert_eq!(frame.feed(&body[at..end]), end - at);
                at = end;
            }
            // What follows the frame is not taken.
            assert_eq!(frame.feed(b"next"), 0);
            let pieces = frame.into_pieces();
            assert!(pieces.iter().all(|p| p.len() <= PIECE && !p.is_empty()));
            assert_eq!(pieces.len(), body.len().div_ceil(PIECE), "cut {cut}");
            assert_eq!(pieces.concat(), body, "cut {cut}");
        }
    }

    #[test]
    fn a_frame_takes_only_its_own_bytes() {
        let mut frame = LongFrame::new(5);
        assert_eq!(frame.feed(b"abc"), 3);
        assert!(!frame.is_complete());
        assert_eq!(frame.feed(b"defgh"), 2);
        assert!(frame.is_complete());
        assert_eq!(frame.into_pieces().concat(), b"abcde");
    }
}
