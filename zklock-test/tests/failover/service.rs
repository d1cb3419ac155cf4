//! The service of `examples/failover_service.rs` stops its work when its
//! session expires under it: the test a user writes for their own service.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use zklock_test::{wait_until, ClientLink, ZkServer};

use super::*;

#[allow(dead_code)]
#[path = "../../../examples/failover_service.rs"]
mod failover_service;

#[test]
fn the_service_stops_working_when_its_session_expires() {
    let server = ZkServer::start();
    let link = ClientLink::start(&server.connect_string());
    let client =
        Client::connect(&link.connect_string(), Duration::from_secs(10)).expect("connecting");
    let units = Arc::new(AtomicU64::new(0));
    let service = thread::spawn({
        let (client, units) = (client.clone(), Arc::clone(&units));
        move || {
            failover_service::run_while_held(&client, "/service/lock", |_guard| {
                units.fetch_add(1, Ordering::SeqCst);
                // One unit of the service's work.
                thread::sleep(Duration::from_millis(5));
                ControlFlow::Continue(())
            })
        }
    });
    wait_until("the service to work", WAIT, || {
        units.load(Ordering::SeqCst) > 0
    });

    link.expire_session();
    wait_until("the service to stop", WAIT, || service.is_finished());
    let outcome = service.join().expect("the service thread");
    assert_eq!(outcome.expect("no error"), Some(LossReason::SessionExpired));
    // Another instance of the service may take over.
    assert!(lock_is_free(&server.connect_string(), "/service/lock"));
}
