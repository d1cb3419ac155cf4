//! Refusals: a refused operation's error, digest auth and ACLs, and bad
//! input refused before sending.

use super::*;

#[test]
fn a_refused_operation_names_itself_and_the_callers_path() {
    let c = client();
    let r = root(&c, "refusal");
    // A parent that lets anyone create and read children, but not delete them.
    let world = |perms| Acl {
        perms,
        id: Id {
            scheme: "world".into(),
            id: "anyone".into(),
        },
    };
    let parent =
        CreateOptions::new(CreateMode::Persistent).acl(vec![world(perms::READ | perms::CREATE)]);
    c.create_with(&format!("{r}/jobs"), b"", &parent).unwrap();
    let node = c
        .create(
            &format!("{r}/jobs/lock-"),
            b"",
            CreateMode::EphemeralSequential,
        )
        .unwrap();
    // Through a chroot: the error names the path as this caller named it.
    let rooted = Client::connect(&format!("{}{r}", zk::shared().connect_string()), T).unwrap();
    let mine = node.strip_prefix(&r).unwrap().to_owned();
    let e = rooted.delete(&mine, None).unwrap_err();
    assert_eq!(
        e,
        Error::Server {
            code: ErrorCode::NoAuth,
            op: Some(OpCode::Delete),
            path: Some(mine.clone()),
        }
    );
    assert_eq!(e.to_string(), format!("NoAuth on delete {mine}"));
    assert_eq!(
        (e.code(), e.op(), e.path()),
        (
            Some(ErrorCode::NoAuth),
            Some(OpCode::Delete),
            Some(mine.as_str())
        )
    );
    // Each call says what it was.
    let missing = rooted.get_children("/jobs/nope").unwrap_err();
    assert_eq!(missing.to_string(), "NoNode on getChildren /jobs/nope");
    let no_acl = rooted.get_acl("/jobs/nope").unwrap_err();
    assert_eq!(no_acl.to_string(), "NoNode on getACL /jobs/nope");
    let exists = rooted
        .create("/jobs", b"", CreateMode::Persistent)
        .unwrap_err();
    assert_eq!(exists.to_string(), "NodeExists on create /jobs");
    let acl = rooted
        .set_acl("/jobs", Acl::open_unsafe(), None)
        .unwrap_err();
    assert_eq!(acl.to_string(), "NoAuth on setACL /jobs");
    // A refused op of a multi: its index, kind and path.
    let m = rooted
        .multi(&[Op::check("/jobs", None), Op::delete(&mine, None)])
        .unwrap_err();
    assert_eq!(
        m,
        Error::MultiFailed {
            index: 1,
            code: ErrorCode::NoAuth,
            op: OpCode::Delete,
            path: mine.clone(),
        }
    );
    assert!(m.to_string().contains(&format!("(delete {mine})")), "{m}");
}

#[test]
fn digest_auth_and_creator_acl() {
    let owner = client();
    owner.add_auth("digest", b"alice:secret").unwrap();
    let r = root(&owner, "auth");
    let p = format!("{r}/private");
    owner
        .create_with(
            &p,
            b"s3cret",
            &CreateOptions::new(CreateMode::Persistent).acl(Acl::creator_all()),
        )
        .unwrap();
    assert_eq!(owner.get_data(&p).unwrap().0, b"s3cret");
    let (acl, _) = owner.get_acl(&p).unwrap();
    assert_eq!(acl[0].id.scheme, "digest");
    assert!(acl[0].id.id.starts_with("alice:"));

    let stranger = client();
    assert_eq!(
        stranger.get_data(&p).unwrap_err(),
        Error::Server {
            code: ErrorCode::NoAuth,
            op: Some(OpCode::GetData),
            path: Some(p.clone()),
        }
    );
    let wrong = client();
    wrong.add_auth("digest", b"alice:wrong").unwrap();
    assert_eq!(
        wrong.get_data(&p).unwrap_err(),
        Error::Server {
            code: ErrorCode::NoAuth,
            op: Some(OpCode::GetData),
            path: Some(p.clone()),
        }
    );
    let friend = client();
    friend.add_auth("digest", b"alice:secret").unwrap();
    assert_eq!(friend.get_data(&p).unwrap().0, b"s3cret");
    let stat = owner.set_acl(&p, Acl::open_unsafe(), None).unwrap();
    assert_eq!(stat.aversion, 1);
    assert_eq!(stranger.get_data(&p).unwrap().0, b"s3cret");
}

#[test]
fn bad_input_is_refused_without_sending() {
    let proxy = Proxy::start(zk::shared().addr());
    let c = Client::connect(&proxy.connect_string(), Duration::from_secs(30)).unwrap();
    let r = root(&c, "bad");
    let before = proxy.bytes_forwarded(Direction::ClientToServer);
    for bad in [
        "",
        "rel",
        "/a/",
        "/a//b",
        "/a/./b",
        "/a/../b",
        "/nul\0",
        "/ctl\u{1}",
    ] {
        assert!(
            matches!(c.exists(bad), Err(Error::InvalidPath { .. })),
            "{bad:?} accepted"
        );
        assert!(matches!(
            c.create(bad, b"", CreateMode::Persistent),
            Err(Error::InvalidPath { .. })
        ));
    }
    let huge = vec![0u8; 2 * 1024 * 1024];
    assert!(matches!(
        c.create(&format!("{r}/huge"), &huge, CreateMode::Persistent),
        Err(Error::TooLarge { .. })
    ));
    assert!(matches!(
        c.multi(&[Op::check("relative", None)]),
        Err(Error::InvalidPath { .. })
    ));
    assert_eq!(proxy.bytes_forwarded(Direction::ClientToServer), before);
    // The client is still healthy after refusing all that.
    assert!(c.exists(&r).unwrap().is_some());

    match Client::connect("no-such-host.invalid:2181", T) {
        Err(e @ Error::Resolve { .. }) => {
            assert!(
                std::error::Error::source(&e).is_some(),
                "the resolver's error is kept"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        Client::connect("", T),
        Err(Error::InvalidConnectString(_))
    ));
    assert!(matches!(
        Client::connect("127.0.0.1:2181/bad/", T),
        Err(Error::InvalidPath { .. })
    ));
}

/// The characters `validate_path` refuses are the ones the server refuses:
/// a create of a node whose name holds each character, sent by the codec
/// alone (no local check), is refused with `BadArguments` exactly where
/// `validate_path` refuses the path, on both sides of every boundary
/// (controls, the private-use area, the first plane's reserved end, and
/// the characters past it, which the server sees as surrogate pairs).
#[test]
fn validate_path_refuses_the_characters_the_server_refuses() {
    let c = client();
    let r = root(&c, "characters");
    let mut raw = testkit::raw::RawClient::connect(zk::shared().addr(), 10_000);
    let chars = [
        'a',
        '\u{1}',
        '\u{1f}',
        ' ',
        '~',
        '\u{7f}',
        '\u{9f}',
        '\u{a0}',
        'é',
        '\u{d7ff}',
        '\u{e000}',
        '\u{f8ff}',
        '\u{f900}',
        '\u{ffef}',
        '\u{fff0}',
        '\u{ffff}',
        '\u{10000}',
        '\u{1f600}',
        '\u{10ffff}',
    ];
    for (i, ch) in chars.into_iter().enumerate() {
        let path = format!("{r}/{i}{ch}x");
        let (_, reply) = raw.call(&jute::Request::Create2(jute::CreateRequest {
            path: path.clone(),
            data: vec![],
            acl: Acl::open_unsafe(),
            mode: CreateMode::Persistent,
        }));
        let server_refuses = match reply {
            Ok(_) => false,
            Err(ErrorCode::BadArguments) => true,
            Err(other) => panic!("{ch:?}: the server answered {other:?}"),
        };
        assert_eq!(
            zklock::validate_path(&path, false).is_err(),
            server_refuses,
            "{ch:?} (U+{:04X}): the server refuses it: {server_refuses}",
            ch as u32
        );
    }
}
