//! The registry of one-shot watches, kept by server path. It survives
//! reconnects so every watch can be re-armed with SetWatches.

use std::collections::HashMap;

use jute::{EventType, SetWatches};

/// Which list a watch sits on, following ZooKeeper's own client: a data watch
/// (getData, or exists on a node that exists), an exist watch (exists on a
/// missing node) or a child watch (getChildren).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchKind {
    Data,
    Exist,
    Child,
}

#[derive(Debug)]
pub(crate) struct WatchRegistry<W> {
    data: HashMap<String, Vec<W>>,
    exist: HashMap<String, Vec<W>>,
    child: HashMap<String, Vec<W>>,
}

impl<W> Default for WatchRegistry<W> {
    fn default() -> Self {
        WatchRegistry {
            data: HashMap::new(),
            exist: HashMap::new(),
            child: HashMap::new(),
        }
    }
}

impl<W> WatchRegistry<W> {
    fn map(&mut self, kind: WatchKind) -> &mut HashMap<String, Vec<W>> {
        match kind {
            WatchKind::Data => &mut self.data,
            WatchKind::Exist => &mut self.exist,
            WatchKind::Child => &mut self.child,
        }
    }

    pub(crate) fn add(&mut self, kind: WatchKind, path: &str, watcher: W) {
        self.map(kind)
            .entry(path.to_owned())
            .or_default()
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
        for map in [&mut self.data, &mut self.exist, &mut self.child] {
            map.retain(|_, ws| {
                ws.retain(&mut keep);
                !ws.is_empty()
            });
        }
    }

    /// Removes every watcher, for delivery of "this watch will never fire".
    pub(crate) fn drain_all(&mut self) -> Vec<W> {
        let mut out = Vec::new();
        for map in [&mut self.data, &mut self.exist, &mut self.child] {
            for (_, ws) in map.drain() {
                out.extend(ws);
            }
        }
        out
    }

    pub(crate) fn len(&self) -> usize {
        [&self.data, &self.exist, &self.child]
            .iter()
            .map(|m| m.values().map(Vec::len).sum::<usize>())
            .sum()
    }

    /// SetWatches batches that re-arm every path, each under `max_bytes`.
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
            (WatchKind::Data, &self.data),
            (WatchKind::Exist, &self.exist),
            (WatchKind::Child, &self.child),
        ];
        for (kind, map) in lists {
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
                match kind {
                    WatchKind::Data => current.data.push(path.clone()),
                    WatchKind::Exist => current.exist.push(path.clone()),
                    WatchKind::Child => current.child.push(path.clone()),
                }
            }
        }
        if size > 8 + 5 * 4 {
            batches.push(current);
        }
        batches
    }
}
