//! Path validation and chroot, so bad input never reaches the wire.

use crate::error::{Error, Result};

pub(crate) use zklock_proto::path::ancestors;

/// Checks a path the way the server would, before anything is sent.
/// `sequential` allows a trailing `/` (the server appends the suffix).
///
/// # Errors
/// [`Error::InvalidPath`] with the rule the path breaks.
///
/// ```
/// use zklock::validate_path;
/// assert!(validate_path("/locks/job", false).is_ok());
/// assert!(validate_path("/locks/", false).is_err());
/// assert!(validate_path("/locks/", true).is_ok());
/// assert!(validate_path("locks/../x", false).is_err());
/// ```
pub fn validate_path(path: &str, sequential: bool) -> Result<()> {
    let bad = |reason| {
        Err(Error::InvalidPath {
            path: path.to_owned(),
            reason,
        })
    };
    if path.is_empty() {
        return bad("empty");
    }
    if !path.starts_with('/') {
        return bad("must start with '/'");
    }
    if path.len() == 1 {
        return Ok(());
    }
    if path.ends_with('/') && !sequential {
        return bad("must not end with '/'");
    }
    // The server checks UTF-16 units: a character past U+FFFF is a pair of
    // surrogates (U+D800 to U+DFFF), refused as the private-use area is.
    if path.chars().any(|c| {
        c == '\0' || c.is_control() || ('\u{e000}'..='\u{f8ff}').contains(&c) || c >= '\u{fff0}'
    }) {
        return bad("contains a control or reserved character");
    }
    let trimmed = if sequential {
        path.strip_suffix('/').unwrap_or(path)
    } else {
        path
    };
    for segment in trimmed[1..].split('/') {
        match segment {
            "" => return bad("empty segment"),
            "." | ".." => return bad("relative segment"),
            _ => {}
        }
    }
    Ok(())
}

/// A chroot prefix applied to every path sent and removed from every path returned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chroot(Option<String>);

impl Chroot {
    pub fn new(prefix: Option<String>) -> Result<Self> {
        match prefix {
            None => Ok(Chroot(None)),
            Some(p) if p == "/" || p.is_empty() => Ok(Chroot(None)),
            Some(p) => {
                validate_path(&p, false)?;
                Ok(Chroot(Some(p)))
            }
        }
    }

    /// The server path for a client path.
    pub fn apply(&self, path: &str) -> String {
        match &self.0 {
            None => path.to_owned(),
            Some(root) if path == "/" => root.clone(),
            Some(root) => format!("{root}{path}"),
        }
    }

    /// The client path for a server path.
    pub fn strip(&self, path: &str) -> String {
        match &self.0 {
            None => path.to_owned(),
            Some(root) => match path.strip_prefix(root.as_str()) {
                Some("") => "/".to_owned(),
                Some(rest) if rest.starts_with('/') => rest.to_owned(),
                _ => path.to_owned(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        for ok in ["/", "/a", "/a/b", "/a-b_c.d", "/é/锁"] {
            assert!(validate_path(ok, false).is_ok(), "{ok}");
        }
        for bad in [
            "", "a", "/a/", "//a", "/a//b", "/a/./b", "/..", "/a\0b", "/a\nb",
        ] {
            assert!(validate_path(bad, false).is_err(), "{bad:?}");
        }
        assert!(validate_path("/q/", true).is_ok());
        assert!(validate_path("/q//", true).is_err());
    }

    /// ZooKeeper refuses a path with a character of the private-use area,
    /// of the reserved end of the first plane, or past it (a surrogate
    /// pair to the server): each range is refused here on its own, before
    /// anything is sent, and the characters just outside them pass.
    /// `tests/zookeeper/client/refusals.rs` holds the same line against a
    /// real server.
    ///
    /// Kills: validate_path `||` → `&&` before the private-use range
    #[test]
    fn reserved_characters_are_refused_and_their_neighbours_pass() {
        for c in [
            '\u{e000}',
            '\u{f8ff}',
            '\u{fff0}',
            '\u{ffff}',
            '\u{10000}',
            '\u{1f600}',
        ] {
            let path = format!("/a{c}b");
            assert!(validate_path(&path, false).is_err(), "{c:?}");
        }
        for c in ['\u{d7ff}', '\u{f900}', '\u{ffef}'] {
            let path = format!("/a{c}b");
            assert!(validate_path(&path, false).is_ok(), "{c:?}");
        }
    }

    #[test]
    fn chroot_round_trip() {
        let c = Chroot::new(Some("/app".into())).unwrap();
        assert_eq!(c.apply("/"), "/app");
        assert_eq!(c.apply("/x"), "/app/x");
        assert_eq!(c.strip("/app"), "/");
        assert_eq!(c.strip("/app/x"), "/x");
        assert_eq!(c.strip("/application"), "/application");
        assert!(Chroot::new(Some("app".into())).is_err());
    }
}
