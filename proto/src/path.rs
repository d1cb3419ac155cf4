//! ZooKeeper paths as the lock machine builds them.

/// `parent/name`, with no doubled slash under the root.
pub fn join(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
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
