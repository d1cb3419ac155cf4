//! Why a decode failed. Every variant names the likely culprit: the peer sent
//! malformed bytes, or the caller asked to decode with the wrong op code.

use thiserror::Error;

/// A decode failure. Decoders never panic; every malformed input ends here.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The record needs more bytes than the frame holds (peer sent a short record).
    #[error("unexpected end of input: needed {needed} bytes, {remaining} remain")]
    UnexpectedEof {
        /// Bytes the next field needs.
        needed: usize,
        /// Bytes left in the record.
        remaining: usize,
    },
    /// A length prefix below -1 (peer sent garbage).
    #[error("invalid length {0}")]
    InvalidLength(i32),
    /// A frame length below zero (peer sent garbage, or the stream lost sync).
    #[error("negative frame length {0}")]
    NegativeFrameLength(i32),
    /// A frame larger than the configured limit (peer misbehaves, or the limit is too low).
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    FrameTooLarge {
        /// The body length the frame announces.
        len: usize,
        /// The limit it was checked against.
        max: usize,
    },
    /// A string that is not UTF-8.
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
    /// A boolean byte other than 0 or 1.
    #[error("invalid boolean byte {0}")]
    InvalidBool(u8),
    /// A null where the record requires a value.
    #[error("unexpected null {0}")]
    UnexpectedNull(&'static str),
    /// Bytes left over after a complete record (wrong op code, or a newer peer).
    #[error("{0} trailing bytes after the record")]
    TrailingBytes(usize),
    /// A number that names no known op code, where one is required.
    #[error("unknown op code {0}")]
    UnknownOpCode(i32),
    /// A multi result or request header that makes no sense.
    #[error("malformed multi record: {0}")]
    BadMulti(&'static str),
}
