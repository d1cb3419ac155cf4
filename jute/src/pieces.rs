//! A cursor over a record that arrived in pieces: a long reply gathered in
//! buffers of bounded size, so that no single buffer is as long as the reply
//! (an allocator hands a long buffer its own mapping, and after freeing one
//! keeps later frees of that size resident: a session that lists a queue of
//! thousands would pin its peak in every thread's heap).

use bytes::Bytes;

use crate::DecodeError;

/// Bytes from a run of pieces laid end to end, each piece read in place.
#[derive(Debug, Clone)]
pub(crate) struct PieceReader<'a> {
    pieces: &'a [Bytes],
    /// The piece being read and the position in it.
    piece: usize,
    pos: usize,
    /// Where the current piece starts when the pieces are laid end to end.
    base: usize,
    remaining: usize,
}

/// Bytes a reader took: a slice of one piece when they lie in one,
/// otherwise a copy.
pub(crate) enum Taken<'a> {
    /// In piece `piece`, which starts `piece_start` bytes into the run;
    /// the bytes start `at` bytes into it.
    Within {
        piece: usize,
        piece_start: usize,
        at: usize,
        bytes: &'a [u8],
    },
    /// Spread over pieces: copied out together.
    Copied(Vec<u8>),
}

impl<'a> PieceReader<'a> {
    pub(crate) fn new(pieces: &'a [Bytes]) -> Self {
        let remaining = pieces.iter().map(Bytes::len).sum();
        let mut r = PieceReader {
            pieces,
            piece: 0,
            pos: 0,
            base: 0,
            remaining,
        };
        r.skip_spent();
        r
    }

    /// The piece `i` of the run.
    pub(crate) fn piece(&self, i: usize) -> Option<&'a Bytes> {
        self.pieces.get(i)
    }

    pub(crate) fn remaining(&self) -> usize {
        self.remaining
    }

    /// Where the next byte lies when the pieces are laid end to end.
    pub(crate) fn offset(&self) -> usize {
        self.base + self.pos
    }

    /// Moves past pieces with nothing left to read.
    fn skip_spent(&mut self) {
        while let Some(p) = self.pieces.get(self.piece) {
            if self.pos < p.len() {
                break;
            }
            self.base += p.len();
            self.piece += 1;
            self.pos = 0;
        }
    }

    fn eof(&self, needed: usize) -> DecodeError {
        DecodeError::UnexpectedEof {
            needed,
            remaining: self.remaining,
        }
    }

    /// Fills `out`, across pieces if need be, or fails without moving.
    pub(crate) fn copy_into(&mut self, out: &mut [u8]) -> Result<(), DecodeError> {
        if out.len() > self.remaining {
            return Err(self.eof(out.len()));
        }
        let mut filled = 0;
        while filled < out.len() {
            // Never short: `remaining` counted every piece's bytes.
            let Some(p) = self.pieces.get(self.piece) else {
                return Err(self.eof(out.len()));
            };
            let n = (p.len() - self.pos).min(out.len() - filled);
            out[filled..filled + n].copy_from_slice(&p[self.pos..self.pos + n]);
            filled += n;
            self.pos += n;
            self.remaining -= n;
            self.skip_spent();
        }
        Ok(())
    }

    pub(crate) fn read_i32(&mut self) -> Result<i32, DecodeError> {
        let mut b = [0u8; 4];
        self.copy_into(&mut b)?;
        Ok(i32::from_be_bytes(b))
    }

    /// Takes exactly `n` bytes, or fails without moving.
    pub(crate) fn take(&mut self, n: usize) -> Result<Taken<'a>, DecodeError> {
        if n > self.remaining {
            return Err(self.eof(n));
        }
        let pieces = self.pieces;
        if let Some(p) = pieces.get(self.piece) {
            if p.len() - self.pos >= n {
                let taken = Taken::Within {
                    piece: self.piece,
                    piece_start: self.base,
                    at: self.offset(),
                    bytes: &p[self.pos..self.pos + n],
                };
                self.pos += n;
                self.remaining -= n;
                self.skip_spent();
                return Ok(taken);
            }
        }
        let mut out = vec![0; n];
        self.copy_into(&mut out)?;
        Ok(Taken::Copied(out))
    }

    pub(crate) fn finish(&self) -> Result<(), DecodeError> {
        match self.remaining {
            0 => Ok(()),
            n => Err(DecodeError::TrailingBytes(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pieces: &[&[u8]]) -> Vec<Bytes> {
        pieces.iter().map(|p| Bytes::copy_from_slice(p)).collect()
    }

    #[test]
    fn reads_across_pieces_and_skips_empty_ones() {
        let pieces = run(&[b"", b"\x00\x00", b"", b"\x00\x05ab", b"cde"]);
        let mut r = PieceReader::new(&pieces);
        assert_eq!(r.remaining(), 9);
        assert_eq!(r.read_i32(), Ok(5));
        assert_eq!(r.offset(), 4);
        match r.take(2) {
            Ok(Taken::Within {
                piece,
                piece_start,
                at,
                bytes,
            }) => {
                assert_eq!((piece, piece_start, at, bytes), (3, 2, 4, &b"ab"[..]));
            }
            _ => panic!("two bytes in one piece are read in place"),
        }
        match r.take(1) {
            Ok(Taken::Within {
                piece: 4, at: 6, ..
            }) => {}
            _ => panic!("a piece boundary is skipped before the next take"),
        }
        assert!(matches!(
            r.take(3),
            Err(DecodeError::UnexpectedEof {
                needed: 3,
                remaining: 2
            })
        ));
        match r.take(2) {
            Ok(Taken::Within { bytes, .. }) => assert_eq!(bytes, b"de"),
            _ => panic!("the last bytes lie in the last piece"),
        }
        assert_eq!(r.finish(), Ok(()));
        assert!(r.read_i32().is_err());
    }

    #[test]
    fn a_take_over_a_boundary_is_copied() {
        let pieces = run(&[b"abc", b"def"]);
        let mut r = PieceReader::new(&pieces);
        assert!(matches!(r.take(1), Ok(Taken::Within { .. })));
        match r.take(4) {
            Ok(Taken::Copied(v)) => assert_eq!(v, b"bcde"),
            _ => panic!("bytes over two pieces are copied"),
        }
        assert_eq!(r.finish(), Err(DecodeError::TrailingBytes(1)));
    }
}
