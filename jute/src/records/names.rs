//! A list of names (child names, node paths) kept in one buffer.

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

use crate::pieces::{PieceReader, Taken};
use crate::primitives::{write_i32, write_string, Reader};
use crate::DecodeError;

/// Names as a reply lists them, in one buffer: a listing of thousands of
/// children costs one small allocation for their places, and none for the
/// names when decoded from a shared frame ([`decode_reply_in`]), where they
/// stay. Order is kept.
///
/// [`decode_reply_in`]: crate::decode_reply_in
///
/// ```
/// use zklock_jute::Names;
/// let names: Names = ["a", "b"].into_iter().collect();
/// assert_eq!(names.iter().collect::<Vec<_>>(), ["a", "b"]);
/// assert_eq!(names.to_vec(), vec!["a".to_string(), "b".to_string()]);
/// ```
#[derive(Clone, Default)]
pub struct Names {
    /// The bytes the names lie in (UTF-8 checked when decoded or built).
    buf: Bytes,
    /// Further buffers, for a listing decoded from a reply in pieces: each
    /// with the offset its first byte has when all are laid end to end
    /// after `buf`, in increasing order. Empty otherwise.
    more: Vec<(u32, Bytes)>,
    /// Where each name starts and ends in the buffers laid end to end (a
    /// frame is far below 4 GiB). No name crosses from one buffer to the next.
    spans: Vec<(u32, u32)>,
}

impl Names {
    /// No names.
    pub fn new() -> Self {
        Names::default()
    }

    /// How many names.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The `i`th name.
    pub fn get(&self, i: usize) -> Option<&str> {
        let (start, end) = *self.spans.get(i)?;
        if start == end {
            // An empty name lies in no buffer: a listing's last name, when
            // empty, would otherwise point past every piece.
            return Some("");
        }
        let (base, buf) = if self.more.is_empty() {
            (0, &self.buf)
        } else {
            let at = self.more.partition_point(|(base, _)| *base <= start);
            let (base, buf) = self.more.get(at.checked_sub(1)?)?;
            (*base, buf)
        };
        let bytes = buf.get((start - base) as usize..(end - base) as usize)?;
        std::str::from_utf8(bytes).ok()
    }

    /// The names in order.
    pub fn iter(&self) -> NamesIter<'_> {
        NamesIter {
            names: self,
            next: 0,
        }
    }

    /// The names as owned strings.
    pub fn to_vec(&self) -> Vec<String> {
        self.iter().map(str::to_owned).collect()
    }

    /// Decodes a vector of strings; null reads as empty. With `shared`,
    /// the buffer the reader's bytes lie in, the names stay there;
    /// without, the bytes left are copied once, all together.
    pub fn decode(r: &mut Reader<'_>, shared: Option<&Bytes>) -> Result<Names, DecodeError> {
        let rest = r.rest();
        let piece = match shared {
            Some(frame) if within(frame, rest) => frame.slice_ref(rest),
            _ => Bytes::copy_from_slice(rest),
        };
        let pieces = [piece];
        let mut in_piece = PieceReader::new(&pieces);
        let names = Names::decode_pieces(&mut in_piece)?;
        r.take(rest.len() - in_piece.remaining())?;
        Ok(names)
    }

    /// [`Names::decode`] from a reply in pieces: names lying in one piece
    /// stay there; the few that cross from one piece to the next are
    /// copied, together.
    pub(crate) fn decode_pieces(r: &mut PieceReader<'_>) -> Result<Names, DecodeError> {
        let Some(count) = checked_count(r.read_i32()?, r.remaining())? else {
            return Ok(Names::new());
        };
        // Copies are laid after every piece.
        let copies_base = r.offset() + r.remaining();
        let mut copies = BytesMut::new();
        let mut more: Vec<(u32, Bytes)> = Vec::new();
        let mut last_piece = None;
        let mut spans = Vec::with_capacity(count);
        for _ in 0..count {
            let len = r.read_i32()?;
            let len = usize::try_from(len).map_err(|_| DecodeError::InvalidLength(len))?;
            if len == 0 {
                // Valid Jute, though ZooKeeper never lists one: kept, so
                // that the listing encodes back to the bytes it came from.
                spans.push((0, 0));
                continue;
            }
            let start = match r.take(len)? {
                Taken::Within {
                    piece,
                    piece_start,
                    at,
                    bytes,
                } => {
                    std::str::from_utf8(bytes).map_err(|_| DecodeError::InvalidUtf8)?;
                    if last_piece != Some(piece) {
                        let Some(buf) = r.piece(piece) else {
                            return Err(DecodeError::UnexpectedEof {
                                needed: len,
                                remaining: 0,
                            });
                        };
                        more.push((offset(piece_start), buf.clone()));
                        last_piece = Some(piece);
                    }
                    at
                }
                Taken::Copied(bytes) => {
                    std::str::from_utf8(&bytes).map_err(|_| DecodeError::InvalidUtf8)?;
                    let at = copies_base + copies.len();
                    copies.put_slice(&bytes);
                    at
                }
            };
            spans.push((offset(start), offset(start + len)));
        }
        if !copies.is_empty() {
            more.push((offset(copies_base), copies.freeze()));
        }
        Ok(Names {
            buf: Bytes::new(),
            more,
            spans,
        })
    }

    /// Encodes as a vector of strings.
    pub fn encode(&self, buf: &mut BytesMut) {
        write_i32(buf, i32::try_from(self.len()).unwrap_or(i32::MAX));
        for name in self {
            write_string(buf, name);
        }
    }
}

/// A vector's count, checked: `None` for null, an error below -1 or for a
/// count the bytes left cannot hold (each name takes at least its 4-byte
/// length), before anything is reserved for it.
fn checked_count(count: i32, remaining: usize) -> Result<Option<usize>, DecodeError> {
    if count == -1 {
        return Ok(None);
    }
    if count < -1 {
        return Err(DecodeError::InvalidLength(count));
    }
    let count = count as usize;
    let needed = count.saturating_mul(4);
    if needed > remaining {
        return Err(DecodeError::UnexpectedEof { needed, remaining });
    }
    Ok(Some(count))
}

fn offset(at: usize) -> u32 {
    u32::try_from(at).unwrap_or(u32::MAX)
}

/// Whether `part` lies inside `whole`'s bytes (`Bytes::slice_ref` panics
/// otherwise).
fn within(whole: &Bytes, part: &[u8]) -> bool {
    let (w, p) = (whole.as_ptr() as usize, part.as_ptr() as usize);
    p >= w && p + part.len() <= w + whole.len()
}

impl PartialEq for Names {
    fn eq(&self, other: &Names) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Names {}

impl fmt::Debug for Names {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl From<Vec<String>> for Names {
    fn from(names: Vec<String>) -> Self {
        names.iter().map(String::as_str).collect()
    }
}

impl<'a> FromIterator<&'a str> for Names {
    fn from_iter<I: IntoIterator<Item = &'a str>>(iter: I) -> Self {
        let mut buf = BytesMut::new();
        let mut spans = Vec::new();
        for name in iter {
            let start = buf.len();
            buf.put_slice(name.as_bytes());
            spans.push((offset(start), offset(buf.len())));
        }
        Names {
            buf: buf.freeze(),
            more: Vec::new(),
            spans,
        }
    }
}

impl FromIterator<String> for Names {
    fn from_iter<I: IntoIterator<Item = String>>(iter: I) -> Self {
        let names: Vec<String> = iter.into_iter().collect();
        names.into()
    }
}

impl<'a> IntoIterator for &'a Names {
    type Item = &'a str;
    type IntoIter = NamesIter<'a>;

    fn into_iter(self) -> NamesIter<'a> {
        self.iter()
    }
}

/// The names of a [`Names`], in order.
#[derive(Debug, Clone)]
pub struct NamesIter<'a> {
    names: &'a Names,
    next: usize,
}

impl<'a> Iterator for NamesIter<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let name = self.names.get(self.next)?;
        self.next += 1;
        Some(name)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.names.len() - self.next;
        (left, Some(left))
    }
}

impl ExactSizeIterator for NamesIter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(names: &[&str]) -> Bytes {
        let names: Names = names.iter().copied().collect();
        let mut buf = BytesMut::new();
        names.encode(&mut buf);
        buf.freeze()
    }

    /// A caller's `shared` buffer that does not hold the reader's bytes is
    /// no reason to panic: the names are copied instead. Kills: `within`
    /// made `true`, its `&&` made `||`, its `+` made `-` or `*`.
    #[test]
    fn a_shared_buffer_without_the_bytes_is_not_sliced_but_copied() {
        let frame = encoded(&["a", "bc"]);
        let elsewhere = Bytes::from(frame.to_vec());
        let around = Bytes::from(vec![0u8; 64]);
        for shared in [&elsewhere, &around] {
            let names = Names::decode(&mut Reader::new(&frame), Some(shared)).unwrap();
            assert_eq!(names.to_vec(), ["a", "bc"]);
        }
        // The bytes' own frame, and a part of it that stops one short.
        let names = Names::decode(&mut Reader::new(&frame), Some(&frame)).unwrap();
        assert_eq!(names.to_vec(), ["a", "bc"]);
        let short = frame.slice(..frame.len() - 1);
        let names = Names::decode(&mut Reader::new(&frame), Some(&short)).unwrap();
        assert_eq!(names.to_vec(), ["a", "bc"]);
    }

    /// Kills: `NamesIter::size_hint`'s `-` made `+`.
    #[test]
    fn the_iterator_knows_how_many_names_are_left() {
        let names: Names = ["a", "b", "c"].into_iter().collect();
        let mut it = names.iter();
        assert_eq!(it.len(), 3);
        assert_eq!(it.next(), Some("a"));
        assert_eq!(it.len(), 2);
        assert_eq!(it.collect::<Vec<_>>(), ["b", "c"]);
        assert_eq!(names.get(2), Some("c"));
        assert_eq!(names.get(3), None);
    }

    /// Kills: `Names::eq` made `true` or its `&&` made `||`; the `From` and
    /// `FromIterator<String>` conversions made empty.
    #[test]
    fn listings_are_equal_only_name_for_name() {
        let ab: Names = ["a", "b"].into_iter().collect();
        assert_eq!(ab, ["a", "b"].into_iter().collect::<Names>());
        assert_ne!(ab, ["a", "c"].into_iter().collect::<Names>());
        assert_ne!(ab, ["a"].into_iter().collect::<Names>());
        assert_ne!(ab, ["a", "b", "c"].into_iter().collect::<Names>());
        // Owned strings build the same listing.
        let owned = vec!["a".to_owned(), "b".to_owned()];
        assert_eq!(Names::from(owned.clone()), ab);
        assert_eq!(owned.into_iter().collect::<Names>(), ab);
    }

    /// A listing whose reply arrived in pieces, after the reply's header:
    /// a name that crosses a piece boundary is copied beside the pieces and
    /// read back whole.
    #[test]
    fn a_name_across_pieces_after_a_header_is_read_whole() {
        let listing = encoded(&["first", "crossing", "last"]);
        let mut frame = BytesMut::from(&[7u8; 16][..]);
        frame.extend_from_slice(&listing);
        let frame = frame.freeze();
        // Cut inside "crossing": 16 header bytes, the count, "first" with
        // its length, the length of "crossing" and three of its bytes.
        let cut = 16 + 4 + 4 + 5 + 4 + 3;
        let pieces = [frame.slice(..cut), frame.slice(cut..)];
        let mut r = PieceReader::new(&pieces);
        r.take(16).unwrap();
        let names = Names::decode_pieces(&mut r).unwrap();
        assert_eq!(names.to_vec(), ["first", "crossing", "last"]);
        assert_eq!(r.finish(), Ok(()));
    }

    /// Kills: `Names::is_empty` made `true`.
    #[test]
    fn an_empty_listing_has_no_names_and_one_name_is_not_empty() {
        let none: Names = std::iter::empty::<&str>().collect();
        let one: Names = [""].into_iter().collect();
        for (names, empty) in [(none, true), (one, false)] {
            let mut buf = BytesMut::new();
            names.encode(&mut buf);
            let decoded = Names::decode(&mut Reader::new(&buf.freeze()), None).unwrap();
            assert_eq!(
                (decoded.is_empty(), decoded.len()),
                (empty, usize::from(!empty))
            );
        }
    }

    #[test]
    fn a_listing_ending_in_an_empty_name_keeps_it() {
        for names in [vec![""], vec!["a", ""], vec!["", ""]] {
            let names: Names = names.into_iter().collect();
            let mut buf = BytesMut::new();
            names.encode(&mut buf);
            let frame = buf.freeze();
            for shared in [Some(&frame), None] {
                let decoded = Names::decode(&mut Reader::new(&frame), shared).unwrap();
                assert_eq!(decoded.len(), names.len());
                assert_eq!(decoded.to_vec(), names.to_vec());
            }
        }
    }

    #[test]
    fn round_trips_shared_or_copied_and_refuses_short_input() {
        let names: Names = ["x", "", "żółw"].into_iter().collect();
        let mut buf = BytesMut::new();
        names.encode(&mut buf);
        let frame = buf.freeze();
        let mut r = Reader::new(&frame);
        let shared = Names::decode(&mut r, Some(&frame)).unwrap();
        assert_eq!(shared, names);
        assert_eq!(r.remaining(), 0);
        // The names stay in the frame: no copy of them.
        assert!(shared.more.iter().all(|(_, b)| within(&frame, b)));
        let mut r = Reader::new(&frame);
        assert_eq!(Names::decode(&mut r, None).unwrap(), names);
        // A count far beyond the bytes: refused before any allocation.
        let mut r = Reader::new(&[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1]);
        assert!(Names::decode(&mut r, None).is_err());
        // Null is empty.
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xff]);
        assert!(Names::decode(&mut r, None).unwrap().is_empty());
        // A count below -1 is an invalid length, not a short read.
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xfe]);
        assert_eq!(
            Names::decode(&mut r, None),
            Err(DecodeError::InvalidLength(-2))
        );
        // A negative name length is an error, not a null name.
        let mut r = Reader::new(&[0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff]);
        assert!(Names::decode(&mut r, None).is_err());
        // Bytes that are not UTF-8 are refused.
        let mut r = Reader::new(&[0, 0, 0, 1, 0, 0, 0, 1, 0xff]);
        assert!(Names::decode(&mut r, None).is_err());
    }

    #[test]
    fn names_in_one_piece_stay_there_and_names_across_pieces_are_copied() {
        let names: Names = ["alpha", "be", "", "gamma-delta", "z"]
            .into_iter()
            .collect();
        let mut buf = BytesMut::new();
        names.encode(&mut buf);
        let body = buf.freeze();
        // count | 5 "alpha" | 2 "be" | 0 | 11 "gamma-delta" | 1 "z"
        for cuts in [
            vec![],
            vec![6],
            vec![4, 13, 20],
            vec![1, 2, 3, 30, 31],
            vec![10, 28],
        ] {
            let mut pieces = Vec::new();
            let mut from = 0;
            for cut in cuts.iter().copied().chain([body.len()]) {
                pieces.push(body.slice(from..cut));
                from = cut;
            }
            let mut r = PieceReader::new(&pieces);
            let decoded = Names::decode_pieces(&mut r).unwrap();
            assert_eq!(decoded, names, "cut at {cuts:?}");
            assert_eq!(r.remaining(), 0);
            // An empty name lies in no buffer.
            for (i, name) in decoded.iter().enumerate().filter(|(_, n)| !n.is_empty()) {
                let in_a_piece = pieces.iter().any(|p| within(p, name.as_bytes()));
                let crosses = decoded
                    .more
                    .last()
                    .is_some_and(|(_, b)| within(b, name.as_bytes()));
                assert!(
                    in_a_piece || crosses,
                    "name {i} of {cuts:?} is neither in place nor among the copies"
                );
            }
        }
        // "gamma-delta" (bytes 27..38) cut in two: it alone is copied.
        let pieces = [body.slice(..30), body.slice(30..)];
        let decoded = Names::decode_pieces(&mut PieceReader::new(&pieces)).unwrap();
        assert_eq!(decoded.more.len(), 3);
        assert_eq!(&decoded.more[2].1[..], b"gamma-delta");
        assert_eq!(decoded.get(3), Some("gamma-delta"));
        assert_eq!(decoded.get(4), Some("z"));
        assert_eq!(decoded.get(5), None);
        // Cut inside "alpha" (8..13) and inside "gamma-delta": both copied,
        // one after the other.
        let pieces = [body.slice(..10), body.slice(10..28), body.slice(28..)];
        let decoded = Names::decode_pieces(&mut PieceReader::new(&pieces)).unwrap();
        assert_eq!(decoded, names);
        let copies = &decoded.more.last().unwrap().1;
        assert_eq!(&copies[..], b"alphagamma-delta");
        // The checks of the whole-buffer decoder hold in pieces too.
        let bad: [&[u8]; 3] = [
            &[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1],
            &[0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff],
            &[0, 0, 0, 1, 0, 0, 0, 1, 0xff],
        ];
        for bytes in bad {
            let pieces: Vec<Bytes> = bytes.chunks(3).map(Bytes::copy_from_slice).collect();
            assert!(Names::decode_pieces(&mut PieceReader::new(&pieces)).is_err());
        }
        let null = [
            Bytes::from_static(&[0xff, 0xff]),
            Bytes::from_static(&[0xff, 0xff]),
        ];
        assert!(Names::decode_pieces(&mut PieceReader::new(&null))
            .unwrap()
            .is_empty());
    }
}
