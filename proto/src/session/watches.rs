//! The registry of one-shot watches, kept by server path. It survives
//! reconnects so every watch can be re-armed with SetWatches.

use std::collections::BTreeMap;

use jute::{EventType, SetWatches};

/// Which list a watch sits on, following ZooKeeper's own client: a data watch
/// (getData, or exists on a node that exists), an exist watch (exists on a
/// missing node) or a child watch (getChildren).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchKind {
    /// Fires on data change or deletion.
    Data,
    /// Waits for a missing node to be created.
    Exist,
    /// Fires on a change to the children list or deletion.
    Child,
}

#[derive(Debug)]
pub(crate) struct WatchRegistry<W> {
    data: BTreeMap<String, Vec<W>>,
    exist: BTreeMap<String, Vec<W>>,
    child: BTreeMap<String, Vec<W>>,
    /// addWatch PERSISTENT: every change of the node and its children list.
    persistent: BTreeMap<String, Vec<W>>,
    /// addWatch PERSISTENT_RECURSIVE: the node and everything below it.
    recursive: BTreeMap<String, Vec<W>>,
}

impl<W> Default for WatchRegistry<W> {
    fn default() -> Self {
        WatchRegistry {
            data: BTreeMap::new(),
            exist: BTreeMap::new(),
            child: BTreeMap::new(),
            persistent: BTreeMap::new(),
            recursive: BTreeMap::new(),
        }
    }
}

/// Whether `path` is `root` or below it.
fn is_under(path: &str, root: &str) -> bool {
    root == "/"
        || path == root
        || path
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
}

impl<W> WatchRegistry<W> {
    fn map(&mut self, kind: WatchKind) -> &mut BTreeMap<String, Vec<W>> {
        match kind {
            WatchKind::Data => &mut self.data,
            WatchKind::Exist => &mut self.exist,
            WatchKind::Child => &mut self.child,
        }
    }

    /// Registers a persistent watch; it stays until removed or the session ends.
    pub(crate) fn add_persistent(&mut self, path: &str, recursive: bool, watcher: W) {
        let map = if recursive {
            &mut self.recursive
        } else {
            &mut self.persistent
        };
        map.entry(path.to_owned()).or_default().push(watcher);
    }

    /// Whether any watch, of any kind, remains on `path`.
    pub(crate) fn watches_path(&self, path: &str) -> bool {
        self.all().iter().any(|m| m.contains_key(path))
    }

    /// Every persistent watcher an event on `path` reaches; they stay registered.
    pub(crate) fn persistent_matches(&self, kind: EventType, path: &str) -> Vec<&W> {
        let mut out = Vec::new();
        let node_event = matches!(
            kind,
            EventType::NodeCreated | EventType::NodeDeleted | EventType::NodeDataChanged
        );
        if node_event || kind == EventType::NodeChildrenChanged {
            if let Some(ws) = self.persistent.get(path) {
                out.extend(ws);
            }
        }
        // Recursive watches hear no NodeChildrenChanged: creations and
        // deletions below already say it.
        if node_event {
            for (root, ws) in &self.recursive {
                if is_under(path, root) {
                    out.extend(ws);
                }
            }
        }
        out
    }

    /// Every persistent watcher with the path it watches.
    pub(crate) fn persistent_roots(&self) -> Vec<(String, W)>
    where
        W: Clone,
    {
        self.persistent
            .iter()
            .chain(&self.recursive)
            .flat_map(|(p, ws)| ws.iter().map(move |w| (p.clone(), w.clone())))
            .collect()
    }

    pub(crate) fn add(&mut self, kind: WatchKind, path: &str, watcher: W) {
        // Nearly every path has one watcher (a waiter's own node, its
        // blocker, its scout): room for one, not the four a first push
        // makes, which saves memory on every waiter (bench/FIGURES.md).
        self.map(kind)
            .entry(path.to_owned())
            .or_insert_with(|| Vec::with_capacity(1))
            .push(watcher);
    }

    /// Removes and returns every watcher an event on `path` triggers.
    pub(crate) fn trigger(&mut self, kind: EventType, path: &str) -> Vec<W> {
        let lists: &[WatchKind] = match kind {
            EventType::NodeCreated | EventType::NodeDataChanged => {
                &[WatchKind::Data, WatchKind::Exist]
            }
            EventType::NodeDeleted => &[WatchKind::Data, WatchKind::Exist, WatchKind::Child],
            EventType::NodeChildrenChanged => &[WatchKind::Child],
            _ => &[],
        };
        let mut out = Vec::new();
        for k in lists {
            if let Some(ws) = self.map(*k).remove(path) {
                out.extend(ws);
            }
        }
        out
    }

    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&W) -> bool) {
        for map in self.maps() {
            map.retain(|_, ws| {
                ws.retain(&mut keep);
                !ws.is_empty()
            });
        }
    }

    /// Removes every watcher, for delivery of "this watch will never fire".
    pub(crate) fn drain_all(&mut self) -> Vec<W> {
        let mut out = Vec::new();
        for map in self.maps() {
            for (_, ws) in std::mem::take(map) {
                out.extend(ws);
            }
        }
        out
    }

    fn maps(&mut self) -> [&mut BTreeMap<String, Vec<W>>; 5] {
        [
            &mut self.data,
            &mut self.exist,
            &mut self.child,
            &mut self.persistent,
            &mut self.recursive,
        ]
    }

    /// Every list, for reading.
    fn all(&self) -> [&BTreeMap<String, Vec<W>>; 5] {
        [
            &self.data,
            &self.exist,
            &self.child,
            &self.persistent,
            &self.recursive,
        ]
    }

    pub(crate) fn len(&self) -> usize {
        self.all()
            .iter()
            .map(|m| m.values().map(Vec::len).sum::<usize>())
            .sum()
    }

    /// SetWatches batches that re-arm every path, each under `max_bytes`
    /// (a batch with persistent watches goes out as setWatches2).
    pub(crate) fn set_watches_batches(
        &self,
        relative_zxid: i64,
        max_bytes: usize,
    ) -> Vec<SetWatches> {
        let mut batches = Vec::new();
        let mut current = SetWatches {
            relative_zxid,
            ..SetWatches::default()
        };
        let mut size = 8 + 5 * 4;
        let lists = [
            (0, &self.data),
            (1, &self.exist),
            (2, &self.child),
            (3, &self.persistent),
            (4, &self.recursive),
        ];
        for (list, map) in lists {
            for path in map.keys() {
                let cost = 4 + path.len();
                if size + cost > max_bytes && size > 8 + 5 * 4 {
                    batches.push(std::mem::replace(
                        &mut current,
                        SetWatches {
                            relative_zxid,
                            ..SetWatches::default()
                        },
                    ));
                    size = 8 + 5 * 4;
                }
                size += cost;
                match list {
                    0 => current.data.push(path.clone()),
                    1 => current.exist.push(path.clone()),
                    2 => current.child.push(path.clone()),
                    3 => current.persistent.push(path.clone()),
                    _ => current.persistent_recursive.push(path.clone()),
                }
            }
        }
        if size > 8 + 5 * 4 {
            batches.push(current);
        }
        batches
    }
}

#[cfg(test)]
mod tests {
    use super::{WatchKind, WatchRegistry};

    /// What a batch costs before any path: the zxid and five list lengths.
    const EMPTY: usize = 8 + 5 * 4;

    fn registry(paths: &[String]) -> WatchRegistry<()> {
        let mut r = WatchRegistry::default();
        for p in paths {
            r.add(WatchKind::Data, p, ());
        }
        r
    }

    /// Each batch stays within the limit and is as full as it allows (a
    /// path costs its length and 4), and every watch goes exactly once.
    #[test]
    fn set_watches_batches_are_full_and_within_the_limit() {
        let paths: Vec<String> = (0..7).map(|i| format!("/w/p{i:02}")).collect();
        let three = EMPTY + 3 * (4 + 6);
        let batches = registry(&paths).set_watches_batches(7, three);
        let sizes: Vec<usize> = batches.iter().map(|b| b.data.len()).collect();
        assert_eq!(sizes, [3, 3, 1]);
        let sent: Vec<String> = batches.iter().flat_map(|b| b.data.clone()).collect();
        assert_eq!(sent, paths);
        assert!(batches.iter().all(|b| b.relative_zxid == 7));
    }

    /// A path longer than the limit still goes, in a batch of its own; no
    /// batch goes empty.
    #[test]
    fn a_path_longer_than_the_limit_goes_alone() {
        // In path order, as the registry keeps them: the long one first.
        let paths = vec![
            format!("/0{}", "x".repeat(99)),
            "/a".to_string(),
            "/b".into(),
        ];
        let batches = registry(&paths).set_watches_batches(0, EMPTY + 10);
        let sent: Vec<Vec<String>> = batches.iter().map(|b| b.data.clone()).collect();
        assert_eq!(
            sent,
            [
                vec![paths[0].clone()],
                vec![paths[1].clone()],
                vec![paths[2].clone()]
            ]
        );
        assert!(registry(&[]).set_watches_batches(0, EMPTY + 10).is_empty());
    }
}
