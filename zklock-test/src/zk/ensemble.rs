//! An ensemble of members on loopback ports, with a leader to kill and
//! members to restart.

use std::collections::HashMap;
use std::fs;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use super::four_letter::{parse_mode, try_four_letter};
use super::jvm::{tail_of_file, Node, StartFailure, POLL_INTERVAL, QUORUM_MAIN};
use super::{check_chosen_ports, start_retrying, ZkOptions, READY_TIMEOUT};
use crate::proxy::{Direction, Proxy};
use crate::{free_ports, scratch_dir};

/// A ZooKeeper ensemble of `n` members on 127.0.0.1 (`initLimit=5`,
/// `syncLimit=2`). Members are indexed from 0; member `i` has `myid` `i + 1`.
///
/// Starting 3 members takes seconds; re-electing after the leader is killed
/// and restarting a member take less (bench/FIGURES.md has the figures).
///
/// What a holder's guard (`zklock::LockGuard::state`) reports after each
/// fault, with `T` its session's negotiated timeout, when its client's
/// connect string names every member (docs/PARTITION.md in zklock's
/// repository derives the timings), and the tests in zklock's repository
/// that fail when it does not (as `file::function`; a timing names the
/// check of each side, not early and not late):
///
/// | fault | the guard | checked by |
/// |---|---|---|
/// | [`kill`](ZkEnsemble::kill) the holder's member | `Suspended` at once; `Held` again once the client reached another member and read its node (well within `T`) | the order and the same session: `zklock-test/tests/failover/ensemble.rs::killed_members_and_a_killed_leader_leave_the_holder_holding`; `Suspended` at once: within `T/2` of the kill in that test (a silent fault takes `3T/4`; not early: `Held` up to the kill); `Held` within `T` (a guard past `T` says `Lost`, and the test's wait for `Held` fails) |
/// | [`kill`](ZkEnsemble::kill) the leader | `Suspended` when its member drops its clients (at once, as every follower loses the leader); `Held` again after the election, if it ends within `T` | `zklock-test/tests/failover/ensemble.rs::killed_members_and_a_killed_leader_leave_the_holder_holding` (the order, the same session, the lock still taken; `Suspended` within `T/2` of the kill, and `Held` within `T`, as above) |
/// | [`kill`](ZkEnsemble::kill) a majority | `Suspended` at once; `Lost` (`NoContact`) at `T` | the order and the reason: `zklock-test/tests/failover/ensemble.rs::killed_members_and_a_killed_leader_leave_the_holder_holding`; `Lost` at `T`, not early and not late, on virtual time: `proto/src/session/tests/liveness.rs::no_contact_for_the_session_timeout_reports_lost`; on the ensemble, in `zklock-test/tests/failover/ensemble.rs::killed_members_and_a_killed_leader_leave_the_holder_holding`: `Suspended` within `T/2` of the kills, `Lost` between `2T/3` and `3T/2` after them (the last proof of life at most a sync's `T/6` and a round trip before) |
/// | [`restart`](ZkEnsemble::restart) | nothing for a holder elsewhere; the member serves again, with its data | nothing for the holder, only at the moment `restart` returns: `zklock-test/tests/failover/ensemble.rs::killed_members_and_a_killed_leader_leave_the_holder_holding`; the member serving again with its data: `zklock-test/tests/failover/ensemble.rs::killed_members_and_a_killed_leader_leave_the_holder_holding` (a client of the restarted member alone reads the holder's node, created before the crash); a standalone server's restart: `zklock-test/tests/failover/session.rs::a_server_killed_and_restarted_in_time_gives_the_holder_its_lock_back` |
/// | [`cut_link`](ZkEnsemble::cut_link) between the leader and the holder's follower | `Held` until the follower gives up on the leader (`syncLimit` ticks) or the holder's leader check fails (`3T/4` after the last answer the leader must have seen), whichever is first; then `Suspended`, and `Held` again on another member. Never `Held` while the leader may have expired the session | `Suspended`, then `Held` on another member, same session: `zklock-test/tests/failover/ensemble.rs::a_follower_cut_off_from_the_leader_silently_then_with_resets`; never `Held` past the leader's expiry: `tests/zookeeper/partition/cut_off.rs::mutex_holder_cut_off_from_the_leader_lets_go_before_the_next_is_granted` and its twins; `3T/4` on virtual time: `proto/src/session/tests/leader_check.rs::an_answered_sync_proves_only_the_touches_answered_the_gap_before_it_was_sent`; `Held` until then (not early: not `Suspended` before `syncLimit - 1` ticks after the cut) and `Suspended` by `3T/4` (not late) on the ensemble: `zklock-test/tests/failover/ensemble.rs::a_follower_cut_off_from_the_leader_silently_then_with_resets` |
/// | [`reset_link`](ZkEnsemble::reset_link) between the leader and the holder's follower | `Suspended` at once (the follower drops its clients), `Held` again on another member | `zklock-test/tests/failover/ensemble.rs::a_follower_cut_off_from_the_leader_silently_then_with_resets` (the order, another member; `Suspended` within `T/2` of the reset, where a silent fault takes `3T/4`) |
/// | [`heal_link`](ZkEnsemble::heal_link), [`heal_all`](ZkEnsemble::heal_all) | the cut-off member rejoins; nothing for the holder | the member rejoins: `tests/zookeeper/partition/recovery.rs::cutting_the_leader_off_from_both_followers_elects_another`; nothing for the holder, at the moment the ensemble is ready again: `zklock-test/tests/failover/ensemble.rs::a_follower_cut_off_from_the_leader_silently_then_with_resets` |
pub struct ZkEnsemble {
    members: Vec<Node>,
    /// Fault proxies on the member links, for [`ZkEnsemble::start_with_links`].
    links: Option<MemberLinks>,
}

/// What a link between two members is doing now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// Bytes flow.
    Up,
    /// Silent: bytes are dropped both ways, connections stay open, new ones
    /// are accepted and go nowhere.
    Cut,
    /// Connections were closed and new ones are refused.
    Reset,
    /// Bytes are held, neither forwarded nor dropped, until healed.
    Stalled,
}

/// The proxies through which members dial each other: for `from != to`,
/// `proxies[&(from, to)]` is (quorum, election), what `from`'s `zoo.cfg`
/// names as `to`'s ports.
struct MemberLinks {
    proxies: HashMap<(usize, usize), (Proxy, Proxy)>,
    /// Each member's real quorum and election ports.
    real: Vec<(u16, u16)>,
    states: Mutex<HashMap<(usize, usize), LinkState>>,
}

impl ZkEnsemble {
    /// Starts `n` members with `tickTime=2000` and waits for a leader.
    pub fn start(n: usize) -> ZkEnsemble {
        Self::start_with_options(n, &ZkOptions::default())
    }

    /// Starts `n` members with the given `tickTime` (milliseconds).
    pub fn start_with(n: usize, tick_ms: u64) -> ZkEnsemble {
        Self::start_with_options(n, &ZkOptions::new().tick_ms(tick_ms))
    }

    /// Starts `n` members and waits (30 s at most, then panics with every
    /// member's log tail) until each reports `Mode: leader` or `Mode: follower`.
    pub fn start_with_options(n: usize, options: &ZkOptions) -> ZkEnsemble {
        assert!(n >= 1, "an ensemble needs at least one member");
        check_chosen_ports(options, n);
        start_retrying(options, || {
            let ensemble = Self::spawn_members(n, options, None);
            ensemble.wait_ready_within(READY_TIMEOUT).map(|()| ensemble)
        })
    }

    /// Starts `n` members whose quorum and election links all go through
    /// fault proxies, so that the link between any two members can be cut,
    /// reset, stalled and healed ([`ZkEnsemble::cut_link`], ...), with
    /// `syncLimit` set to `sync_limit` ticks (`initLimit=5`).
    ///
    /// Each member has a static `zoo.cfg` of its own (reconfiguration stays
    /// off, as by default in 3.8): its own line names its real ports, every
    /// other line the proxies it dials that member through. A member that
    /// is dialled by a lower-numbered one dials back to the address that
    /// one announced; the election proxies rewrite that announcement (see
    /// [`Proxy::start_election_link`]) so that the call back also takes a
    /// proxy.
    pub fn start_with_links(n: usize, options: &ZkOptions, sync_limit: u32) -> ZkEnsemble {
        assert!(n >= 2, "links need at least two members");
        check_chosen_ports(options, n);
        start_retrying(options, || {
            let ensemble = Self::spawn_members(n, options, Some(sync_limit));
            ensemble.wait_ready_within(READY_TIMEOUT).map(|()| ensemble)
        })
    }

    fn spawn_members(n: usize, options: &ZkOptions, links: Option<u32>) -> ZkEnsemble {
        // client, quorum and election port for each member, all distinct.
        let ports = free_ports(3 * n);
        let secure_ports = free_ports(if options.secure { n } else { 0 });
        let real = |i: usize| (ports[3 * i + 1], ports[3 * i + 2]);
        let client_port = |i: usize| match options.client_port {
            Some(base) => base
                .checked_add(i as u16)
                .unwrap_or_else(|| panic!("client port {base} + {i} is past 65535")),
            None => ports[3 * i],
        };
        let at = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        let proxies: HashMap<(usize, usize), (Proxy, Proxy)> = match links {
            None => HashMap::new(),
            Some(_) => (0..n)
                .flat_map(|from| (0..n).map(move |to| (from, to)))
                .filter(|(from, to)| from != to)
                .map(|(from, to)| {
                    let (quorum, election) = real(to);
                    let link = (
                        Proxy::start(at(quorum)),
                        Proxy::start_election_link(at(election)),
                    );
                    ((from, to), link)
                })
                .collect(),
        };
        // The `server.*` lines as member `me` sees them.
        let servers = |me: usize| -> String {
            (0..n)
                .map(|i| {
                    let (quorum, election) = match proxies.get(&(me, i)) {
                        Some((q, e)) => (q.addr().port(), e.addr().port()),
                        None => real(i),
                    };
                    format!("server.{}=127.0.0.1:{quorum}:{election}\n", i + 1)
                })
                .collect()
        };
        let sync_limit = links.unwrap_or(2);
        let members: Vec<Node> = (0..n)
            .map(|i| {
                let dir = scratch_dir(&format!("ens-m{}", i + 1));
                let data_dir = dir.join("data");
                fs::create_dir_all(&data_dir)
                    .unwrap_or_else(|e| panic!("creating {}: {e}", data_dir.display()));
                fs::write(data_dir.join("myid"), format!("{}\n", i + 1))
                    .unwrap_or_else(|e| panic!("writing myid in {}: {e}", data_dir.display()));
                let secure_port = secure_ports.get(i).copied();
                let config = format!(
                    "{}{}initLimit=5\nsyncLimit={sync_limit}\n{}",
                    options.common_config(&data_dir, client_port(i)),
                    options.secure_config(secure_port),
                    servers(i),
                );
                let mut node = Node::new(
                    &format!("member {i}"),
                    dir,
                    client_port(i),
                    QUORUM_MAIN,
                    &config,
                );
                node.set_options(options, secure_port);
                node
            })
            .collect();
        for member in &members {
            member.spawn();
        }
        let links = links.map(|_| MemberLinks {
            proxies,
            real: (0..n).map(real).collect(),
            states: Mutex::new(HashMap::new()),
        });
        ZkEnsemble { members, links }
    }

    /// Indexes of the running members whose `srvr` says `Mode: follower`.
    pub fn followers(&self) -> Vec<usize> {
        (0..self.members.len())
            .filter(|&i| self.member_mode(i).as_deref() == Some("follower"))
            .collect()
    }

    /// Cuts the link between members `a` and `b` silently, both ways, quorum
    /// and election alike: bytes stop, connections stay open, new
    /// connections are accepted and hear nothing. The members notice only
    /// by their own timeouts (a follower after `syncLimit` ticks).
    pub fn cut_link(&self, a: usize, b: usize) {
        self.set_link(a, b, LinkState::Cut, |p| p.blackhole(Direction::Both));
    }

    /// Closes every connection between `a` and `b` and refuses new ones
    /// until [`ZkEnsemble::heal_link`]: a loud partition.
    pub fn reset_link(&self, a: usize, b: usize) {
        self.set_link(a, b, LinkState::Reset, |p| {
            p.refuse(true);
            p.cut_all();
        });
    }

    /// Holds every byte between `a` and `b` (both ways) until healed, then
    /// delivers them in order: a long pause of the network.
    pub fn stall_link(&self, a: usize, b: usize) {
        self.set_link(a, b, LinkState::Stalled, Proxy::stall);
    }

    /// Lets bytes flow between `a` and `b` again. Connections that lost
    /// bytes to a cut are closed (TCP would have reset them by now), so the
    /// members reconnect cleanly; stalled bytes are delivered.
    pub fn heal_link(&self, a: usize, b: usize) {
        let was = self.link_state(a, b);
        self.set_link(a, b, LinkState::Up, |p| {
            p.clear();
            if was == LinkState::Cut {
                p.cut_all();
            }
        });
    }

    /// Heals every link ([`ZkEnsemble::heal_link`]).
    pub fn heal_all(&self) {
        let n = self.members.len();
        for a in 0..n {
            for b in a + 1..n {
                if self.link_state(a, b) != LinkState::Up {
                    self.heal_link(a, b);
                }
            }
        }
    }

    /// What the link between `a` and `b` is doing.
    pub fn link_state(&self, a: usize, b: usize) -> LinkState {
        let key = (a.min(b), a.max(b));
        let links = self.links();
        let states = links
            .states
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        states.get(&key).copied().unwrap_or(LinkState::Up)
    }

    /// Bytes forwarded so far on the link between `a` and `b` (both ways,
    /// quorum and election), and how many election hellos were rewritten:
    /// proof that the members really talk through the proxies.
    pub fn link_traffic(&self, a: usize, b: usize) -> (u64, u64) {
        let links = self.links();
        let mut bytes = 0;
        let mut hellos = 0;
        for key in [(a, b), (b, a)] {
            let (q, e) = links
                .proxies
                .get(&key)
                .unwrap_or_else(|| panic!("no link between members {a} and {b}"));
            bytes += q.bytes_forwarded(Direction::Both) + e.bytes_forwarded(Direction::Both);
            hellos += e.hellos_rewritten();
        }
        (bytes, hellos)
    }

    /// Connections a member JVM holds to another member's real quorum or
    /// election port, around the proxies, as `(from, to, remote port)`:
    /// empty when every link is cuttable.
    pub fn direct_member_connections(&self) -> Vec<(usize, usize, u16)> {
        let links = self.links();
        let mut direct = Vec::new();
        for (from, member) in self.members.iter().enumerate() {
            let Some(pid) = member.java_pid() else {
                continue;
            };
            for (_, remote) in crate::established_ports(pid) {
                for (to, &(quorum, election)) in links.real.iter().enumerate() {
                    if to != from && (remote == quorum || remote == election) {
                        direct.push((from, to, remote));
                    }
                }
            }
        }
        direct
    }

    fn links(&self) -> &MemberLinks {
        self.links
            .as_ref()
            .expect("this ensemble has no member links: start it with ZkEnsemble::start_with_links")
    }

    fn set_link(&self, a: usize, b: usize, state: LinkState, apply: impl Fn(&Proxy)) {
        assert_ne!(a, b, "a member has no link to itself");
        let links = self.links();
        for key in [(a, b), (b, a)] {
            let (q, e) = links
                .proxies
                .get(&key)
                .unwrap_or_else(|| panic!("no link between members {a} and {b}"));
            apply(q);
            apply(e);
        }
        links
            .states
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert((a.min(b), a.max(b)), state);
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Always false; an ensemble has at least one member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// `"127.0.0.1:p1,127.0.0.1:p2,..."`, every member whether running or not.
    pub fn connect_string(&self) -> String {
        self.members
            .iter()
            .map(|m| m.addr().to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `"127.0.0.1:s1,127.0.0.1:s2,..."`: every member's TLS client port.
    pub fn secure_connect_string(&self) -> String {
        let addrs: Vec<String> = self
            .members
            .iter()
            .map(|m| m.secure_addr().to_string())
            .collect();
        addrs.join(",")
    }

    /// Client address of member `i`.
    pub fn member_addr(&self, i: usize) -> SocketAddr {
        self.member(i).addr()
    }

    /// Index of the running member whose `srvr` says `Mode: leader`, if any.
    pub fn leader(&self) -> Option<usize> {
        (0..self.members.len()).find(|&i| self.member_mode(i).as_deref() == Some("leader"))
    }

    /// `Mode:` reported by member `i` (`leader`, `follower`, `standalone`, ...),
    /// or `None` if it is down or not serving (e.g. during an election).
    pub fn member_mode(&self, i: usize) -> Option<String> {
        let member = self.member(i);
        if !member.is_running() {
            return None;
        }
        try_four_letter(member.addr(), "srvr")
            .ok()
            .and_then(|answer| parse_mode(&answer))
    }

    /// Kills member `i` (SIGKILL, like a crash); its data directory is kept.
    pub fn kill(&self, i: usize) {
        self.member(i).stop();
    }

    /// Whether member `i`'s JVM is alive.
    pub fn is_running(&self, i: usize) -> bool {
        self.member(i).is_running()
    }

    /// Starts member `i` again with the same ports and data. If a majority of
    /// members is then running, waits until the ensemble is ready
    /// ([`ZkEnsemble::wait_ready`]); otherwise (no quorum possible yet) only
    /// until member `i` answers `ruok`.
    pub fn restart(&self, i: usize) {
        let member = self.member(i);
        member.restart();
        let running = (0..self.members.len())
            .filter(|&j| self.is_running(j))
            .count();
        if running * 2 > self.members.len() {
            self.wait_ready();
        } else if let Err(failure) = member.wait_answering(READY_TIMEOUT, false) {
            panic!("{}", failure.message);
        }
    }

    /// Waits (30 s at most, then panics with logs) until every running member
    /// serves as leader or follower and exactly one of them is the leader.
    pub fn wait_ready(&self) {
        if let Err(failure) = self.wait_ready_within(READY_TIMEOUT) {
            panic!("{}", failure.message);
        }
    }

    /// Like [`ZkEnsemble::wait_ready`] but returns false instead of panicking,
    /// for tests that expect the ensemble to stay unavailable.
    pub fn try_wait_ready(&self, timeout: Duration) -> bool {
        self.wait_ready_within(timeout).is_ok()
    }

    /// Four-letter word to member `i`; panics if it cannot be reached.
    pub fn four_letter(&self, i: usize, word: &str) -> String {
        let member = self.member(i);
        try_four_letter(member.addr(), word).unwrap_or_else(|e| {
            panic!(
                "four-letter word {word:?} to member {i} ({}) failed: {e}\n{}",
                member.addr(),
                member.log_tail_message()
            )
        })
    }

    /// Directory of member `i` (`zoo.cfg`, `data/myid`, `server.log`).
    pub fn member_dir(&self, i: usize) -> &Path {
        &self.member(i).dir
    }

    /// The last `lines` lines of member `i`'s log.
    pub fn log_tail(&self, i: usize, lines: usize) -> String {
        tail_of_file(&self.member(i).log_path(), lines)
    }

    fn member(&self, i: usize) -> &Node {
        self.members.get(i).unwrap_or_else(|| {
            panic!(
                "no ensemble member {i}; members are 0..{}",
                self.members.len()
            )
        })
    }

    fn wait_ready_within(&self, timeout: Duration) -> Result<(), StartFailure> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut modes = Vec::new();
            let mut died = None;
            for (i, member) in self.members.iter().enumerate() {
                if member.is_running() {
                    modes.push(self.member_mode(i));
                } else if member.was_expected_running() {
                    died = Some(i);
                }
            }
            if let Some(i) = died {
                return Err(self.failure(&format!("member {i} exited while starting")));
            }
            let serving = modes
                .iter()
                .all(|m| matches!(m.as_deref(), Some("leader" | "follower" | "standalone")));
            let leaders = modes
                .iter()
                .filter(|m| matches!(m.as_deref(), Some("leader" | "standalone")))
                .count();
            if !modes.is_empty() && serving && leaders == 1 {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(self.failure(&format!(
                    "ensemble not ready after {timeout:?}; modes of running members: {modes:?}"
                )));
            }
            thread::sleep(POLL_INTERVAL);
        }
    }

    fn failure(&self, what: &str) -> StartFailure {
        let mut message = format!("ZooKeeper ensemble: {what}\n");
        let mut port_in_use = false;
        for member in &self.members {
            message.push_str(&member.log_tail_message());
            port_in_use |= member.log_says_port_in_use();
        }
        StartFailure {
            message,
            port_in_use,
        }
    }
}
