//! One request, from its header to its reply: what FinalRequestProcessor
//! does with each op. Writes take a zxid and fire watches once applied;
//! reads may leave a watch; unknown ops close the connection.

use super::*;

/// Who issues a write: a client connection, or the test itself.
#[derive(Debug, Clone, Copy)]
pub(super) struct Caller {
    pub(super) session: i64,
    pub(super) authed: bool,
}

pub(super) const ADMIN: Caller = Caller {
    session: 0,
    authed: true,
};

impl SimZooKeeper {
    pub(super) fn on_request(&mut self, now: Instant, conn: ConnId, session: i64, frame: &[u8]) {
        if self.behind_cut.contains_key(&conn) {
            return self.on_request_behind_cut(now, conn, frame);
        }
        if self.is_lagging(conn) {
            return self.on_request_lagging(now, conn, session, frame);
        }
        self.touch(now, session);
        let Ok((header, body)) = decode_request_header(frame) else {
            return self.close_conn(conn);
        };
        let xid = header.xid;
        let request = match Request::decode_body(header.op, body) {
            Ok(r) => r,
            Err(DecodeError::UnknownOpCode(_)) => return self.unimplemented(conn, xid),
            Err(_) => return self.reply(conn, xid, self.zxid, Err(ErrorCode::MarshallingError)),
        };
        let authed = self.conns.get(&conn).is_some_and(|c| c.authed);
        let caller = Caller { session, authed };
        let out_before = self.out.len();
        if self.trace.is_some() {
            let summary = format!("{request:?}");
            self.log(|| format!("conn {conn} {session:#x} xid={xid}: {summary}"));
        }
        // Late writes of this session: a sync waits for them; any other
        // request may be served before they are visible.
        let sync = matches!(request, Request::Sync(_));
        if sync {
            self.land_late_writes(now, session);
        }
        self.dispatch(now, conn, caller, xid, request);
        if !sync {
            self.land_late_writes(now, session);
        }
        if self.trace.is_some() {
            let last = self
                .out
                .iter()
                .skip(out_before)
                .rev()
                .find(|(c, _, _)| *c == conn);
            let outcome = last.and_then(|(_, b, _)| {
                jute::decode_server_message(b.get(4..)?)
                    .ok()
                    .map(|m| match m {
                        jute::ServerMessage::Reply { header, .. } => {
                            format!(
                                "→ xid={} zxid={:#x} {:?}",
                                header.xid, header.zxid, header.err
                            )
                        }
                        jute::ServerMessage::WatchEvent { .. } => "→ (event)".to_string(),
                    })
            });
            let outcome = outcome.unwrap_or_else(|| "→ (no reply)".to_string());
            self.log(|| format!("conn {conn} xid={xid} {outcome}"));
        }
    }

    pub(super) fn dispatch(
        &mut self,
        now: Instant,
        conn: ConnId,
        caller: Caller,
        xid: i32,
        request: Request,
    ) {
        let session = caller.session;
        match request {
            Request::Ping => self.reply(conn, xid, self.zxid, Ok(Response::Empty)),
            Request::CloseSession => {
                let zxid = self.kill_session(session);
                self.reply(conn, xid, zxid, Ok(Response::Empty));
                self.close_conn(conn);
            }
            Request::Auth(auth) => {
                if auth.scheme == "digest" || auth.scheme == "ip" {
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.authed = true;
                    }
                    self.reply(conn, xid, 0, Ok(Response::Empty));
                } else {
                    self.reply(conn, xid, 0, Err(ErrorCode::AuthFailed));
                    self.close_conn(conn);
                }
            }
            Request::SetWatches(sw) | Request::SetWatches2(sw) => {
                self.set_watches(conn, &sw);
                self.reply(conn, xid, self.zxid, Ok(Response::Empty));
            }
            Request::WhoAmI => self.unimplemented(conn, xid),
            Request::Check(p) => {
                // 3.8.0 takes a txn for a check sent on its own, then fails
                // to serialize the (null) response: no reply ever comes
                // and the connection stays open.
                self.next_zxid();
                self.log(|| format!("conn {conn}: standalone check {} gets no reply", p.path));
            }
            req if Self::is_write(&req) => {
                let zxid = self.next_zxid();
                let result = self.write(now, caller, req, zxid);
                self.commit();
                self.reply(conn, xid, zxid, result);
            }
            req => {
                let path = match &req {
                    Request::Exists(p) | Request::GetData(p) => Some(p.path.clone()),
                    Request::GetChildren(p) | Request::GetChildren2(p) => Some(p.path.clone()),
                    _ => None,
                };
                let result = self.read(conn, session, req);
                if let (Some(path), true) = (path, result.is_ok()) {
                    self.last_reads.insert((session, path), now);
                }
                self.reply(conn, xid, self.zxid, result);
            }
        }
    }

    /// Late writes (see `late.rs`) land: reads among them were answered on
    /// the dead connection, and lost; a handshake among them never took
    /// place. The writes are applied as `session` unless it has ended, and
    /// their replies go nowhere.
    pub(super) fn apply_late_writes(
        &mut self,
        now: Instant,
        session: i64,
        authed: bool,
        bytes: &[u8],
    ) {
        /// A connection that never exists: replies to it are dropped.
        const NOWHERE: ConnId = ConnId::MAX;
        let mut input = BytesMut::from(bytes);
        while let Ok(Some(frame)) = split_frame(&mut input, jute::DEFAULT_MAX_FRAME) {
            if !self.running || !self.sessions.contains_key(&session) {
                return;
            }
            let Ok((header, body)) = decode_request_header(&frame) else {
                continue;
            };
            let Ok(request) = Request::decode_body(header.op, body) else {
                continue;
            };
            if Self::is_write(&request) {
                self.log(|| format!("late write of {session:#x} xid={}: {request:?}", header.xid));
                let caller = Caller { session, authed };
                self.dispatch(now, NOWHERE, caller, header.xid, request);
            }
        }
    }

    pub(super) fn unimplemented(&mut self, conn: ConnId, xid: i32) {
        self.reply(conn, xid, -1, Err(ErrorCode::Unimplemented));
        self.close_conn(conn);
    }

    pub(super) fn is_write(req: &Request) -> bool {
        matches!(
            req,
            Request::Create(_)
                | Request::Create2(_)
                | Request::CreateContainer(_)
                | Request::CreateTtl(_)
                | Request::Delete(_)
                | Request::SetData(_)
                | Request::SetAcl(_)
                | Request::Check(_)
                | Request::Multi(_)
        )
    }

    pub(super) fn write(
        &mut self,
        now: Instant,
        caller: Caller,
        req: Request,
        zxid: i64,
    ) -> Result<Response, ErrorCode> {
        self.acting = caller.session;
        match req {
            Request::Create(c) => self
                .create(now, caller, &c, false, zxid)
                .map(|(path, _)| Response::Path(path)),
            Request::Create2(c) => self
                .create(now, caller, &c, false, zxid)
                .map(|(path, stat)| Response::Created { path, stat }),
            Request::CreateContainer(c) => self
                .create(now, caller, &c, true, zxid)
                .map(|(path, stat)| Response::Created { path, stat }),
            Request::CreateTtl(_) => Err(ErrorCode::Unimplemented),
            Request::Delete(p) => self
                .delete(&p.path, p.version, zxid)
                .map(|_| Response::Empty),
            Request::SetData(s) => self
                .set_data(now, &s.path, &s.data, s.version, zxid)
                .map(Response::Stat),
            Request::SetAcl(s) => self.set_acl(&s.path, &s.acl, s.version),
            Request::Multi(ops) => Ok(Response::Multi(self.multi(now, caller, &ops, zxid))),
            _ => Err(ErrorCode::Unimplemented),
        }
    }

    pub(super) fn read(
        &mut self,
        conn: ConnId,
        session: i64,
        req: Request,
    ) -> Result<Response, ErrorCode> {
        match req {
            Request::Exists(p) => {
                if p.watch {
                    self.add_watch(Table::Data, &p.path, conn, Mode::Standard);
                }
                self.exists(&p.path)
                    .map(Response::Stat)
                    .ok_or(ErrorCode::NoNode)
            }
            Request::GetData(p) => {
                let node = self.tree.get(&p.path).ok_or(ErrorCode::NoNode)?;
                let resp = Response::Data {
                    data: node.data.clone(),
                    stat: Self::stat_of(node),
                };
                if p.watch {
                    self.add_watch(Table::Data, &p.path, conn, Mode::Standard);
                }
                Ok(resp)
            }
            Request::GetChildren(p) => self.get_children(conn, p, false),
            Request::GetChildren2(p) => self.get_children(conn, p, true),
            Request::GetAcl(path) => {
                let node = self.tree.get(&path).ok_or(ErrorCode::NoNode)?;
                Ok(Response::Acl {
                    acl: node.acl.clone(),
                    stat: Self::stat_of(node),
                })
            }
            Request::Sync(path) => Ok(Response::Path(path)),
            Request::GetEphemerals(prefix) => Ok(Response::Children(
                self.ephemerals_of(session)
                    .into_iter()
                    .filter(|p| p.starts_with(&prefix))
                    .collect(),
            )),
            Request::GetAllChildrenNumber(path) => {
                if !self.tree.contains_key(&path) {
                    return Err(ErrorCode::NoNode);
                }
                let n = self
                    .tree
                    .keys()
                    .filter(|k| k.as_str() != path && is_under(k, &path))
                    .count();
                Ok(Response::Count(i32::try_from(n).unwrap_or(i32::MAX)))
            }
            Request::AddWatch(a) => {
                let mode = match a.mode {
                    AddWatchMode::Persistent => Mode::Persistent,
                    AddWatchMode::PersistentRecursive => Mode::Recursive,
                    AddWatchMode::Unknown(_) => return Err(ErrorCode::BadArguments),
                };
                self.add_watch(Table::Data, &a.path, conn, mode);
                self.add_watch(Table::Child, &a.path, conn, mode);
                Ok(Response::Status(ErrorCode::Ok))
            }
            Request::RemoveWatches(w) => self
                .remove_watches(conn, &w.path, w.kind, true)
                .map(|_| Response::Empty),
            Request::CheckWatches(w) => self
                .remove_watches(conn, &w.path, w.kind, false)
                .map(|_| Response::Empty),
            _ => Err(ErrorCode::Unimplemented),
        }
    }

    fn get_children(
        &mut self,
        conn: ConnId,
        p: jute::PathWatch,
        two: bool,
    ) -> Result<Response, ErrorCode> {
        let node = self.tree.get(&p.path).ok_or(ErrorCode::NoNode)?;
        let children = self.ordered_children(node);
        let stat = Self::stat_of(node);
        if p.watch {
            self.add_watch(Table::Child, &p.path, conn, Mode::Standard);
        }
        let children = children.into();
        Ok(if two {
            Response::Children2 { children, stat }
        } else {
            Response::Children(children)
        })
    }

    fn ordered_children(&self, node: &Node) -> Vec<String> {
        let mut names: Vec<String> = node.children.iter().cloned().collect();
        if self.child_order_seed != 0 {
            let key = |name: &String| {
                let mut h = self.child_order_seed;
                for b in name.bytes() {
                    h = splitmix(h ^ u64::from(b));
                }
                h
            };
            names.sort_by_cached_key(key);
        }
        names
    }
}
