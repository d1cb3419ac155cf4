//! Locks awaited on tokio: connecting, `PendingLock` (a `Future`; and
//! `PendingSet::next_outcome` returns one), a guard's state change, the
//! release, a latch's leadership and close, and the client's close, each
//! woken from the client's own I/O thread,
//! so they run on any executor without the library depending on one.
//! `ZKLOCK_CONNECT` names the server (default 127.0.0.1:2181).

use std::time::{Duration, Instant};

use zklock::recipes::{CloseMode, Election, Mutex, PendingSet};
use zklock::Client;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let connect = std::env::var("ZKLOCK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());
    // Connecting is awaited too: the I/O thread wakes the task.
    let client = Client::builder(&connect)
        .session_timeout(Duration::from_secs(10))
        .connect_async()
        .await?;
    let deadline = Some(Instant::now() + Duration::from_secs(30));

    let mutex = Mutex::new(&client, "/examples/future")?;
    let guard = mutex.start_lock(deadline).await?;
    println!(
        "holding {} (token {})",
        guard.node_path(),
        guard.fencing_token()
    );
    // The guard's state changes and the release, awaited beside other work.
    tokio::select! {
        state = guard.next_state_change() => println!("the lock is now {state:?}"),
        _ = tokio::time::sleep(Duration::from_millis(100)) => {}
    }
    guard.unlock_async().await?;

    // Many locks at once, outcomes as they come.
    let jobs: Vec<Mutex> = (0..5)
        .map(|i| Mutex::new(&client, &format!("/examples/future-job-{i}")))
        .collect::<Result<_, _>>()?;
    let mut set = PendingSet::new();
    for job in &jobs {
        set.start_lock(job, deadline);
    }
    while let Some((key, outcome)) = set.next_outcome().await {
        println!("job {key}: {}", outcome?.node_path());
    }
    // Leadership awaited, and the latch closed without blocking.
    let latch = Election::new(&client, "/examples/future-leader", b"tokio")?.latch();
    if latch.leadership().await {
        println!("leading /examples/future-leader");
    }
    latch.close_async(CloseMode::NotifyLeader).await?;
    client.close_async().await;
    Ok(())
}
