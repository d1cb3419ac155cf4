//! The fuzz driver, on generated scripts and on the committed seeds.

use super::*;

/// The fuzz driver on generated scripts, on stable: random bytes, and
/// scripts built from real handshakes and replies.
#[test]
fn fuzz_driver_on_generated_scripts() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    // A valid handshake answer and a valid reply, to reach deeper states.
    let connect = handshake_answer(9, 6000, vec![1; 16]);
    let mut reply = BytesMut::new();
    encode_frame(&mut reply, |b| {
        ReplyHeader {
            xid: 1,
            zxid: 5,
            err: ErrorCode::Ok,
        }
        .encode(b);
        Response::Stat(Stat::default()).encode(b);
    });
    for _ in 0..3000 {
        let mut script = Vec::new();
        for _ in 0..(rand() % 24) {
            match rand() % 6 {
                0 => {
                    script.extend_from_slice(&[5, 0, connect.len() as u8]);
                    script.extend_from_slice(&connect);
                }
                1 => {
                    script.extend_from_slice(&[0, reply.len() as u8]);
                    script.extend_from_slice(&reply);
                }
                _ => script.extend((0..(rand() % 8)).map(|_| rand() as u8)),
            }
        }
        super::fuzz::run(&script);
    }
}

/// The committed seeds of the `session` fuzz target replay cleanly.
#[test]
fn fuzz_session_seeds_replay() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/session");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).expect("fuzz/seeds/session exists") {
        let data = std::fs::read(entry.expect("seed entry").path()).expect("seed file");
        super::fuzz::run(&data);
        count += 1;
    }
    assert!(count > 0, "no session seeds in {}", dir.display());
}
