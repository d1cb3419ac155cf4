//! Watches, as ZooKeeper 3.8's WatchManager keeps them: two tables (data,
//! child) with one mode per path and connection, fired when a txn commits,
//! re-armed by setWatches, removed or checked by removeWatches and
//! checkWatches.

use super::*;

/// A change to the tree whose watches fire once the txn commits.
#[derive(Debug, Clone)]
pub(super) enum Change {
    Created(String),
    Deleted(String),
    DataChanged(String),
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Table {
    Data,
    Child,
}

/// A watch's mode in one table (ZooKeeper's WatcherMode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// One-shot: removed when it fires.
    Standard,
    /// addWatch PERSISTENT: stays; fires for the path itself.
    Persistent,
    /// addWatch PERSISTENT_RECURSIVE: stays; fires for the path and
    /// everything below it, except NodeChildrenChanged.
    Recursive,
}

pub(super) type Watches = BTreeMap<String, BTreeMap<ConnId, Mode>>;

pub(super) fn count_modes(w: &Watches, want: impl Fn(Mode) -> bool) -> usize {
    w.values()
        .map(|m| m.values().filter(|mode| want(**mode)).count())
        .sum()
}

impl SimZooKeeper {
    fn notify(&mut self, conn: ConnId, kind: EventType, path: &str) {
        if self.behind_cut.contains_key(&conn) {
            return;
        }
        self.log(|| format!("conn {conn}: event {kind:?} {path}"));
        self.send(conn, |b| {
            ReplyHeader {
                xid: xid::WATCH_EVENT,
                zxid: -1,
                err: ErrorCode::Ok,
            }
            .encode(b);
            WatcherEvent {
                kind,
                state: KeeperState::SyncConnected,
                path: path.to_owned(),
            }
            .encode(b);
        });
    }

    /// Fires the watches of every change made by the txn just applied, as
    /// DataTree does: the data table for the node, then (delete) the child
    /// table for the node, then the child table for the parent.
    pub(super) fn commit(&mut self) {
        self.record_txn();
        let changes = std::mem::take(&mut self.changes);
        self.fire(false, changes);
    }

    /// Fires the watches of `changes` for the connections of the lagging
    /// follower (`lagging`: when it applies the txn) or of the up-to-date
    /// servers (when the leader commits it).
    pub(super) fn fire(&mut self, lagging: bool, changes: Vec<Change>) {
        let none = BTreeSet::new();
        for change in changes {
            match change {
                Change::Created(path) => {
                    self.trigger(lagging, Table::Data, &path, EventType::NodeCreated, &none);
                    let parent = parent_of(&path).to_owned();
                    self.trigger(
                        lagging,
                        Table::Child,
                        &parent,
                        EventType::NodeChildrenChanged,
                        &none,
                    );
                }
                Change::Deleted(path) => {
                    let done =
                        self.trigger(lagging, Table::Data, &path, EventType::NodeDeleted, &none);
                    self.trigger(lagging, Table::Child, &path, EventType::NodeDeleted, &done);
                    let parent = parent_of(&path).to_owned();
                    self.trigger(
                        lagging,
                        Table::Child,
                        &parent,
                        EventType::NodeChildrenChanged,
                        &none,
                    );
                }
                Change::DataChanged(path) => {
                    self.trigger(
                        lagging,
                        Table::Data,
                        &path,
                        EventType::NodeDataChanged,
                        &none,
                    );
                }
            }
        }
    }

    /// One table's trigger (ZooKeeper 3.8's WatchManager.triggerWatch):
    /// on `path` itself every watch matches (a standard one is removed, a
    /// persistent one stays, a recursive one stays and is skipped for
    /// NodeChildrenChanged); on its ancestors only recursive watches match,
    /// never for NodeChildrenChanged. Each matching connection is notified
    /// once, except those in `suppress`. Returns every connection that
    /// matched.
    fn trigger(
        &mut self,
        lagging: bool,
        table: Table,
        path: &str,
        kind: EventType,
        suppress: &BTreeSet<ConnId>,
    ) -> BTreeSet<ConnId> {
        // Without a lagging follower every connection is the leader's.
        let everyone = self.follower.is_none();
        let conns_here: BTreeSet<ConnId> = if everyone {
            BTreeSet::new()
        } else {
            self.conns
                .iter()
                .filter(|(_, c)| c.lagging == lagging)
                .map(|(id, _)| *id)
                .collect()
        };
        let here = |c: &ConnId| everyone || conns_here.contains(c);
        let map = match table {
            Table::Data => &mut self.data_watches,
            Table::Child => &mut self.child_watches,
        };
        let children_changed = kind == EventType::NodeChildrenChanged;
        let mut hit = BTreeSet::new();
        if let Some(conns) = map.get_mut(path) {
            conns.retain(|c, mode| match mode {
                _ if !here(c) => true,
                Mode::Recursive => {
                    if !children_changed {
                        hit.insert(*c);
                    }
                    true
                }
                Mode::Persistent => {
                    hit.insert(*c);
                    true
                }
                Mode::Standard => {
                    hit.insert(*c);
                    false
                }
            });
            if conns.is_empty() {
                map.remove(path);
            }
        }
        if !children_changed && path != "/" {
            let mut up = parent_of(path);
            loop {
                if let Some(conns) = map.get(up) {
                    hit.extend(
                        conns
                            .iter()
                            .filter(|(c, m)| **m == Mode::Recursive && here(c))
                            .map(|(c, _)| *c),
                    );
                }
                if up == "/" {
                    break;
                }
                up = parent_of(up);
            }
        }
        for &c in &hit {
            if !suppress.contains(&c) {
                self.notify(c, kind, path);
            }
        }
        hit
    }

    /// Sets (or replaces) `conn`'s watch mode on `path` in one table.
    pub(super) fn add_watch(&mut self, table: Table, path: &str, conn: ConnId, mode: Mode) {
        let map = match table {
            Table::Data => &mut self.data_watches,
            Table::Child => &mut self.child_watches,
        };
        map.entry(path.to_owned()).or_default().insert(conn, mode);
    }

    pub(super) fn set_watches(&mut self, conn: ConnId, sw: &SetWatches) {
        let rel = sw.relative_zxid;
        for path in &sw.data {
            match self.tree.get(path).map(|n| n.stat.mzxid) {
                None => self.notify(conn, EventType::NodeDeleted, path),
                Some(m) if m > rel => self.notify(conn, EventType::NodeDataChanged, path),
                Some(_) => self.add_watch(Table::Data, path, conn, Mode::Standard),
            }
        }
        for path in &sw.exist {
            if self.tree.contains_key(path) {
                self.notify(conn, EventType::NodeCreated, path);
            } else {
                self.add_watch(Table::Data, path, conn, Mode::Standard);
            }
        }
        for path in &sw.child {
            match self.tree.get(path).map(|n| n.stat.pzxid) {
                None => self.notify(conn, EventType::NodeDeleted, path),
                Some(p) if p > rel => self.notify(conn, EventType::NodeChildrenChanged, path),
                Some(_) => self.add_watch(Table::Child, path, conn, Mode::Standard),
            }
        }
        for (paths, mode) in [
            (&sw.persistent, Mode::Persistent),
            (&sw.persistent_recursive, Mode::Recursive),
        ] {
            for path in paths {
                self.add_watch(Table::Child, path, conn, mode);
                self.add_watch(Table::Data, path, conn, mode);
            }
        }
    }

    /// removeWatches / checkWatches: NoWatcher if the connection has no
    /// watch of that type on the path; else Ok, removing them if asked.
    pub(super) fn remove_watches(
        &mut self,
        conn: ConnId,
        path: &str,
        kind: WatcherType,
        remove: bool,
    ) -> Result<(), ErrorCode> {
        let tables: Vec<&mut Watches> = match kind {
            WatcherType::Children => vec![&mut self.child_watches],
            WatcherType::Data => vec![&mut self.data_watches],
            WatcherType::Any => vec![&mut self.data_watches, &mut self.child_watches],
            // 3.9's persistent types: 3.8 knows only 1-3.
            _ => return Err(ErrorCode::BadArguments),
        };
        let mut found = false;
        for table in tables {
            if let Some(set) = table.get_mut(path) {
                // 3.8's WatchManager.containsWatcher answers true when *any*
                // connection watches the exact path (seen on the real
                // server); removal only removes this connection's watch.
                if !remove && !set.is_empty() {
                    found = true;
                }
                if remove && set.contains_key(&conn) {
                    found = true;
                    set.remove(&conn);
                    if set.is_empty() {
                        table.remove(path);
                    }
                }
            }
        }
        if found {
            Ok(())
        } else {
            Err(ErrorCode::NoWatcher)
        }
    }
}
