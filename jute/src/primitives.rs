//! Jute's primitive types: big-endian int and long, one-byte boolean,
//! length-prefixed buffers, strings and vectors where length -1 means null.

use bytes::{BufMut, BytesMut};

use crate::DecodeError;

/// A cursor over one record's bytes. It never reads past the end and never
/// allocates from a length it has not checked against the bytes remaining.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Reads `buf` from the start.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The bytes not yet read, without moving.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// Takes exactly `n` bytes, or fails without moving.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(DecodeError::UnexpectedEof {
                needed: n,
                remaining: self.remaining(),
            });
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// Fails unless every byte was consumed: a record must end where its frame does.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(DecodeError::TrailingBytes(n)),
        }
    }

    /// Takes exactly `N` bytes as an array, or fails without moving.
    fn take_array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// A 4-byte big-endian int.
    pub fn read_i32(&mut self) -> Result<i32, DecodeError> {
        self.take_array().map(i32::from_be_bytes)
    }

    /// An 8-byte big-endian long.
    pub fn read_i64(&mut self) -> Result<i64, DecodeError> {
        self.take_array().map(i64::from_be_bytes)
    }

    /// One byte that must be 0 or 1.
    pub fn read_bool(&mut self) -> Result<bool, DecodeError> {
        match self.take(1)?[0] {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(DecodeError::InvalidBool(b)),
        }
    }

    /// A flag that peers older than ZooKeeper 3.4 leave off the end of a
    /// record (the connect handshake's read-only flag): absent is `false`.
    pub fn read_trailing_bool(&mut self) -> Result<bool, DecodeError> {
        if self.remaining() == 0 {
            return Ok(false);
        }
        self.read_bool()
    }

    /// A length prefix: `None` for null (-1), an error below -1 or past the end.
    /// `unit` is the least number of bytes one element occupies.
    fn read_len(&mut self, unit: usize) -> Result<Option<usize>, DecodeError> {
        let len = self.read_i32()?;
        if len == -1 {
            return Ok(None);
        }
        if len < -1 {
            return Err(DecodeError::InvalidLength(len));
        }
        let len = len as usize;
        let needed = len.saturating_mul(unit);
        if needed > self.remaining() {
            return Err(DecodeError::UnexpectedEof {
                needed,
                remaining: self.remaining(),
            });
        }
        Ok(Some(len))
    }

    /// A buffer; `None` when the wire says null.
    pub fn read_buffer_opt(&mut self) -> Result<Option<Vec<u8>>, DecodeError> {
        match self.read_len(1)? {
            None => Ok(None),
            Some(n) => Ok(Some(self.take(n)?.to_vec())),
        }
    }

    /// A buffer where null and empty mean the same to the caller (node data).
    pub fn read_buffer(&mut self) -> Result<Vec<u8>, DecodeError> {
        Ok(self.read_buffer_opt()?.unwrap_or_default())
    }

    /// A string; `None` when the wire says null.
    pub fn read_string_opt(&mut self) -> Result<Option<String>, DecodeError> {
        match self.read_len(1)? {
            None => Ok(None),
            Some(n) => {
                let bytes = self.take(n)?;
                std::str::from_utf8(bytes)
                    .map(|s| Some(s.to_owned()))
                    .map_err(|_| DecodeError::InvalidUtf8)
            }
        }
    }

    /// A string the record requires; null is an error naming `what`.
    pub fn read_string(&mut self, what: &'static str) -> Result<String, DecodeError> {
        self.read_string_opt()?
            .ok_or(DecodeError::UnexpectedNull(what))
    }

    /// A vector; null decodes as empty. `min_elem` is the smallest encoded
    /// element, so a huge count is refused before anything is allocated.
    pub fn read_vec<T>(
        &mut self,
        min_elem: usize,
        mut elem: impl FnMut(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Vec<T>, DecodeError> {
        match self.read_len(min_elem.max(1))? {
            None => Ok(Vec::new()),
            Some(n) => {
                let mut out = Vec::with_capacity(n);
                for _ in 0..n {
                    out.push(elem(self)?);
                }
                Ok(out)
            }
        }
    }

    /// A vector of strings (child names, watch paths); null decodes as empty.
    pub fn read_string_vec(&mut self, what: &'static str) -> Result<Vec<String>, DecodeError> {
        self.read_vec(4, |r| r.read_string(what))
    }
}

/// Writes a 4-byte big-endian int.
pub fn write_i32(buf: &mut BytesMut, v: i32) {
    buf.put_i32(v);
}

/// Writes an 8-byte big-endian long.
pub fn write_i64(buf: &mut BytesMut, v: i64) {
    buf.put_i64(v);
}

/// Writes one byte, 0 or 1.
pub fn write_bool(buf: &mut BytesMut, v: bool) {
    buf.put_u8(u8::from(v));
}

/// Lengths on the wire are i32; callers keep records far below that
/// (the frame limit), so a longer value is a caller bug we clamp rather than wrap.
fn wire_len(len: usize) -> i32 {
    i32::try_from(len).unwrap_or(i32::MAX)
}

/// Writes an i32 length, then the bytes (never null: empty is length 0).
pub fn write_buffer(buf: &mut BytesMut, v: &[u8]) {
    buf.put_i32(wire_len(v.len()));
    buf.put_slice(v);
}

/// Writes a string as a buffer of its UTF-8 bytes.
pub fn write_string(buf: &mut BytesMut, v: &str) {
    write_buffer(buf, v.as_bytes());
}

/// Writes an i32 count, then each element with `elem`.
pub fn write_vec<T>(buf: &mut BytesMut, items: &[T], mut elem: impl FnMut(&mut BytesMut, &T)) {
    buf.put_i32(wire_len(items.len()));
    for item in items {
        elem(buf, item);
    }
}

/// Writes a vector of strings (child names, watch paths).
pub fn write_string_vec(buf: &mut BytesMut, items: &[String]) {
    write_vec(buf, items, |b, s| write_string(b, s));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_is_not_empty() {
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        assert_eq!(r.read_buffer_opt().unwrap(), None);
        assert_eq!(r.read_buffer_opt().unwrap(), Some(vec![]));
        r.finish().unwrap();
    }

    #[test]
    fn huge_vector_count_is_refused_before_allocation() {
        let mut r = Reader::new(&[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1]);
        let err = r.read_string_vec("child").unwrap_err();
        assert!(matches!(err, DecodeError::UnexpectedEof { .. }), "{err:?}");
    }

    #[test]
    fn length_below_minus_one_is_an_error() {
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xfe]);
        assert_eq!(r.read_buffer_opt(), Err(DecodeError::InvalidLength(-2)));
    }

    #[test]
    fn bool_must_be_zero_or_one() {
        assert_eq!(
            Reader::new(&[2]).read_bool(),
            Err(DecodeError::InvalidBool(2))
        );
    }

    #[test]
    fn strings_must_be_utf8() {
        let mut r = Reader::new(&[0, 0, 0, 1, 0xff]);
        assert_eq!(r.read_string_opt(), Err(DecodeError::InvalidUtf8));
    }
}
