//! A list of names (child names, node paths) kept in one buffer.

use std::fmt;

use bytes::BytesMut;

use crate::primitives::{write_i32, write_string, Reader};
use crate::DecodeError;

/// Names as a reply lists them, all in one string: a listing of thousands
/// of children costs two allocations, not one per name. Order is kept.
///
/// ```
/// use zklock_jute::Names;
/// let names: Names = ["a", "b"].into_iter().collect();
/// assert_eq!(names.iter().collect::<Vec<_>>(), ["a", "b"]);
/// assert_eq!(names.to_vec(), vec!["a".to_string(), "b".to_string()]);
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Names {
    text: String,
    /// Where each name ends in `text` (a frame is far below 4 GiB).
    ends: Vec<u32>,
}

impl Names {
    /// No names.
    pub fn new() -> Self {
        Names::default()
    }

    /// Appends a name.
    pub fn push(&mut self, name: &str) {
        self.text.push_str(name);
        self.ends
            .push(u32::try_from(self.text.len()).unwrap_or(u32::MAX));
    }

    /// How many names.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The `i`th name.
    pub fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)? as usize;
        let start = match i {
            0 => 0,
            _ => self.ends[i - 1] as usize,
        };
        self.text.get(start..end)
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

    /// Decodes a vector of strings; null reads as empty. Each name is
    /// checked as UTF-8 where it lies in the frame.
    pub fn decode(r: &mut Reader<'_>) -> Result<Names, DecodeError> {
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
        let mut names = Names {
            text: String::with_capacity(r.remaining() - needed),
            ends: Vec::with_capacity(count),
        };
        for _ in 0..count {
            let len = r.read_i32()?;
            let len = usize::try_from(len).map_err(|_| DecodeError::InvalidLength(len))?;
            let bytes = r.take(len)?;
            let name = std::str::from_utf8(bytes).map_err(|_| DecodeError::InvalidUtf8)?;
            names.push(name);
        }
        Ok(names)
    }

    /// Encodes as a vector of strings.
    pub fn encode(&self, buf: &mut BytesMut) {
        write_i32(buf, i32::try_from(self.len()).unwrap_or(i32::MAX));
        for name in self {
            write_string(buf, name);
        }
    }
}

impl fmt::Debug for Names {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl From<Vec<String>> for Names {
    fn from(names: Vec<String>) -> Self {
        names.into_iter().collect()
    }
}

impl<'a> FromIterator<&'a str> for Names {
    fn from_iter<I: IntoIterator<Item = &'a str>>(iter: I) -> Self {
        let mut names = Names::new();
        for name in iter {
            names.push(name);
        }
        names
    }
}

impl FromIterator<String> for Names {
    fn from_iter<I: IntoIterator<Item = String>>(iter: I) -> Self {
        let mut names = Names::new();
        for name in iter {
            names.push(&name);
        }
        names
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
    fn round_trips_and_refuses_short_input() {
        let names: Names = ["x", "", "żółw"].into_iter().collect();
        let mut buf = BytesMut::new();
        names.encode(&mut buf);
        let mut r = Reader::new(&buf);
        assert_eq!(Names::decode(&mut r).unwrap(), names);
        assert_eq!(r.remaining(), 0);
        // A count far beyond the bytes: refused before any allocation.
        let mut r = Reader::new(&[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1]);
        assert!(Names::decode(&mut r).is_err());
        // Null is empty.
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xff]);
        assert!(Names::decode(&mut r).unwrap().is_empty());
        // A negative name length is an error, not a null name.
        let mut r = Reader::new(&[0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff]);
        assert!(Names::decode(&mut r).is_err());
    }
}
