//! A list of names (child names, node paths) kept in one buffer.

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

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
    /// Where each name starts and ends in `buf` (a frame is far below 4 GiB).
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
        let bytes = self.buf.get(start as usize..end as usize)?;
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
    /// without, they are copied once, all together.
    pub fn decode(r: &mut Reader<'_>, shared: Option<&Bytes>) -> Result<Names, DecodeError> {
        let count = r.read_i32()?;
        if count == -1 {
            return Ok(Names::new());
        }
        if count < -1 {
            return Err(DecodeError::InvalidLength(count));
        }
        let count = count as usize;
        // Each name takes at least its 4-byte length: refuse a count the
        // bytes left cannot hold before reserving anything.
        let needed = count.saturating_mul(4);
        if needed > r.remaining() {
            return Err(DecodeError::UnexpectedEof {
                needed,
                remaining: r.remaining(),
            });
        }
        let region = r.rest();
        let mut spans = Vec::with_capacity(count);
        for _ in 0..count {
            let len = r.read_i32()?;
            let len = usize::try_from(len).map_err(|_| DecodeError::InvalidLength(len))?;
            let start = region.len() - r.remaining();
            let bytes = r.take(len)?;
            std::str::from_utf8(bytes).map_err(|_| DecodeError::InvalidUtf8)?;
            spans.push((offset(start), offset(start + len)));
        }
        let used = &region[..region.len() - r.remaining()];
        let buf = match shared {
            Some(frame) if within(frame, used) => frame.slice_ref(used),
            _ => Bytes::copy_from_slice(used),
        };
        Ok(Names { buf, spans })
    }

    /// Encodes as a vector of strings.
    pub fn encode(&self, buf: &mut BytesMut) {
        write_i32(buf, i32::try_from(self.len()).unwrap_or(i32::MAX));
        for name in self {
            write_string(buf, name);
        }
    }
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
        assert!(within(&frame, &shared.buf));
        let mut r = Reader::new(&frame);
        assert_eq!(Names::decode(&mut r, None).unwrap(), names);
        // A count far beyond the bytes: refused before any allocation.
        let mut r = Reader::new(&[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1]);
        assert!(Names::decode(&mut r, None).is_err());
        // Null is empty.
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xff]);
        assert!(Names::decode(&mut r, None).unwrap().is_empty());
        // A negative name length is an error, not a null name.
        let mut r = Reader::new(&[0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff]);
        assert!(Names::decode(&mut r, None).is_err());
        // Bytes that are not UTF-8 are refused.
        let mut r = Reader::new(&[0, 0, 0, 1, 0, 0, 0, 1, 0xff]);
        assert!(Names::decode(&mut r, None).is_err());
    }
}
