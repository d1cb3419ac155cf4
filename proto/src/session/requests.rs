//! The request path: what callers submit is queued while no connection is
//! up, else sent with an xid of its own and remembered in flight until its
//! reply; after the session's end it is refused at once. Also the watches
//! callers let go of.

use super::*;

impl<R, W: Clone> Session<R, W> {
    /// Submits a request. `watcher`, if any, is registered when the reply
    /// says the watch was set; it receives exactly one event or one
    /// [`SessionEvent::WatchAbandoned`]. The answer always comes back as a
    /// [`SessionEvent::Reply`] carrying `handle`.
    pub fn submit(&mut self, now: Instant, request: Request, handle: R, watcher: Option<W>) {
        if self.state.is_terminal() || matches!(self.phase, Phase::Closing { .. }) {
            let reason = self.end_reason();
            self.refuse(handle, watcher, reason);
            return;
        }
        if let Request::Auth(auth) = &request {
            // Credentials are re-sent after every reconnect: once each.
            if !self.auths.contains(auth) {
                self.auths.push(auth.clone());
            }
            if self.is_open() {
                encode_request(&mut self.out, xid::AUTH, &request);
                self.mark_sent(now);
                self.auth_in_flight.push_back(Some(handle));
            } else {
                // Sent with every handshake; the caller learns of a failure
                // through the AuthFailed state.
                self.events.push_back(SessionEvent::Reply {
                    handle,
                    result: Ok(Response::Empty),
                });
            }
            return;
        }
        if self.is_open() {
            self.send(now, request, handle, watcher);
        } else {
            let mut scratch = BytesMut::new();
            let len = encode_request(&mut scratch, 0, &request);
            if len > self.config.max_frame {
                return self.refuse(
                    handle,
                    watcher,
                    RequestError::TooLarge {
                        len,
                        max: self.config.max_frame,
                    },
                );
            }
            self.queued.push_back(Queued {
                request,
                handle,
                watcher,
            });
        }
    }

    /// A persistent watch on `path` lost a watcher. Forgets the watchers
    /// `keep` rejects; once no watch of any kind remains on `path`, asks the
    /// server to drop its watches there (answered on `handle`), else answers
    /// at once. ZooKeeper 3.8 removes persistent watches only by type Any,
    /// which would also drop one-shot watches still wanted on the path; a
    /// server watch left behind is not re-armed after the next reconnect.
    pub fn release_persistent(
        &mut self,
        now: Instant,
        path: &str,
        keep: impl FnMut(&W) -> bool,
        handle: R,
    ) {
        self.watches.retain(keep);
        if self.watches.watches_path(path) || self.state.is_terminal() {
            self.events.push_back(SessionEvent::Reply {
                handle,
                result: Ok(Response::Empty),
            });
            return;
        }
        let request = Request::RemoveWatches(jute::WatchesRequest {
            path: path.to_owned(),
            kind: WatcherType::Any,
        });
        self.submit(now, request, handle, None);
    }

    /// Forgets registered watches for which `keep` says no; they are not
    /// re-armed after the next reconnect and never delivered.
    pub fn retain_watches(&mut self, keep: impl FnMut(&W) -> bool) {
        self.watches.retain(keep);
    }

    pub(super) fn take_xid(&mut self) -> i32 {
        let x = self.next_xid;
        self.next_xid = if x == i32::MAX { 1 } else { x + 1 };
        x
    }

    fn end_reason(&self) -> RequestError {
        match self.state {
            SessionState::Expired => RequestError::SessionExpired,
            SessionState::AuthFailed => RequestError::AuthFailed,
            _ => RequestError::Closed,
        }
    }

    pub(super) fn refuse(&mut self, handle: R, watcher: Option<W>, reason: RequestError) {
        if let Some(w) = watcher {
            self.events.push_back(SessionEvent::WatchAbandoned {
                watcher: w,
                reason: reason.clone(),
            });
        }
        self.events.push_back(SessionEvent::Reply {
            handle,
            result: Err(reason),
        });
    }

    pub(super) fn send(&mut self, now: Instant, request: Request, handle: R, watcher: Option<W>) {
        self.send_as(now, request, Some(handle), watcher);
    }

    pub(super) fn send_as(
        &mut self,
        now: Instant,
        request: Request,
        handle: Option<R>,
        watcher: Option<W>,
    ) {
        let mark = self.out.len();
        let xid = self.take_xid();
        let len = encode_request(&mut self.out, xid, &request);
        if len > self.config.max_frame {
            self.out.truncate(mark);
            let max = self.config.max_frame;
            if let Some(handle) = handle {
                self.refuse(handle, watcher, RequestError::TooLarge { len, max });
            }
            return;
        }
        self.mark_sent(now);
        let (path, recursive) = match &request {
            Request::Exists(p)
            | Request::GetData(p)
            | Request::GetChildren(p)
            | Request::GetChildren2(p)
                if p.watch =>
            {
                (Some(p.path.clone()), false)
            }
            Request::AddWatch(a) => (
                Some(a.path.clone()),
                a.mode == AddWatchMode::PersistentRecursive,
            ),
            _ => (None, false),
        };
        self.in_flight.push_back(InFlight {
            xid,
            op: request.op_code(),
            path,
            recursive,
            handle,
            watcher,
            sent: now,
        });
    }
}
