//! [`ClientLink::delay`] on a real server: a latency added to each way, the
//! same for every chunk however many are on the way at once (a long wire),
//! not a queue in which a chunk waits for the ones before it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Barrier};
use std::thread;

use zklock_test::{ClientLink, ZkOptions, ZkServer};

use super::*;

/// The holder's session timeout: `T/8` is 1.5 s, room for the round
/// trip the delay promises (`2 * DELAY`, 1 s) and the link's own, not for
/// what a queue made of four callers' requests (3 and 4 `DELAY`s).
const T: Duration = Duration::from_secs(12);
/// One way's delay: long beside a loopback round trip (a millisecond) and
/// beside a loaded machine's hiccups (tens of milliseconds), which do not
/// grow with it; a queue adds whole delays.
const DELAY: Duration = Duration::from_millis(500);
/// Callers at once, each doing `ROUNDS` round trips back to back.
const CALLERS: usize = 4;
const ROUNDS: usize = 4;
/// The pause between two samples of the link's own round trip: often
/// enough to see a hiccup of the machine's, seldom enough to add no load.
const SAMPLE_EVERY: Duration = Duration::from_millis(50);

/// Every round trip of `CALLERS` threads sharing `client`, each doing
/// `ROUNDS` `exists` back to back, started together; failures as text.
fn round_trips(client: &Client) -> Vec<Result<Duration, String>> {
    let start = Barrier::new(CALLERS);
    thread::scope(|scope| {
        let callers: Vec<_> = (0..CALLERS)
            .map(|_| {
                scope.spawn(|| {
                    start.wait();
                    (0..ROUNDS)
                        .map(|_| {
                            let sent = Instant::now();
                            client
                                .exists("/delay")
                                .map(|_| sent.elapsed())
                                .map_err(|e| e.to_string())
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        callers
            .into_iter()
            .flat_map(|caller| caller.join().expect("a caller panicked"))
            .collect()
    })
}

/// The shortest and longest of `trips`; panics on a failed one.
fn span(what: &str, trips: &[Result<Duration, String>]) -> (Duration, Duration) {
    let ok: Vec<Duration> = trips
        .iter()
        .map(|trip| {
            trip.clone()
                .unwrap_or_else(|e| panic!("{what}: a round trip failed: {e}; all: {trips:?}"))
        })
        .collect();
    let shortest = ok.iter().min().copied().expect("round trips");
    let longest = ok.iter().max().copied().expect("round trips");
    (shortest, longest)
}

/// Round trips of `client`, one every `SAMPLE_EVERY`, until `done` (at
/// most a minute's worth); failures as text.
fn sample(client: &Client, done: &AtomicBool) -> Vec<Result<Duration, String>> {
    let most = (Duration::from_secs(60).as_millis() / SAMPLE_EVERY.as_millis()) as usize;
    let mut trips = Vec::new();
    while !done.load(Ordering::SeqCst) && trips.len() < most {
        let sent = Instant::now();
        trips.push(
            client
                .exists("/delay")
                .map(|_| sent.elapsed())
                .map_err(|e| e.to_string()),
        );
        thread::sleep(SAMPLE_EVERY);
    }
    trips
}

#[test]
fn a_delay_adds_twice_itself_to_each_round_trip_of_concurrent_callers() {
    let server = ZkServer::start_with_options(&ZkOptions::new().tick_ms(500));
    let link = ClientLink::start(&server.connect_string());
    let (client, guard) = holder(&link.connect_string(), T, "/delay/lock");
    let mut states = States::of(&guard);
    // The link's own round trip, measured at the same time through a link
    // like it without the delay, to the same server: what the delay adds
    // to, whatever the machine's load is meanwhile.
    let plain = ClientLink::start(&server.connect_string());
    let reference = Client::connect(&plain.connect_string(), T).expect("connecting the reference");
    let _warm_up = (round_trips(&client), round_trips(&reference));

    link.delay(DELAY);
    // Requests sent before the delay are all answered (each caller waits
    // for its own), so every request measured below enters the delay.
    let done = AtomicBool::new(false);
    let (delayed, own) = thread::scope(|scope| {
        let sampler = scope.spawn(|| sample(&reference, &done));
        let delayed = round_trips(&client);
        done.store(true, Ordering::SeqCst);
        (delayed, sampler.join().expect("the sampler panicked"))
    });
    link.heal();
    let (shortest, longest) = span("delayed", &delayed);
    let (_, own) = span("undelayed", &own);
    eprintln!(
        "delay {DELAY:?}, {CALLERS} callers x {ROUNDS}: round trips {shortest:?} to \
         {longest:?}; the link's own meanwhile up to {own:?}"
    );

    // A chunk that waits for another one's delay waits up to a whole
    // DELAY more; a quarter of it is the scheduler's share (the proxy's
    // timed wait ending, the threads waking up), well below that.
    let slack = DELAY / 4;
    let bound = 2 * DELAY + own + slack;
    assert!(
        longest <= bound,
        "the longest round trip took {longest:?}: more than 2 x {DELAY:?} + the link's own \
         {own:?} + {slack:?}; all: {delayed:?}"
    );
    // And not early: the delay is on both ways.
    assert!(
        shortest >= 2 * DELAY,
        "a round trip took {shortest:?}, less than 2 x {DELAY:?}; all: {delayed:?}"
    );
    // Within T/8, as the table says, the holder never noticed.
    states.assert_quiet_for(Duration::ZERO);
    assert_eq!(guard.state(), LockState::Held);
}

#[test]
fn clearing_a_delay_delivers_what_is_on_the_way_at_once() {
    let server = ZkServer::start_with_options(&ZkOptions::new().tick_ms(500));
    let link = ClientLink::start(&server.connect_string());
    let client = Client::connect(&link.connect_string(), Duration::from_secs(10))
        .expect("connecting the client");
    client.exists("/delay").expect("a read before the delay");

    // Longer than anything else here: a request that waited it out would
    // come back after 2 x 5 s.
    let long = Duration::from_secs(5);
    link.delay(long);
    let (done_tx, done_rx) = mpsc::channel();
    let caller = {
        let client = client.clone();
        thread::spawn(move || {
            let sent = Instant::now();
            let outcome = client.exists("/delay").map(|_| sent.elapsed());
            let _ = done_tx.send(());
            outcome
        })
    };
    // The request is on its way (sent, not answered)...
    assert!(
        done_rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "the read came back through a {long:?} delay"
    );
    // ...and goes on now, as does its answer.
    link.delay(Duration::ZERO);
    let took = caller
        .join()
        .expect("the caller panicked")
        .expect("the read");
    // Flushed, it is back just after the clear; waited out, after `long`
    // at least: half of it tells the two apart.
    assert!(
        took < long / 2,
        "the read took {took:?}: the cleared delay of {long:?} was waited out"
    );
}

/// A delay past the bound is a stall to the holder: at `T/8` each way (a
/// round trip of `T/4`, twice the bound) no answer proves the leader in
/// time, so the guard turns `Suspended` by `3T/4` after the last proof and
/// `Lost` (`NoContact`) by `T`, as under a stall. The last proof is at
/// most `3T/8` old when the delay begins (a probe period, its gap and a
/// round trip), hence the early sides; the late sides allow a second for
/// a loaded machine.
#[test]
fn a_delay_past_the_bound_suspends_then_loses_the_holder_as_a_stall_does() {
    let server = ZkServer::start_with_options(&ZkOptions::new().tick_ms(500));
    let link = ClientLink::start(&server.connect_string());
    let (_client, guard) = holder(&link.connect_string(), T, "/delay/past");
    let mut states = States::of(&guard);
    let began = Instant::now();
    link.delay(T / 8);
    let slack = Duration::from_secs(1);
    let suspended = states.wait_for_after(LockState::Suspended, began);
    assert!(
        suspended >= T * 3 / 8 && suspended <= T * 3 / 4 + slack,
        "Suspended {suspended:?} after the delay began; states {:?}",
        states.seen
    );
    let lost = states.wait_for_after(LockState::Lost, began);
    assert!(
        lost >= T * 5 / 8 && lost <= T + slack,
        "Lost {lost:?} after the delay began; states {:?}",
        states.seen
    );
    assert_eq!(guard.lost_reason(), Some(LossReason::NoContact));
    assert_eq!(
        states.seen,
        [LockState::Held, LockState::Suspended, LockState::Lost]
    );
}
