//! ZooKeeper paths as the lock machine builds them.

/// `parent/name`, with no doubled slash under the root. Built by hand, not
/// with `format!`: every lock cycle joins a few paths, and the formatting
/// machinery grows the string piece by piece.
pub fn join(parent: &str, name: &str) -> String {
    join_all(parent, &[name])
}

/// `parent/` followed by `pieces`, each appended as it is, in one allocation.
pub(crate) fn join_all(parent: &str, pieces: &[&str]) -> String {
    let parent = if parent == "/" { "" } else { parent };
    let len = parent.len() + 1 + pieces.iter().map(|p| p.len()).sum::<usize>();
    let mut out = String::with_capacity(len);
    out.push_str(parent);
    out.push('/');
    for piece in pieces {
        out.push_str(piece);
    }
    out
}

/// `/a`, `/a/b`, `/a/b/c` for `/a/b/c`: every node a path needs.
pub fn ancestors(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut at = String::new();
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        at.push('/');
        at.push_str(segment);
        out.push(at.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Under the root a name joins with one slash, elsewhere with one
    /// more, and several pieces join as one name.
    ///
    /// Kills: join_all `+` → `-` in the length (it underflows under the root)
    #[test]
    fn joins_have_one_slash_under_the_root_and_elsewhere() {
        assert_eq!(join("/", "locks"), "/locks");
        assert_eq!(join("/locks", "job"), "/locks/job");
        assert_eq!(join_all("/", &["_c_", "id", "-lock-"]), "/_c_id-lock-");
        assert_eq!(join_all("/q", &["a", "b"]), "/q/ab");
        assert_eq!(ancestors("/a/b/c"), ["/a", "/a/b", "/a/b/c"]);
        assert!(ancestors("/").is_empty());
    }
}
