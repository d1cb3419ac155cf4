//! Two readers share a read/write lock while a writer waits for both.

use std::time::Duration;

use zklock::recipes::RwLock;
use zklock::Client;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let connect = std::env::var("ZKLOCK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());
    let client = Client::connect(&connect, Duration::from_secs(10))?;
    let lock = RwLock::new(&client, "/examples/rwlock")?;
    let r1 = lock.read()?;
    let other = RwLock::new(&client.clone(), "/examples/rwlock")?;
    let r2 = std::thread::spawn(move || other.read().map(|g| g.node_path().to_owned())).join();
    println!("two readers: {} and {:?}", r1.node_path(), r2);
    drop(r1);
    let writer = lock.write_timeout(Duration::from_secs(10))?;
    println!("writer holds {}", writer.node_path());
    Ok(())
}
