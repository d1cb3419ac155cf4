//! The semaphore: at most N leases, and N stored on its path.

use super::*;

#[test]
fn semaphore_admits_at_most_n() {
    let p = path("sem");
    let max = 3;
    let inside = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (p, inside, peak) = (p.clone(), inside.clone(), peak.clone());
            std::thread::spawn(move || {
                let c = client();
                let s = Semaphore::new(&c, &p, max).unwrap();
                for _ in 0..3 {
                    let lease = s.acquire_timeout(Duration::from_secs(60)).unwrap();
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    assert!(now <= max, "{now} leases at once");
                    c.exists(&p).unwrap();
                    inside.fetch_sub(1, Ordering::SeqCst);
                    lease.unlock().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(peak.load(Ordering::SeqCst) >= 1);
    let c = client();
    let mut kids = children(&c, &p);
    kids.sort();
    assert_eq!(kids, vec!["leases".to_string(), "locks".to_string()]);
    testkit::wait_no_children(&c, &format!("{p}/leases"), WAIT);
    // With all leases held, another waits and then times out cleanly.
    let p = path("sem-one");
    let s = Semaphore::new(&c, &p, 1).unwrap();
    let held = s.acquire().unwrap();
    let s2 = Semaphore::new(&client(), &p, 1).unwrap();
    assert_eq!(s2.acquire_timeout(BRIEF).unwrap_err(), LockError::Timeout);
    // The timed-out waiter's lease node goes in the background.
    wait_until("the waiter's lease node to go", WAIT, || {
        s.lease_count().unwrap() == 1
    });
    drop(held);
}

/// The number of leases is stored on the semaphore path (as kazoo does): a
/// user asking for another number is refused instead of admitting more.
#[test]
fn semaphore_refuses_a_different_number_of_leases() {
    let p = path("sem-count");
    let c = client();
    let two = Semaphore::new(&c, &p, 2).unwrap();
    let lease = two.acquire().unwrap();
    assert_eq!(c.get_data(&p).unwrap().0, b"2");
    let three = Semaphore::new(&client(), &p, 3).unwrap();
    assert_eq!(
        three.try_acquire().unwrap_err(),
        LockError::MaxLeasesMismatch {
            stored: 2,
            asked: 3
        }
    );
    let also_two = Semaphore::new(&client(), &p, 2).unwrap();
    assert!(also_two.try_acquire().unwrap().is_some());
    drop(lease);
}
