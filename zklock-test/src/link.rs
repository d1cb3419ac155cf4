//! A client's way to its servers, with faults on it: the client under test
//! connects through a `ClientLink` instead of to the servers directly.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Mutex;
use std::time::Duration;

use crate::expire::expire_session;
use crate::proxy::{Direction, Handshake, Proxy};

/// Fault proxies in front of a server or an ensemble, one per server, for
/// the clients of one test: connect a client to
/// [`ClientLink::connect_string`], then drop, stall, delay or black-hole
/// its connection, or expire its session.
///
/// What a holder's guard (`zklock::LockGuard::state`) reports after each
/// fault, with `T` its session's negotiated timeout, and the tests in
/// zklock's repository that fail when it does not (as `file::function`,
/// or a simulator invariant as `invariant:` and the words of its
/// violation; a timing names the check of each side, not early and not
/// late):
///
/// | fault | the guard | checked by |
/// |---|---|---|
/// | [`drop_connections`](ClientLink::drop_connections) | `Suspended` at once, `Held` again once the client has reconnected and read its node (well within `T`) | the order Held, Suspended, Held on the same session, nobody else let in: `zklock-test/tests/failover/session.rs::a_dropped_connection_suspends_the_holder_then_it_holds_again`; `Suspended` not late, in the library: `invariant:says Held with no connection`, and on the link itself (within `T/4`): `zklock-test/tests/failover/session.rs::a_dropped_connection_suspends_at_once_and_holds_again_well_within_the_timeout`; `Held` again not early: `invariant:Held again after Suspended without reading {node}`; not late: within `T` only (a guard past `T` says `Lost` and the test's wait for `Held` fails), "well within" (by `T/2`): `zklock-test/tests/failover/session.rs::a_dropped_connection_suspends_at_once_and_holds_again_well_within_the_timeout` |
/// | [`expire_session`](ClientLink::expire_session) | `Suspended` at once, `Lost` (`LossReason::SessionExpired`) when the client reconnects and hears it | `zklock-test/tests/failover/session.rs::an_expired_session_loses_the_lock_and_frees_it_at_once` (the node gone when `expire_session` returns; Held, Suspended, Lost; the reason); the times: `zklock-test/tests/failover/session.rs::an_expired_session_suspends_the_holder_at_once_and_loses_it_at_once_after` (not early: nothing before the call; not late: `Suspended` and `Lost` each within `T/2` of it, where a silent fault takes `3T/4`) |
/// | [`stall`](ClientLink::stall), [`blackhole`](ClientLink::blackhole) | `Held` until `3T/4` after the last answer the leader must have seen, then `Suspended`; `Lost` (`NoContact`) at `T`. [`heal`](ClientLink::heal) before then: `Held` again; healed after `Lost` while the server still keeps the session, the node stays until the guard is dropped | the states and the reason: `zklock-test/tests/failover/session.rs::a_stall_healed_in_time_suspends_then_holds_again`, `zklock-test/tests/failover/session.rs::a_blackhole_healed_in_time_suspends_then_holds_again`, `zklock-test/tests/failover/session.rs::a_stall_past_the_session_timeout_loses_the_lock`; `3T/4` and `T`, not early and not late, on virtual time: `proto/src/session/tests/leader_check.rs::an_answered_sync_proves_only_the_touches_answered_the_gap_before_it_was_sent`, `proto/src/session/tests/leader_check.rs::pings_answered_without_the_leader_suspend_then_lose_the_session`; `Lost` through a real black hole, not early by more than `T/3`, not later than `2T`: `tests/log_capture/cuts.rs::session_expired_while_blackholed_is_reported_and_never_replaced`; the node kept after `Lost` (the server stopped rather than the link): `tests/zookeeper/recipes/no_contact.rs::a_holder_lost_for_no_contact_keeps_others_out_until_its_guard_goes`; through this link, `Suspended` in `[T/4, 3T/4]` and `Lost` in `[T/2, T]` after the stall began: `zklock-test/tests/failover/session.rs::a_stall_past_the_session_timeout_loses_the_lock` |
/// | [`delay`](ClientLink::delay) `d` | `Held` while a round trip, `2d` plus the link's own, stays within `T/8` (zklock's docs/GUARANTEES.md); a longer delay is a stall. The `2d` holds for concurrent requests too: each chunk waits `d`, not for the chunks before it | the added latency, four callers at once, not early (at least `2d`) and not late (at most `2d`, the link's own and `d/4`), the holder `Held` throughout: `zklock-test/tests/failover/delay.rs::a_delay_adds_twice_itself_to_each_round_trip_of_concurrent_callers`; `Held` for `T` under a short delay: `zklock-test/tests/failover/session.rs::a_short_delay_leaves_the_holder_held`; a cleared delay delivers at once: `zklock-test/tests/failover/delay.rs::clearing_a_delay_delivers_what_is_on_the_way_at_once`; the `T/8` bound itself, both sides, on virtual time: `proto/src/session/tests/leader_check.rs::a_steady_round_trip_of_an_eighth_of_the_timeout_is_healthy_and_no_more`; a longer delay is a stall (at `T/8` each way: `Suspended` in `[3T/8, 3T/4]` and `Lost`, `NoContact`, in `[5T/8, T]` after it began): `zklock-test/tests/failover/delay.rs::a_delay_past_the_bound_suspends_then_loses_the_holder_as_a_stall_does` |
/// | [`refuse`](ClientLink::refuse) | nothing while connected; a client that must reconnect cannot | `zklock-test/tests/failover/session.rs::a_refusing_server_keeps_a_dropped_holder_suspended_until_it_accepts`; open connections left alone, at the proxy: `testkit/tests/servers_and_proxy/proxy.rs::proxy_refuse_closes_new_connections_only`; a connected holder's guard `Held` for `3T/2` under `refuse`: `zklock-test/tests/failover/session.rs::a_refusing_link_leaves_a_connected_holder_held` |
///
/// Dropping the link closes every connection through it.
pub struct ClientLink {
    proxies: Vec<Proxy>,
    /// The connect string's chroot suffix (`/app`), if any.
    chroot: String,
    /// Whether bytes were dropped since the last heal.
    lossy: Mutex<bool>,
}

impl ClientLink {
    /// A link in front of the servers of `connect_string`
    /// (`host:port[,host:port...][/chroot]`, as a server's or ensemble's
    /// `connect_string()` gives). Panics if an address cannot be resolved.
    pub fn start(connect_string: &str) -> ClientLink {
        let (hosts, chroot) = match connect_string.find('/') {
            Some(at) => connect_string.split_at(at),
            None => (connect_string, ""),
        };
        let proxies = hosts
            .split(',')
            .map(|host| Proxy::start(resolve(host.trim())))
            .collect();
        ClientLink {
            proxies,
            chroot: chroot.to_owned(),
            lossy: Mutex::new(false),
        }
    }

    /// Where the client under test connects: the proxies, in the order of
    /// the servers they stand for, and the chroot.
    pub fn connect_string(&self) -> String {
        let hosts: Vec<String> = self.proxies.iter().map(Proxy::connect_string).collect();
        format!("{}{}", hosts.join(","), self.chroot)
    }

    /// Closes every connection through the link now, on both sides, like a
    /// server that went away: the client reconnects (through the link) at
    /// once. Its session survives.
    pub fn drop_connections(&self) {
        for proxy in &self.proxies {
            proxy.cut_all();
        }
    }

    /// Expires the session of the client that last connected through the
    /// link, now ([`expire_session`](crate::expire_session)): its ephemeral
    /// nodes are gone when this returns, its connection is dropped, and it
    /// learns of the expiry when it reconnects. Panics if no session went
    /// through the link, or the servers cannot close it.
    pub fn expire_session(&self) {
        let session = self.last_session().unwrap_or_else(|| {
            panic!("no session went through this ClientLink: connect the client to link.connect_string()")
        });
        // The server that granted it first; any member of an ensemble will do.
        let mut servers = vec![session.server];
        servers.extend(
            self.proxies
                .iter()
                .map(Proxy::upstream)
                .filter(|s| *s != session.server),
        );
        let mut errors = Vec::new();
        for server in servers {
            match expire_session(server, session.session_id, &session.password) {
                Ok(()) => return,
                Err(e) => errors.push(format!("{server}: {e}")),
            }
        }
        panic!(
            "could not expire session {:#x}: {}",
            session.session_id,
            errors.join("; ")
        );
    }

    /// The newest session a server granted through this link: its id
    /// (`zklock::Client::session_id`), password, timeout and server.
    pub fn last_session(&self) -> Option<Handshake> {
        self.proxies
            .iter()
            .filter_map(Proxy::last_handshake_stamped)
            .max_by_key(|(stamp, _)| *stamp)
            .map(|(_, seen)| seen)
    }

    /// Holds every byte both ways, on open and new connections, until
    /// [`ClientLink::heal`], then delivers them in order: a network (or a
    /// server) that stopped answering without closing anything.
    pub fn stall(&self) {
        for proxy in &self.proxies {
            proxy.stall();
        }
    }

    /// Drops every byte both ways; connections stay open and new ones are
    /// accepted and hear nothing. [`ClientLink::heal`] closes the
    /// connections that lost bytes.
    pub fn blackhole(&self) {
        *self.lossy.lock().unwrap_or_else(|p| p.into_inner()) = true;
        for proxy in &self.proxies {
            proxy.blackhole(Direction::Both);
        }
    }

    /// Adds `delay` to the way of every chunk of bytes, in each direction
    /// (zero: none): a latency, as of a long wire, not a queue. Each chunk
    /// leaves `delay` after it arrived, however many others are on their
    /// way (their delays overlap), so every request's round trip takes
    /// `2 * delay` more than the link's own, for one caller or many at
    /// once; throughput is not limited below 1 MiB per `delay` in each
    /// direction (beyond that the sender is held back and waits longer).
    ///
    /// Chunks leave in the order they came. A new delay applies to the
    /// chunks that arrive after it is set (after a shorter one, they still
    /// leave after the older ones); zero, or [`ClientLink::heal`], delivers
    /// what is on its way at once, in order. A [stall](ClientLink::stall)
    /// holds, and a [black hole](ClientLink::blackhole) drops, the bytes on
    /// their way too.
    pub fn delay(&self, delay: Duration) {
        for proxy in &self.proxies {
            proxy.set_delay(delay);
        }
    }

    /// While true, new connections are accepted and closed at once (open
    /// ones are left alone): a server that is down.
    pub fn refuse(&self, refuse: bool) {
        for proxy in &self.proxies {
            proxy.refuse(refuse);
        }
    }

    /// Ends every fault: stalled and delayed bytes are delivered at once, in
    /// order, and connections that
    /// lost bytes to [`ClientLink::blackhole`] are closed (TCP would have
    /// reset them by now), so the client reconnects cleanly.
    pub fn heal(&self) {
        let mut lossy = self.lossy.lock().unwrap_or_else(|p| p.into_inner());
        for proxy in &self.proxies {
            proxy.clear();
            if *lossy {
                proxy.cut_all();
            }
        }
        *lossy = false;
    }

    /// The proxies, in the order of the servers they stand for, for faults
    /// on one server's way only or in one direction ([`Proxy`]).
    pub fn proxies(&self) -> &[Proxy] {
        &self.proxies
    }
}

fn resolve(host: &str) -> SocketAddr {
    host.to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .unwrap_or_else(|| panic!("ClientLink: cannot resolve {host:?}"))
}
