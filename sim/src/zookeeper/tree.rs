//! The data tree: nodes and their Stat as clients see it, the writes that
//! change them (create, delete, setData, setACL, check), and sequential
//! naming from the parent's stored cversion up to its end at `i32::MAX`,
//! with the prep stage's in-flight records (see "Sequential nodes" and "The
//! counter's end" in the module docs).

use super::*;

/// The ephemeralOwner ZooKeeper shows for container nodes.
pub const CONTAINER_OWNER: i64 = i64::MIN;

/// Nodes every server has and no client may delete.
pub(super) const SYSTEM_NODES: [&str; 4] =
    ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"];

#[derive(Debug, Clone)]
pub(super) struct Node {
    pub(super) data: Vec<u8>,
    pub(super) acl: Vec<Acl>,
    /// numChildren and dataLength are filled in by `stat_of`.
    pub(super) stat: Stat,
    pub(super) children: BTreeSet<String>,
    /// Has ever had a child (a container is collected only then).
    pub(super) had_child: bool,
}

pub(super) fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

pub(super) fn name_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(i) => &path[i + 1..],
        None => path,
    }
}

/// ZooKeeper's PathUtils.validatePath.
pub fn valid_path(path: &str) -> bool {
    if !path.starts_with('/') {
        return false;
    }
    if path == "/" {
        return true;
    }
    if path.ends_with('/') {
        return false;
    }
    for seg in path[1..].split('/') {
        if seg.is_empty() || seg == "." || seg == ".." {
            return false;
        }
    }
    !path.chars().any(|c| {
        c == '\0'
            || ('\u{1}'..='\u{1f}').contains(&c)
            || ('\u{7f}'..='\u{9f}').contains(&c)
            || ('\u{e000}'..='\u{f8ff}').contains(&c)
            || ('\u{fff0}'..='\u{ffff}').contains(&c)
            // Java sees these as surrogate pairs (U+D800..U+DFFF): invalid.
            || c > '\u{ffff}'
    })
}

pub(super) fn is_under(path: &str, root: &str) -> bool {
    root == "/"
        || path == root
        || path
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
}

impl SimZooKeeper {
    /// Nodes created from now on start with this cversion, so a test reaches
    /// the end of the sequence counter (`i32::MAX`) in a few creates.
    pub fn with_sequence_start(mut self, parent_cversion_start: i32) -> Self {
        self.sequence_start = parent_cversion_start;
        self
    }

    /// Sets `path`'s stored cversion (its sequence counter) in place, no txn,
    /// as `testkit::zk::ZkHarness::set_sequence_counter` does on the real
    /// server. False if the node does not exist.
    pub fn set_sequence_counter(&mut self, path: &str, value: i32) -> bool {
        match self.tree.get_mut(path) {
            Some(n) => {
                n.stat.cversion = value;
                self.follower_set_counter(path, value);
                true
            }
            None => false,
        }
    }

    /// `true`: requests received from now on are prepped while the earlier
    /// ones are still in flight, across `receive` calls and connections, as
    /// when ZooKeeper's PrepRequestProcessor runs ahead of the
    /// SyncRequestProcessor's fsync. `false`: the pipeline drains
    /// (FinalRequestProcessor.processRequest drops the applied change
    /// records) and the next create reads the stored counter again. Without
    /// it, one `receive` call is one burst.
    pub fn hold_in_flight(&mut self, hold: bool) {
        self.holding = hold;
        if !hold {
            self.in_flight.clear();
        }
    }

    /// The Stat a client sees (DataNode.copyStat): the stored cversion
    /// counts child creates only; clients see `creates × 2 − children`
    /// (creates plus deletes), wrapping like Java ints; containers show
    /// ephemeralOwner 0.
    pub(super) fn stat_of(n: &Node) -> Stat {
        let children = i32::try_from(n.children.len()).unwrap_or(i32::MAX);
        let owner = n.stat.ephemeral_owner;
        Stat {
            data_length: i32::try_from(n.data.len()).unwrap_or(i32::MAX),
            num_children: children,
            cversion: n.stat.cversion.wrapping_mul(2).wrapping_sub(children),
            ephemeral_owner: if owner == CONTAINER_OWNER { 0 } else { owner },
            ..n.stat
        }
    }

    pub(super) fn create(
        &mut self,
        now: Instant,
        caller: Caller,
        req: &CreateRequest,
        container_op: bool,
        zxid: i64,
    ) -> Result<(String, Stat), ErrorCode> {
        let mode = req.mode;
        if matches!(mode, CreateMode::Unknown(_)) {
            return Err(ErrorCode::BadArguments);
        }
        if mode.is_ttl() {
            return Err(ErrorCode::Unimplemented);
        }
        let container = container_op || mode == CreateMode::Container;
        let path = req.path.as_str();
        if !path.contains('/') || path.contains('\0') {
            return Err(ErrorCode::BadArguments);
        }
        if req.acl.is_empty() || (!caller.authed && req.acl.iter().any(|a| a.id.scheme == "auth")) {
            return Err(ErrorCode::InvalidAcl);
        }
        let parent_path = parent_of(path).to_owned();
        let Some(parent) = self.tree.get(&parent_path) else {
            return Err(ErrorCode::NoNode);
        };
        // PrepRequestProcessor.pRequest2TxnCreate: the parent's record is
        // the latest outstanding change if a create on it is in flight, else
        // the DataTree's node.
        let parent_cversion = *self
            .in_flight
            .get(&parent_path)
            .unwrap_or(&parent.stat.cversion);
        let parent_owner = parent.stat.ephemeral_owner;
        let full = if mode.is_sequential() {
            format!("{path}{parent_cversion:010}")
        } else {
            path.to_owned()
        };
        if !valid_path(&full) {
            return Err(ErrorCode::BadArguments);
        }
        if self.tree.contains_key(&full) {
            return Err(ErrorCode::NodeExists);
        }
        if parent_owner != 0 && parent_owner != CONTAINER_OWNER {
            return Err(ErrorCode::NoChildrenForEphemerals);
        }
        let owner = if container {
            CONTAINER_OWNER
        } else if mode.is_ephemeral() {
            caller.session
        } else {
            0
        };
        self.save(&parent_path);
        self.save(&full);
        self.touched.push(parent_path.clone());
        self.touched.push(full.clone());
        // Java int arithmetic: 2147483647 + 1 is -2147483648 in the txn.
        let new_cversion = parent_cversion.wrapping_add(1);
        if let Some(parent) = self.tree.get_mut(&parent_path) {
            parent.children.insert(name_of(&full).to_owned());
            parent.had_child = true;
            // DataTree.createNode stores the txn's cversion (and pzxid) only
            // if greater, so past the end the stored counter stays at
            // i32::MAX and the parent's pzxid does not move either.
            if new_cversion > parent.stat.cversion {
                parent.stat.cversion = new_cversion;
                parent.stat.pzxid = zxid;
            }
        }
        // The prep stage's duplicate parent record carries the txn's value.
        self.in_flight.insert(parent_path, new_cversion);
        // A node created anew has a fresh record (a delete in flight left none).
        self.in_flight.remove(&full);
        let time = self.millis(now);
        let node = Node {
            data: req.data.clone(),
            acl: req.acl.clone(),
            stat: Stat {
                czxid: zxid,
                mzxid: zxid,
                ctime: time,
                mtime: time,
                version: 0,
                cversion: self.sequence_start,
                aversion: 0,
                ephemeral_owner: owner,
                data_length: 0,
                num_children: 0,
                pzxid: zxid,
            },
            children: BTreeSet::new(),
            had_child: false,
        };
        let stat = Self::stat_of(&node);
        self.tree.insert(full.clone(), node);
        self.changes.push(Change::Created(full.clone()));
        Ok((full, stat))
    }

    pub(super) fn delete(&mut self, path: &str, version: i32, zxid: i64) -> Result<(), ErrorCode> {
        if !path.contains('/') || path.contains('\0') || SYSTEM_NODES.contains(&path) {
            return Err(ErrorCode::BadArguments);
        }
        let Some(node) = self.tree.get(path) else {
            return Err(ErrorCode::NoNode);
        };
        if version != -1 && version != node.stat.version {
            return Err(ErrorCode::BadVersion);
        }
        if !node.children.is_empty() {
            return Err(ErrorCode::NotEmpty);
        }
        self.remove_node(path, zxid);
        Ok(())
    }

    /// Removes a childless node: the parent's pzxid moves if the txn's zxid
    /// is greater, its cversion does not (DataTree.deleteNode; the prep
    /// stage's parent record keeps the cversion it had, so in-flight names
    /// go on from it).
    pub(super) fn remove_node(&mut self, path: &str, zxid: i64) {
        let parent_path = parent_of(path).to_owned();
        self.save(&parent_path);
        self.save(path);
        self.touched.push(parent_path.clone());
        self.touched.push(path.to_owned());
        if let Some(parent) = self.tree.get_mut(&parent_path) {
            parent.children.remove(name_of(path));
            if zxid > parent.stat.pzxid {
                parent.stat.pzxid = zxid;
            }
        }
        self.tree.remove(path);
        self.in_flight.remove(path);
        self.deleted_by.insert(path.to_owned(), self.acting);
        self.changes.push(Change::Deleted(path.to_owned()));
    }

    pub(super) fn set_data(
        &mut self,
        now: Instant,
        path: &str,
        data: &[u8],
        version: i32,
        zxid: i64,
    ) -> Result<Stat, ErrorCode> {
        let Some(node) = self.tree.get(path) else {
            return Err(ErrorCode::NoNode);
        };
        if version != -1 && version != node.stat.version {
            return Err(ErrorCode::BadVersion);
        }
        self.save(path);
        self.touched.push(path.to_owned());
        let time = self.millis(now);
        let Some(node) = self.tree.get_mut(path) else {
            return Err(ErrorCode::NoNode);
        };
        node.data = data.to_vec();
        node.stat.mzxid = zxid;
        node.stat.mtime = time;
        node.stat.version = node.stat.version.wrapping_add(1);
        let stat = Self::stat_of(node);
        self.changes.push(Change::DataChanged(path.to_owned()));
        Ok(stat)
    }

    pub(super) fn set_acl(
        &mut self,
        path: &str,
        acl: &[Acl],
        version: i32,
    ) -> Result<Response, ErrorCode> {
        if acl.is_empty() {
            return Err(ErrorCode::InvalidAcl);
        }
        let Some(node) = self.tree.get_mut(path) else {
            return Err(ErrorCode::NoNode);
        };
        if version != -1 && version != node.stat.aversion {
            return Err(ErrorCode::BadVersion);
        }
        self.touched.push(path.to_owned());
        let Some(node) = self.tree.get_mut(path) else {
            return Err(ErrorCode::NoNode);
        };
        node.acl = acl.to_vec();
        node.stat.aversion = node.stat.aversion.wrapping_add(1);
        Ok(Response::Stat(Self::stat_of(node)))
    }

    pub(super) fn check(&self, path: &str, version: i32) -> Result<(), ErrorCode> {
        let Some(node) = self.tree.get(path) else {
            return Err(ErrorCode::NoNode);
        };
        if version != -1 && version != node.stat.version {
            return Err(ErrorCode::BadVersion);
        }
        Ok(())
    }
}
