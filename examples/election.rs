//! Campaigns for leadership, leads while the guard reports `Held`, and
//! steps down after a few seconds.

use std::time::Duration;

use zklock::recipes::{Election, LockState};
use zklock::Client;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let connect = std::env::var("ZKLOCK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());
    let id = format!("candidate-{}", std::process::id());
    let client = Client::connect(&connect, Duration::from_secs(10))?;
    let election = Election::new(&client, "/examples/election", id.as_bytes())?;
    if let Some(leader) = election.leader()? {
        println!("current leader: {}", String::from_utf8_lossy(&leader.id));
    }
    let leadership = election.campaign_timeout(Duration::from_secs(60))?;
    println!("{id} leads");
    let changes = leadership.state_changes();
    while let Ok(state) = changes.recv_timeout(Duration::from_secs(3)) {
        println!("leadership is {state:?}");
        if state == LockState::Lost {
            return Ok(());
        }
    }
    println!("{id} steps down");
    Ok(())
}
