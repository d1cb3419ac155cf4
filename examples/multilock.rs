//! Locks two accounts together for a transfer; the global order means two
//! transfers in opposite directions cannot deadlock.

use std::time::Duration;

use zklock::recipes::MultiLock;
use zklock::Client;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let connect = std::env::var("ZKLOCK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());
    let client = Client::connect(&connect, Duration::from_secs(10))?;
    let a_to_b = MultiLock::new(&client, &["/examples/accounts/a", "/examples/accounts/b"])?;
    let b_to_a = MultiLock::new(&client, &["/examples/accounts/b", "/examples/accounts/a"])?;
    let t = std::thread::spawn(move || {
        b_to_a
            .lock_timeout(Duration::from_secs(10))
            .map(|g| g.len())
    });
    let guards = a_to_b.lock_timeout(Duration::from_secs(10))?;
    println!("transfer a -> b holds {} locks", guards.len());
    drop(guards);
    println!(
        "transfer b -> a held {:?} locks",
        t.join().map_err(|_| "panicked")?
    );
    Ok(())
}
