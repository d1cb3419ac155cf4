//! Planned actions: what a test or the user asked of a client at a time
//! (acquire, release, cancel, a leader latch), the server's own moves, and
//! the faults the plan injects, as they happen.

use super::*;
use zklock::recipes::PendingSet;

impl World {
    pub(super) fn act(&mut self, action: Action) {
        let now = self.now;
        match action {
            Action::Acquire {
                client,
                lock,
                wait,
                hold,
                cancel_after,
            } => {
                let reader = self.rng.chance(1, 2);
                let c = &mut self.clients[client];
                let id = c.next_id;
                c.next_id += 1;
                // A try is a short wait here: the public try_lock blocks.
                let deadline = match wait {
                    Wait::Forever => None,
                    Wait::For(d) => Some(now + d),
                    Wait::Try => Some(now + Duration::from_millis(1)),
                };
                // Every third one through the client's PendingSet, every
                // fifth on lock 0 or 2 a multi-lock over both. No draw:
                // seeds replay as before.
                let in_set = id % 3 == 0;
                let multi = client::MULTI_LOCKS.contains(&lock) && id % 5 == 4;
                // Those drawn on lock 2 through the multi-lock that names
                // its locks in the other order.
                let reversed = multi && lock == client::MULTI_LOCKS_REVERSED[0];
                // Every third other one on the batch lock through the
                // client's BatchMutex, half of those with a cancel token.
                let batch = lock == client::BATCH_LOCK && !multi && id % 3 == 1;
                let lock = if multi { client::MULTI_LOCKS[0] } else { lock };
                // Every other remaining one on locks 0 to 2 for one of
                // the client's threads (re-entry, refusals).
                // A thread still inside a call makes no other (it is
                // blocked in it): the call is then an ordinary one.
                let thread = (client::THREAD_LOCKS.contains(&lock)
                    && !in_set
                    && !multi
                    && !batch
                    && id % 2 == 1)
                    .then_some((id as usize / 2) % client::THREADS)
                    .filter(|&t| !c.thread_in_call(t));
                let (handle, reader) = match (&c.locks[lock], in_set) {
                    (SimLock::Mutex(_) | SimLock::Rw(_), _) if thread.is_some() => {
                        let reader = reader && matches!(c.locks[lock], SimLock::Rw(_));
                        let on = thread.unwrap_or(0);
                        (c.thread_call(lock, on, reader, deadline), reader)
                    }
                    _ if reversed => (Handle::Multi(c.multi_reversed.start_lock(deadline)), false),
                    _ if multi => (Handle::Multi(c.multi.start_lock(deadline)), false),
                    _ if batch && id % 2 == 0 => {
                        let token = CancelToken::new();
                        let waiter = c.batch.start_lock_cancellable(deadline, token.clone());
                        (Handle::Batch(waiter, Some(token)), false)
                    }
                    _ if batch => (Handle::Batch(c.batch.start_lock(deadline), None), false),
                    (SimLock::Election(e), _) => {
                        (Handle::Pending(e.start_campaign(deadline)), false)
                    }
                    (SimLock::Mutex(m), true) => {
                        (Handle::InSet(c.set.start_lock(m, deadline)), false)
                    }
                    (SimLock::Mutex(m), false) => (Handle::Pending(m.start_lock(deadline)), false),
                    (SimLock::Rw(rw), true) if reader => {
                        (Handle::InSet(c.set.start_read(rw, deadline)), true)
                    }
                    (SimLock::Rw(rw), true) => {
                        (Handle::InSet(c.set.start_write(rw, deadline)), false)
                    }
                    (SimLock::Rw(rw), false) if reader => {
                        (Handle::Pending(rw.start_read(deadline)), true)
                    }
                    (SimLock::Rw(rw), false) => (Handle::Pending(rw.start_write(deadline)), false),
                    // Leases share like readers; their own bound is checked.
                    (SimLock::Lease(s), _) => (Handle::Pending(s.start_acquire(deadline)), true),
                };
                c.attempts.insert(
                    id,
                    Tracked {
                        reader,
                        thread,
                        ..Tracked::waiting(lock, now, deadline, hold, handle)
                    },
                );
                // A batch waiter comes with a sibling, another local thread
                // arriving at once, so that turns pass on inside one hold.
                if batch {
                    let sibling = c.next_id;
                    c.next_id += 1;
                    let handle = Handle::Batch(c.batch.start_lock(deadline), None);
                    c.attempts
                        .insert(sibling, Tracked::waiting(lock, now, deadline, hold, handle));
                }
                let generation = c.generation;
                let kind = match (reader, multi, lock) {
                    (true, _, _) => " (read)",
                    _ if reversed => " (multi-lock with lock 2, named 2 then 0)",
                    (_, true, _) => " (multi-lock with lock 2)",
                    (_, _, ELECTION_LOCK) => " (campaign)",
                    _ if batch => " (batch)",
                    _ => "",
                };
                let on = thread
                    .map(|t| format!(" on thread {t}"))
                    .unwrap_or_default();
                self.note(|| format!("c{client}: acquire #{id} lock {lock}{kind}{on} {wait:?}"));
                // A batch waiter's deadline is its own (no core timer
                // wakes the world for it), and so is a thread's read that
                // confirms a holding: look at it then.
                if let (true, Some(d)) = (batch || thread.is_some(), deadline) {
                    self.schedule(d, Action::Look);
                }
                // A token's waiter without a planned cancel is cancelled
                // by its token 200 ms in (if it still waits then).
                let token_cancel = (batch && id % 2 == 0).then_some(Duration::from_millis(200));
                if let Some(after) = cancel_after.or(token_cancel) {
                    self.schedule(
                        now + after,
                        Action::Cancel {
                            client,
                            generation,
                            id,
                        },
                    );
                }
            }
            Action::Release {
                client,
                generation,
                id,
            } => {
                let c = &mut self.clients[client];
                if c.generation != generation {
                    return;
                }
                if let Some(t) = c.attempts.get_mut(&id) {
                    // A guard a call still uses (a fenced write, a
                    // proclaim) is let go once the call is over, as an
                    // application's thread waits for its write first.
                    if matches!(&t.handle, Handle::Shared(g) if std::sync::Arc::strong_count(g) > 1)
                    {
                        self.schedule(
                            now + Duration::from_millis(10),
                            Action::Release {
                                client,
                                generation,
                                id,
                            },
                        );
                        return;
                    }
                    if matches!(t.phase, Phase::Held { .. }) {
                        t.phase = Phase::Released;
                        // Some mutex holders (no draw: seeds replay) let go
                        // and queue again in one write, once.
                        let handle = std::mem::replace(&mut t.handle, Handle::None);
                        let (lock, hold) = (t.lock, t.hold);
                        // Now and then (no draw: seeds replay) the thread
                        // inside leaves the batch as its process's other
                        // batch waiters give up: the hold its exit kept
                        // for them must go back to the queue.
                        let waiters_leave = matches!(handle, Handle::BatchHeld(_)) && id % 4 == 1;
                        if let (Handle::Guard(guard), SimLock::Mutex(_), false, 2) =
                            (handle, &c.locks[lock], t.requeued, id % 4)
                        {
                            // Now and then through another client's mutex
                            // of that lock: its guard is not that client's
                            // to requeue, so it is released and the other
                            // client queues afresh.
                            let by = if id % 8 == 6 {
                                (client + 1) % self.clients.len()
                            } else {
                                client
                            };
                            let c = &mut self.clients[by];
                            let SimLock::Mutex(m) = &c.locks[lock] else {
                                unreachable!("every client has the same locks")
                            };
                            let deadline = now + Duration::from_millis(3000);
                            let pending = m.requeue(guard, Some(deadline));
                            let next = c.next_id;
                            c.next_id += 1;
                            let handle = Handle::Pending(pending);
                            c.attempts.insert(
                                next,
                                Tracked {
                                    requeued: by == client,
                                    ..Tracked::waiting(lock, now, Some(deadline), hold, handle)
                                },
                            );
                            self.note(|| {
                                format!("c{client}: release #{id}, requeued as c{by}#{next}")
                            });
                            return;
                        }
                        // Dropping the guard releases (without blocking); a
                        // multi-lock's guard, every part.
                        for t in c.attempts.values_mut() {
                            if matches!(t.handle, Handle::Member { of, .. } if of == id) {
                                t.phase = Phase::Released;
                                t.handle = Handle::None;
                            }
                        }
                        self.note(|| format!("c{client}: release #{id}"));
                        if waiters_leave {
                            self.batch_waiters_leave(client);
                        }
                    }
                }
            }
            Action::Cancel {
                client,
                generation,
                id,
            } => {
                let c = &mut self.clients[client];
                if c.generation != generation {
                    return;
                }
                if let Some(t) = c.attempts.get_mut(&id) {
                    if let (Phase::Waiting, Handle::Batch(_, Some(token))) = (&t.phase, &t.handle) {
                        // Through its token: the waiter says Cancelled when
                        // it is next read (this step).
                        token.cancel();
                        t.token_cancelled = true;
                        self.note(|| format!("c{client}: cancel #{id} by its token"));
                        return;
                    }
                    if t.phase == Phase::Waiting {
                        // Dropping the handle (or cancelling the key) gives
                        // the attempt up.
                        if let Handle::InSet(key) = t.handle {
                            // Now and then (no draw: seeds replay) the
                            // whole set is dropped: every key it has open
                            // is given up with it.
                            if id % 9 == 0 {
                                return self.drop_set(client);
                            }
                            assert!(c.set.cancel(key), "an open key");
                        }
                        t.handle = Handle::None;
                        t.phase = Phase::Failed(LockError::Cancelled);
                        self.note(|| format!("c{client}: cancel #{id}"));
                    }
                }
            }
            Action::LatchStart { client, generation } => {
                let c = &mut self.clients[client];
                if c.generation == generation && c.latch.is_none() {
                    let options = client::with_max_hold(&self.options);
                    let election =
                        Election::with_options(&c.client, LATCH_PATH, latches::LATCH_ID, options)
                            .expect("an election");
                    c.latch = Some(election.latch());
                    self.note(|| format!("c{client}: latch starts"));
                }
            }
            Action::LatchDrop { client, generation } => {
                if self.clients[client].generation == generation {
                    self.latch_stop(client);
                }
            }
            Action::Fenced {
                client,
                generation,
                id,
                kind,
            } => {
                if self.clients[client].generation == generation {
                    self.fenced_write(client, id, kind);
                }
            }
            Action::Revoke {
                by,
                client,
                generation,
                id,
                by_holder,
            } => self.revoke(by, client, generation, id, by_holder),
            Action::Proclaim {
                client,
                generation,
                id,
            } => {
                if self.clients[client].generation == generation {
                    self.proclaim(client, id);
                }
            }
            Action::Observe { client } => self.observe(client),
            Action::ThreadCall {
                client,
                generation,
                lock,
                thread,
                reader,
                hold,
            } => {
                let request_timeout = self.request_timeout(client);
                let c = &mut self.clients[client];
                if c.generation != generation || c.thread_in_call(thread) {
                    return;
                }
                let id = c.next_id;
                c.next_id += 1;
                // Every fifth a try (its deadline already past at its first
                // poll, as `try_lock` calls): one round trip, bounded by
                // the request timeout, which the checker holds it to.
                let is_try = id % 5 == 0;
                let (asked, deadline) = if is_try {
                    (now, now + request_timeout + Duration::from_millis(50))
                } else {
                    let d = now + hold.max(Duration::from_millis(1));
                    (d, d)
                };
                let handle = c.thread_call(lock, thread, reader, Some(asked));
                let t = Tracked::waiting(lock, now, Some(deadline), hold, handle);
                c.attempts.insert(
                    id,
                    Tracked {
                        reader,
                        thread: Some(thread),
                        is_try,
                        ..t
                    },
                );
                let kind = match (reader, is_try) {
                    (true, true) => " (read, a try)",
                    (true, false) => " (read)",
                    (false, true) => " (a try)",
                    (false, false) => "",
                };
                self.note(|| {
                    format!("c{client}: acquire #{id} lock {lock}{kind} on thread {thread} again")
                });
                self.schedule(deadline, Action::Look);
            }
            Action::Look => {}
            Action::AppWrite { client, n } => self.app_write(client, n),
            Action::Probe {
                lock,
                wait,
                tries,
                left,
                free_since,
            } => self.probe(lock, wait, tries, left, free_since),
            Action::CloseConn(conn) => {
                self.server.close_connection(conn);
                self.server_output();
            }
            Action::AdminDeletePath(path) => {
                if self.server.delete_as_admin(now, &path) {
                    self.note(|| format!("third party deletes {path}"));
                }
                self.server_output();
            }
            Action::Fault(fault) => {
                self.stats.faults += 1;
                self.note(|| format!("fault {fault:?}"));
                // A holder's fenced write in flight as the link goes.
                self.fenced_before_fault(&fault);
                self.fault(fault);
            }
        }
    }

    /// Client `c` drops its `PendingSet` (and starts a new one): every
    /// acquisition waiting in it is given up, a grant not yet read
    /// included.
    /// Every batch waiter of client `c` still waiting gives up at once
    /// (its handle dropped), right after the thread inside let go.
    fn batch_waiters_leave(&mut self, c: usize) {
        let mut given_up = Vec::new();
        for (id, t) in &mut self.clients[c].attempts {
            if let (Phase::Waiting, Handle::Batch(..)) = (&t.phase, &t.handle) {
                t.handle = Handle::None;
                t.phase = Phase::Failed(LockError::Cancelled);
                given_up.push(*id);
            }
        }
        if !given_up.is_empty() {
            self.stats.batch_leaves += 1;
            self.note(|| format!("c{c}: its batch waiters {given_up:?} give up"));
        }
    }

    fn drop_set(&mut self, c: usize) {
        self.stats.set_drops += 1;
        let client = &mut self.clients[c];
        drop(std::mem::replace(&mut client.set, PendingSet::new()));
        let mut given_up = Vec::new();
        for (id, t) in &mut client.attempts {
            if let (Phase::Waiting, Handle::InSet(_)) = (&t.phase, &t.handle) {
                t.handle = Handle::None;
                t.phase = Phase::Failed(LockError::Cancelled);
                given_up.push(*id);
            }
        }
        self.note(|| format!("c{c}: drops its pending set, giving up {given_up:?}"));
    }
}
