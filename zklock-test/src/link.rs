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
/// fault, with `T` its session's negotiated timeout:
///
/// | fault | the guard |
/// |---|---|
/// | [`drop_connections`](ClientLink::drop_connections) | `Suspended` at once, `Held` again once the client has reconnected and read its node (well within `T`) |
/// | [`expire_session`](ClientLink::expire_session) | `Suspended` at once, `Lost` (`LossReason::SessionExpired`) when the client reconnects and hears it |
/// | [`stall`](ClientLink::stall), [`blackhole`](ClientLink::blackhole) | `Held` until `3T/4` after the last answer the leader must have seen, then `Suspended`; `Lost` (`NoContact`) at `T`. [`heal`](ClientLink::heal) before then: `Held` again; healed after `Lost` while the server still keeps the session, the node stays until the guard is dropped |
/// | [`delay`](ClientLink::delay) `d` | `Held` while a round trip, `2d` plus the link's own, stays within `5T/24` (zklock's docs/GUARANTEES.md); a longer delay is a stall. The `2d` holds for concurrent requests too: each chunk waits `d`, not for the chunks before it |
/// | [`refuse`](ClientLink::refuse) | nothing while connected; a client that must reconnect cannot |
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
