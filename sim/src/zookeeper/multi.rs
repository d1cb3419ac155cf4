//! multi: all or nothing. Each op sees the ones before it; the first
//! failure puts back every node touched and the prep stage's records
//! (PrepRequestProcessor.rollbackPendingChanges), and no watch fires.

use super::*;

impl SimZooKeeper {
    /// Records `path`'s before-image while a multi is open.
    pub(super) fn save(&mut self, path: &str) {
        if let Some(undo) = &mut self.undo {
            if !undo.contains_key(path) {
                undo.insert(path.to_owned(), self.tree.get(path).cloned());
            }
        }
    }

    /// All or nothing: ops apply in order, each seeing the ones before; the
    /// first failure rolls everything back and no watch fires.
    pub(super) fn multi(
        &mut self,
        now: Instant,
        caller: Caller,
        ops: &[MultiOp],
        zxid: i64,
    ) -> Vec<MultiResult> {
        self.undo = Some(BTreeMap::new());
        // PrepRequestProcessor.getPendingChanges / rollbackPendingChanges: a
        // failed multi puts back the change records that were outstanding.
        let in_flight_before = self.in_flight.clone();
        let mut results = Vec::with_capacity(ops.len());
        let mut failure = None;
        for (i, op) in ops.iter().enumerate() {
            let res = match op {
                MultiOp::Create(c) => self
                    .create(now, caller, c, false, zxid)
                    .map(|(path, _)| MultiResult::Create { path }),
                // ZooKeeper 3.8 answers a create2 inside a multi like a
                // create: the path, no Stat.
                MultiOp::Create2(c) => self
                    .create(now, caller, c, false, zxid)
                    .map(|(path, _)| MultiResult::Create { path }),
                MultiOp::Delete(p) => self
                    .delete(&p.path, p.version, zxid)
                    .map(|_| MultiResult::Delete),
                MultiOp::SetData(s) => self
                    .set_data(now, &s.path, &s.data, s.version, zxid)
                    .map(|stat| MultiResult::SetData { stat }),
                MultiOp::Check(p) => self.check(&p.path, p.version).map(|_| MultiResult::Check),
            };
            match res {
                Ok(r) => results.push(r),
                Err(e) => {
                    failure = Some((i, e));
                    break;
                }
            }
        }
        let undo = self.undo.take().unwrap_or_default();
        let Some((failed, code)) = failure else {
            return results;
        };
        self.in_flight = in_flight_before;
        for (path, before) in undo {
            match before {
                Some(node) => {
                    self.tree.insert(path, node);
                }
                None => {
                    self.tree.remove(&path);
                }
            }
        }
        self.changes.clear();
        (0..ops.len())
            .map(|i| {
                MultiResult::Error(match i.cmp(&failed) {
                    std::cmp::Ordering::Less => ErrorCode::Ok,
                    std::cmp::Ordering::Equal => code,
                    std::cmp::Ordering::Greater => ErrorCode::RuntimeInconsistency,
                })
            })
            .collect()
    }
}
