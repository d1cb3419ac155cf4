//! A holder whose client's other writes the server refuses stays Held on a
//! healthy ensemble: a refusal the leader ordered proves the session alive
//! as a success does (docs/PARTITION.md, "What counts as the leader's
//! word").

use super::*;

use zklock::{CreateMode, Error, ErrorCode, Op};

/// An everyday write the server refuses, sent again and again.
#[derive(Clone, Copy, Debug)]
enum Refused {
    /// Create-if-absent of a path that exists: NodeExists.
    CreateExisting,
    /// setData at an expected version the node is past: BadVersion.
    StaleSetData,
    /// Delete-if-present of a path that is gone: NoNode.
    DeleteMissing,
    /// A multi whose second op fails (NodeExists).
    FailingMulti,
}

impl Refused {
    /// Sends it once; the refusal is the expected outcome, anything else
    /// is described.
    fn send(self, client: &Client, root: &str) -> Result<(), String> {
        let taken = format!("{root}/taken");
        let outcome = match self {
            Refused::CreateExisting => client.create(&taken, b"", CreateMode::Persistent).map(drop),
            Refused::StaleSetData => client.set_data(&taken, b"x", Some(7)).map(drop),
            Refused::DeleteMissing => client.delete(&format!("{root}/missing"), None),
            Refused::FailingMulti => client
                .multi(&[
                    Op::check(&taken, None),
                    Op::create(&taken, b"", CreateMode::Persistent),
                ])
                .map(drop),
        };
        let expected = match (self, &outcome) {
            (Refused::CreateExisting, Err(Error::Server { code, .. })) => {
                *code == ErrorCode::NodeExists
            }
            (Refused::StaleSetData, Err(Error::Server { code, .. })) => {
                *code == ErrorCode::BadVersion
            }
            (Refused::DeleteMissing, Err(Error::Server { code, .. })) => *code == ErrorCode::NoNode,
            (Refused::FailingMulti, Err(Error::MultiFailed { index, code, .. })) => {
                (*index, *code) == (1, ErrorCode::NodeExists)
            }
            _ => false,
        };
        if expected {
            Ok(())
        } else {
            Err(format!("{self:?}: {outcome:?}"))
        }
    }
}

/// One held `Mutex` per kind of refused write, on a follower, T = 6 s; the
/// same client sends that write every 200 ms. Over three timeouts no guard
/// leaves Held and no session leaves Connected. Before refusals counted as
/// the leader's word, each sent write put the session's own `sync` off and
/// none proved anything: Suspended and disconnected every 3T/4.
#[test]
fn refused_writes_never_suspend_a_holder_on_a_healthy_ensemble() {
    const T: Duration = Duration::from_secs(6);
    let ens = ensemble();
    let follower = ens.member_addr(ens.followers()[0]).to_string();
    let kinds = [
        Refused::CreateExisting,
        Refused::StaleSetData,
        Refused::DeleteMissing,
        Refused::FailingMulti,
    ];
    let stop = Arc::new(AtomicBool::new(false));
    let mut holders = Vec::new();
    for kind in kinds {
        let client = Client::builder(&follower)
            .session_timeout(T)
            .connect()
            .unwrap();
        let root = format!("/partition-refused-{kind:?}-{}", std::process::id());
        client.create(&root, b"", CreateMode::Persistent).unwrap();
        client
            .create(&format!("{root}/taken"), b"", CreateMode::Persistent)
            .unwrap();
        client
            .set_data(&format!("{root}/taken"), b"v1", None)
            .unwrap();
        let guard = Mutex::new(&client, &format!("{root}/lock"))
            .unwrap()
            .lock_timeout(WAIT)
            .unwrap();
        let guard_states = guard.state_changes();
        assert_eq!(guard_states.recv_timeout(WAIT), Ok(LockState::Held));
        let session_states = client.subscribe();
        assert_eq!(
            session_states.recv_timeout(WAIT),
            Ok(zklock::SessionState::Connected)
        );
        let writer = {
            let (client, stop) = (client.clone(), Arc::clone(&stop));
            thread::spawn(move || {
                let (mut sent, mut unexpected) = (0u32, Vec::new());
                while !stop.load(Ordering::SeqCst) {
                    if let Err(e) = kind.send(&client, &root) {
                        unexpected.push(e);
                    }
                    sent += 1;
                    // Paces the writer (one write per 200 ms), not a wait
                    // for anything.
                    thread::sleep(Duration::from_millis(200));
                }
                (sent, unexpected)
            })
        };
        holders.push((kind, client, guard, guard_states, session_states, writer));
    }
    // The observation window: three timeouts, four times 3T/4.
    let until = Instant::now() + T * 3;
    let mut changes = Vec::new();
    for (kind, _, _, guard_states, session_states, _) in &holders {
        let left = until.saturating_duration_since(Instant::now());
        if let Ok(state) = guard_states.recv_timeout(left) {
            changes.push(format!("{kind:?}: guard {state:?}"));
        }
        changes.extend(
            session_states
                .try_iter()
                .map(|s| format!("{kind:?}: session {s:?}")),
        );
    }
    stop.store(true, Ordering::SeqCst);
    let mut unexpected = Vec::new();
    for (kind, _, guard, _, _, writer) in holders {
        let (sent, mut odd) = writer
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        assert!(sent >= 30, "{kind:?}: only {sent} refused writes sent");
        assert_eq!(guard.state(), LockState::Held, "{kind:?}");
        unexpected.append(&mut odd);
    }
    assert!(
        changes.is_empty(),
        "state changes on a healthy ensemble: {changes:?} (other outcomes of the writes: {unexpected:?})"
    );
    assert!(
        unexpected.is_empty(),
        "writes not refused as expected: {unexpected:?}"
    );
}
