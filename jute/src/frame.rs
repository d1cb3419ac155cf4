//! Length framing: every message is a 4-byte big-endian length, then the body.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::DecodeError;

/// The server's default `jute.maxbuffer`: the largest body it accepts or sends.
pub const DEFAULT_MAX_FRAME: usize = 0xfffff;

/// Splits one whole frame's body off the front of `buf`.
/// `Ok(None)` means "need more bytes"; `buf` is then left untouched.
pub fn split_frame(buf: &mut BytesMut, max: usize) -> Result<Option<Bytes>, DecodeError> {
    match frame_len(buf, max)? {
        Some(len) if buf.len() >= 4 + len => {
            buf.advance(4);
            Ok(Some(buf.split_to(len).freeze()))
        }
        _ => Ok(None),
    }
}

/// The body length announced at the front of `buf`, once its 4 bytes are there.
/// A negative length, or one above `max`, is an error: the stream cannot be trusted.
pub fn frame_len(buf: &[u8], max: usize) -> Result<Option<usize>, DecodeError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if len < 0 {
        return Err(DecodeError::NegativeFrameLength(len));
    }
    let len = len as usize;
    if len > max {
        return Err(DecodeError::FrameTooLarge { len, max });
    }
    Ok(Some(len))
}

/// Appends one frame to `buf`: a placeholder length, the body `write` produces,
/// then the real length patched in. Returns the body length.
pub fn encode_frame(buf: &mut BytesMut, write: impl FnOnce(&mut BytesMut)) -> usize {
    let start = buf.len();
    buf.put_i32(0);
    write(buf);
    let len = buf.len() - start - 4;
    let wire = i32::try_from(len).unwrap_or(i32::MAX).to_be_bytes();
    buf[start..start + 4].copy_from_slice(&wire);
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_frames_wait_for_more() {
        let mut buf = BytesMut::from(&[0u8, 0, 0][..]);
        assert_eq!(split_frame(&mut buf, 100), Ok(None));
        buf.extend_from_slice(&[3, 1, 2]);
        assert_eq!(split_frame(&mut buf, 100), Ok(None));
        assert_eq!(buf.len(), 6);
        buf.extend_from_slice(&[3, 9]);
        assert_eq!(
            split_frame(&mut buf, 100).unwrap().unwrap().as_ref(),
            &[1, 2, 3]
        );
        assert_eq!(buf.as_ref(), &[9]);
    }

    #[test]
    fn bad_lengths_are_errors() {
        let mut neg = BytesMut::from(&[0xffu8, 0xff, 0xff, 0xfe][..]);
        assert_eq!(
            split_frame(&mut neg, 100),
            Err(DecodeError::NegativeFrameLength(-2))
        );
        let mut big = BytesMut::from(&[0u8, 0, 1, 0][..]);
        assert_eq!(
            split_frame(&mut big, 100),
            Err(DecodeError::FrameTooLarge { len: 256, max: 100 })
        );
    }

    /// The bounds are the length's own: a header of exactly four bytes is
    /// read (a frame of no body is whole), and a body of exactly `max`
    /// bytes is accepted, one more refused. Kills `<` made `<=` and `>`
    /// made `>=` in `frame_len`.
    #[test]
    fn the_bounds_are_exact() {
        assert_eq!(frame_len(&[0, 0, 0, 0], 100), Ok(Some(0)));
        let mut empty = BytesMut::from(&[0u8, 0, 0, 0][..]);
        assert_eq!(split_frame(&mut empty, 100).unwrap().unwrap().len(), 0);
        assert!(empty.is_empty());
        assert_eq!(frame_len(&[0, 0, 0, 100], 100), Ok(Some(100)));
        assert_eq!(
            frame_len(&[0, 0, 0, 101], 100),
            Err(DecodeError::FrameTooLarge { len: 101, max: 100 })
        );
    }

    /// A frame appended after others gets its own body's length, not the
    /// buffer's. Kills `-` made `+` in `encode_frame` (invisible when the
    /// buffer starts empty).
    #[test]
    fn a_frame_after_others_gets_its_own_length() {
        let mut buf = BytesMut::from(&b"xyzw"[..]);
        let n = encode_frame(&mut buf, |b| b.put_slice(b"ab"));
        assert_eq!(n, 2);
        assert_eq!(buf.as_ref(), b"xyzw\0\0\0\x02ab");
    }

    #[test]
    fn encode_patches_the_length() {
        let mut buf = BytesMut::new();
        let n = encode_frame(&mut buf, |b| b.put_slice(b"abc"));
        assert_eq!(n, 3);
        assert_eq!(buf.as_ref(), &[0, 0, 0, 3, b'a', b'b', b'c']);
    }
}
