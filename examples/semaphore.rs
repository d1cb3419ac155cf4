//! Five workers share two slots.

use std::time::Duration;

use zklock::recipes::Semaphore;
use zklock::Client;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let connect = std::env::var("ZKLOCK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());
    let client = Client::connect(&connect, Duration::from_secs(10))?;
    let workers: Vec<_> = (0..5)
        .map(|i| {
            let client = client.clone();
            std::thread::spawn(move || -> Result<(), zklock::recipes::LockError> {
                let slots = Semaphore::new(&client, "/examples/semaphore", 2)?;
                let lease = slots.acquire_timeout(Duration::from_secs(30))?;
                println!("worker {i} has a slot ({})", lease.node_path());
                std::thread::sleep(Duration::from_millis(200));
                lease.unlock()
            })
        })
        .collect();
    for w in workers {
        w.join().map_err(|_| "worker panicked")??;
    }
    Ok(())
}
