//! The service of `examples/long_running_service.rs` carries on through
//! session expiries: after each, its worker holds job locks again and its
//! latch leads again, on the same client and the same recipe values.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::thread;

use zklock::recipes::{Election, Mutex};
use zklock_test::{wait_until, ClientLink, ZkServer};

use super::*;

#[allow(dead_code)]
#[path = "../../../examples/long_running_service.rs"]
mod long_running_service;

use long_running_service::{follow_leadership, run_job, JobEnd};

#[test]
fn the_service_holds_and_leads_again_after_each_of_two_expiries() {
    let server = ZkServer::start();
    let link = ClientLink::start(&server.connect_string());
    let client =
        Client::connect(&link.connect_string(), Duration::from_secs(10)).expect("connecting");
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let gained = Arc::new(AtomicU64::new(0));
    let leading = Arc::new(AtomicBool::new(false));
    let given_up: Arc<StdMutex<Vec<JobEnd>>> = Arc::default();

    let latch = Election::new(&client, "/service/leader", b"worker")
        .unwrap()
        .latch();
    let leader = thread::spawn({
        let (stop, gained, leading) = (stop.clone(), gained.clone(), leading.clone());
        move || {
            follow_leadership(&latch, &stop, |leads| {
                if leads && !leading.swap(true, Ordering::SeqCst) {
                    gained.fetch_add(1, Ordering::SeqCst);
                }
                if !leads {
                    leading.store(false, Ordering::SeqCst);
                }
            });
            latch
        }
    });
    let worker = thread::spawn({
        let (client, stop, done, given_up) =
            (client.clone(), stop.clone(), done.clone(), given_up.clone());
        move || {
            // A few job locks, made once and used across every session.
            let jobs: Vec<Mutex> = (0..3)
                .map(|j| Mutex::new(&client, &format!("/service/jobs/{j}")).unwrap())
                .collect();
            let mut next = 0;
            while !stop.load(Ordering::SeqCst) {
                // A unit of the job's work.
                match run_job(&jobs[next % jobs.len()], 3, |_token| {
                    thread::sleep(Duration::from_millis(5))
                }) {
                    JobEnd::Done => {
                        done.fetch_add(1, Ordering::SeqCst);
                        next += 1;
                    }
                    other => given_up.lock().unwrap().push(other),
                }
            }
        }
    });

    let mut sessions = vec![];
    for round in 0..3 {
        let jobs_before = done.load(Ordering::SeqCst);
        wait_until(&format!("jobs done in round {round}"), WAIT, || {
            done.load(Ordering::SeqCst) > jobs_before + 2
        });
        wait_until(&format!("leadership in round {round}"), WAIT, || {
            gained.load(Ordering::SeqCst) == round + 1 && leading.load(Ordering::SeqCst)
        });
        sessions.push(client.session_id());
        if round < 2 {
            link.expire_session();
            wait_until("the expiry to be heard", WAIT, || {
                client.session_id() != *sessions.last().unwrap()
            });
        }
    }
    stop.store(true, Ordering::SeqCst);
    worker.join().expect("the worker");
    let latch = leader.join().expect("the leader");
    latch.close(zklock::recipes::CloseMode::Silent).unwrap();

    let mut distinct = sessions.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "three sessions: {sessions:x?}");
    // What was given up, was given up for the expiry's sake.
    for end in given_up.lock().unwrap().iter() {
        assert!(
            matches!(
                end,
                JobEnd::Lost(Some(LossReason::SessionExpired | LossReason::NodeDeleted))
                    | JobEnd::NotTaken(zklock::recipes::LockError::SessionExpired)
            ),
            "{end:?}"
        );
    }
}
