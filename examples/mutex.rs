//! Several threads take turns on one distributed lock, each printing the
//! fencing token it got. `ZKLOCK_CONNECT` names the server (default
//! 127.0.0.1:2181).

use std::time::Duration;

use zklock::recipes::Mutex;
use zklock::Client;

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}"); // Display: one line, unlike `?` in main (Debug)
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let connect = std::env::var("ZKLOCK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());
    let client = Client::connect(&connect, Duration::from_secs(10))?;
    let workers: Vec<_> = (0..3)
        .map(|i| {
            let client = client.clone();
            std::thread::spawn(move || -> Result<(), zklock::recipes::LockError> {
                let mutex = Mutex::new(&client, "/examples/mutex")?;
                let guard = mutex.lock_timeout(Duration::from_secs(30))?;
                println!(
                    "worker {i} holds the lock, fencing token {}",
                    guard.fencing_token()
                );
                guard.unlock()
            })
        })
        .collect();
    for w in workers {
        w.join().map_err(|_| "worker panicked")??;
    }
    client.close()?;
    Ok(())
}
