//! SetWatches after a reconnect, with thousands of watches.

use super::*;

// ---------------------------------------------------------------------------
// 7. SetWatches re-arms thousands of watches
// ---------------------------------------------------------------------------

#[test]
fn set_watches_after_reconnect_rearms_thousands_of_watches() {
    init();
    let server = fast();
    let proxy = Proxy::start(server.addr());
    let t = Duration::from_secs(8);
    let c = Client::connect(&proxy.connect_string(), t).unwrap();
    let other = Client::connect(&server.connect_string(), t).unwrap();
    let r = root(&other, "many-watches");
    let pad = "x".repeat(200);
    const DATA: usize = 2000;
    const MISSING: usize = 300;
    const CHILD: usize = 100;
    let data_paths: Vec<String> = (0..DATA).map(|i| format!("{r}/n{i:04}-{pad}")).collect();
    let missing_paths: Vec<String> = (0..MISSING).map(|i| format!("{r}/m{i:04}-{pad}")).collect();
    for chunk in data_paths.chunks(100) {
        let ops: Vec<Op> = chunk
            .iter()
            .map(|p| Op::create(p, b"0", CreateMode::Persistent))
            .collect();
        other.multi(&ops).unwrap();
    }

    // Register the watches from four threads.
    let register = |paths: Vec<String>, how: fn(&Client, &str) -> Watch| {
        let per = paths.len().div_ceil(4);
        let handles: Vec<_> = paths
            .chunks(per)
            .map(|chunk| {
                let (c, chunk) = (c.clone(), chunk.to_vec());
                thread::spawn(move || {
                    chunk
                        .into_iter()
                        .map(|p| {
                            let w = how(&c, &p);
                            (p, w)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    };
    let data_watches = register(data_paths.clone(), |c, p| {
        c.get_data_and_watch(p).unwrap().2
    });
    let exist_watches = register(missing_paths.clone(), |c, p| {
        let (s, w) = c.exists_and_watch(p).unwrap();
        assert!(s.is_none());
        w
    });
    let child_watches = register(data_paths[..CHILD].to_vec(), |c, p| {
        c.get_children_and_watch(p).unwrap().2
    });
    let rearm_bytes: usize = data_paths
        .iter()
        .chain(&missing_paths)
        .chain(&data_paths[..CHILD])
        .map(|p| 4 + p.len())
        .sum();
    assert!(
        rearm_bytes > 3 * 128 * 1024,
        "the re-arm should need several 128 KiB batches, needs {rearm_bytes} bytes"
    );
    let id = c.session_id();
    let mut states = States::of(&c);

    proxy.refuse(true);
    proxy.cut_all();
    states.wait_for(SessionState::Suspended, t);
    for chunk in data_paths.chunks(100) {
        let ops: Vec<Op> = chunk.iter().map(|p| Op::set_data(p, b"1", None)).collect();
        other.multi(&ops).unwrap();
    }
    for chunk in missing_paths.chunks(100) {
        let ops: Vec<Op> = chunk
            .iter()
            .map(|p| Op::create(p, b"", CreateMode::Persistent))
            .collect();
        other.multi(&ops).unwrap();
    }
    let ops: Vec<Op> = data_paths[..CHILD]
        .iter()
        .map(|p| Op::create(&format!("{p}/k"), b"", CreateMode::Persistent))
        .collect();
    other.multi(&ops).unwrap();

    let sent_before = proxy.bytes_forwarded(Direction::ClientToServer);
    proxy.clear();
    states.wait_for(SessionState::Connected, t);
    assert_eq!(c.session_id(), id);
    let deadline = Instant::now() + Duration::from_secs(20);
    let left = || deadline.saturating_duration_since(Instant::now());
    let mut missing_events = Vec::new();
    for (list, kind) in [
        (&data_watches, EventType::NodeDataChanged),
        (&exist_watches, EventType::NodeCreated),
        (&child_watches, EventType::NodeChildrenChanged),
    ] {
        for (p, w) in list {
            match w.recv_timeout(left()) {
                Ok(ev) => assert_eq!((ev.kind, ev.path.as_str()), (kind, p.as_str())),
                Err(e) => missing_events.push((kind, p[..r.len() + 6].to_string(), e)),
            }
        }
    }
    let rearm_sent = proxy.bytes_forwarded(Direction::ClientToServer) - sent_before;
    assert!(
        missing_events.is_empty(),
        "{} of {} watches did not fire after the reconnect (SetWatches sent {rearm_sent} bytes \
         for {rearm_bytes} bytes of paths); first few: {:?}",
        missing_events.len(),
        DATA + MISSING + CHILD,
        &missing_events[..missing_events.len().min(5)]
    );
    assert!(
        rearm_sent >= rearm_bytes as u64,
        "only {rearm_sent} bytes sent after reconnect"
    );
    c.sync(&r).unwrap();
    c.exists(&r).unwrap();
    for (p, w) in data_watches
        .iter()
        .chain(&exist_watches)
        .chain(&child_watches)
    {
        expect_spent(w, p);
    }
    assert_eq!(
        states.drain(),
        &[
            SessionState::Connected,
            SessionState::Suspended,
            SessionState::Connected
        ]
    );
    assert_no_io_panic();
}
