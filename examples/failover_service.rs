//! A service that does its work only while it holds its lock: it works
//! while the guard says `Held`, pauses while `Suspended` (the lock may come
//! back), and stops once `Lost` (someone else may hold it now). Run alone it
//! does five units of work; `ZKLOCK_CONNECT` names the server (default
//! 127.0.0.1:2181). Its test expires the session under it with zklock-test
//! (`zklock-test/tests/failover/service.rs`).

use std::ops::ControlFlow;
use std::time::Duration;

use zklock::recipes::{LockError, LockGuard, LockState, LossReason, Mutex};
use zklock::Client;

/// Takes the lock at `path`, then calls `work` for one unit of work at a
/// time while the lock is held, until `work` says `Break` (then releases
/// it: `Ok(None)`) or the lock is lost (`Ok(Some(why))`).
pub fn run_while_held(
    client: &Client,
    path: &str,
    mut work: impl FnMut(&LockGuard) -> ControlFlow<()>,
) -> Result<Option<LossReason>, LockError> {
    let guard = Mutex::new(client, path)?.lock()?;
    let changes = guard.state_changes();
    loop {
        match guard.state() {
            LockState::Held => {
                if work(&guard).is_break() {
                    guard.unlock()?;
                    return Ok(None);
                }
            }
            // Not ours for now: wait for the next change, doing nothing.
            LockState::Suspended => {
                let _ = changes.recv_timeout(Duration::from_secs(1));
            }
            LockState::Lost => return Ok(guard.lost_reason()),
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let connect = std::env::var("ZKLOCK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());
    let client = Client::connect(&connect, Duration::from_secs(10))?;
    let mut done = 0;
    let lost = run_while_held(&client, "/examples/failover-service", |guard| {
        // One unit of work; pass the fencing token to storage so that it
        // refuses a former holder's late writes.
        done += 1;
        println!(
            "unit {done} done under fencing token {}",
            guard.fencing_token()
        );
        if done == 5 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })?;
    match lost {
        None => println!("done, lock released"),
        Some(why) => println!("lock lost ({why:?}), work stopped"),
    }
    client.close()?;
    Ok(())
}
