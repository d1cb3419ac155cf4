//! The numbers ZooKeeper puts on the wire: op codes, error codes, watch event
//! types, keeper states, create flags and permissions. A number we do not know
//! decodes to `Unknown(n)` so a newer server never makes us panic.

/// Defines a wire enum with an `Unknown(i32)` catch-all and lossless i32 conversion.
macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $value:expr),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
            /// A number this version does not know.
            Unknown(i32),
        }

        impl $name {
            /// Every known value, for tests and tools.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The number on the wire.
            pub fn code(self) -> i32 {
                match self {
                    $($name::$variant => $value,)+
                    $name::Unknown(n) => n,
                }
            }
        }

        impl From<i32> for $name {
            fn from(n: i32) -> Self {
                match n {
                    $($value => $name::$variant,)+
                    n => $name::Unknown(n),
                }
            }
        }

        impl From<$name> for i32 {
            fn from(v: $name) -> i32 {
                v.code()
            }
        }
    };
}

wire_enum! {
    /// The type field of a request header.
    OpCode {
        /// Server-internal type of a watch notification; never sent by a client.
        Notification = 0,
        /// Creates a node; the reply carries only the path.
        Create = 1,
        /// Deletes a childless node, optionally at an expected version.
        Delete = 2,
        /// A node's Stat, optionally leaving a watch; NoNode if missing.
        Exists = 3,
        /// A node's data and Stat, optionally leaving a watch.
        GetData = 4,
        /// Replaces a node's data, optionally at an expected version.
        SetData = 5,
        /// A node's ACL and Stat.
        GetAcl = 6,
        /// Replaces a node's ACL, optionally at an expected ACL version.
        SetAcl = 7,
        /// A node's child names, optionally leaving a watch.
        GetChildren = 8,
        /// Brings the connected server up to date with the leader.
        Sync = 9,
        /// Heartbeat that keeps the session alive (sent with the ping xid).
        Ping = 11,
        /// Like GetChildren, plus the parent's Stat.
        GetChildren2 = 12,
        /// A version check, used inside multi.
        Check = 13,
        /// Several ops applied atomically: all or none.
        Multi = 14,
        /// Creates a node; the reply carries the path and the new Stat.
        Create2 = 15,
        /// Changes the ensemble's membership (dynamic reconfiguration).
        Reconfig = 16,
        /// Asks whether the server holds watches of a type on a path.
        CheckWatches = 17,
        /// Removes watches of a type from a path on the server.
        RemoveWatches = 18,
        /// Creates a container node, which the server deletes once its last child is gone.
        CreateContainer = 19,
        /// Server-internal deletion of an empty container node.
        DeleteContainer = 20,
        /// Creates a node with a time to live (the server must enable extended types).
        CreateTtl = 21,
        /// Several reads answered together (not atomic).
        MultiRead = 22,
        /// Adds credentials to the session (sent with the auth xid).
        Auth = 100,
        /// Re-arms one-shot watches after a reconnect (sent with the setWatches xid).
        SetWatches = 101,
        /// One step of a SASL authentication exchange.
        Sasl = 102,
        /// The ephemeral nodes this session owns under a path prefix.
        GetEphemerals = 103,
        /// How many nodes lie below a path, at any depth.
        GetAllChildrenNumber = 104,
        /// SetWatches that also re-arms persistent and recursive watches.
        SetWatches2 = 105,
        /// Sets a persistent (optionally recursive) watch that survives firing.
        AddWatch = 106,
        /// The identities the session is authenticated as.
        WhoAmI = 107,
        /// Server-internal record of a session's creation.
        CreateSession = -10,
        /// Ends the session; the server deletes its ephemeral nodes.
        CloseSession = -11,
        /// Marks a failed op inside a multi result.
        Error = -1,
    }
}

wire_enum! {
    /// The err field of a reply header (ZooKeeper's `KeeperException.Code`).
    ErrorCode {
        /// Success.
        Ok = 0,
        /// Marks the start of the system-error range; not a specific failure.
        SystemError = -1,
        /// Inconsistent state; inside a multi, an op rolled back because another failed.
        RuntimeInconsistency = -2,
        /// The server found its data inconsistent.
        DataInconsistency = -3,
        /// The connection to the server was lost.
        ConnectionLoss = -4,
        /// A record could not be serialized or deserialized.
        MarshallingError = -5,
        /// The server does not implement this operation.
        Unimplemented = -6,
        /// The operation timed out.
        OperationTimeout = -7,
        /// The request's arguments are invalid.
        BadArguments = -8,
        /// The server does not know the session.
        UnknownSession = -12,
        /// Reconfig refused: the new configuration has no quorum up.
        NewConfigNoQuorum = -13,
        /// Reconfig refused: another reconfiguration is under way.
        ReconfigInProgress = -14,
        /// Marks the start of the API-error range; not a specific failure.
        ApiError = -100,
        /// The node (or, for a create, its parent) does not exist.
        NoNode = -101,
        /// The node's ACL does not grant the session this permission.
        NoAuth = -102,
        /// The node is not at the expected version.
        BadVersion = -103,
        /// Ephemeral nodes cannot have children.
        NoChildrenForEphemerals = -108,
        /// A node already exists at the path.
        NodeExists = -110,
        /// The node has children, so it cannot be deleted.
        NotEmpty = -111,
        /// The session has expired; its ephemeral nodes are gone.
        SessionExpired = -112,
        /// An invalid callback was specified.
        InvalidCallback = -113,
        /// The ACL is invalid (e.g. empty, or an unknown scheme).
        InvalidAcl = -114,
        /// The server rejected the session's credentials.
        AuthFailed = -115,
        /// The session is now attached to another server; the request was ignored.
        SessionMoved = -118,
        /// A write was sent to a read-only server.
        NotReadOnly = -119,
        /// Ephemeral nodes cannot be created by a local session.
        EphemeralOnLocalSession = -120,
        /// No such watch on the path (removeWatches, checkWatches).
        NoWatcher = -121,
        /// The server did not process the request in time.
        RequestTimeout = -122,
        /// Dynamic reconfiguration is disabled on the server.
        ReconfigDisabled = -123,
        /// The server requires SASL authentication and the session had none.
        SessionClosedRequireSaslAuth = -124,
        /// The write would exceed the quota set on the path.
        QuotaExceeded = -125,
        /// The server is overloaded and dropped the request; retry later.
        Throttled = -127,
    }
}

wire_enum! {
    /// What a watch event says happened.
    EventType {
        /// Not about a node: a session state change (the path is empty).
        None = -1,
        /// The watched node was created.
        NodeCreated = 1,
        /// The watched node was deleted.
        NodeDeleted = 2,
        /// The watched node's data changed.
        NodeDataChanged = 3,
        /// A child was added to or removed from the watched node.
        NodeChildrenChanged = 4,
        /// A data watch was removed (removeWatches).
        DataWatchRemoved = 5,
        /// A child watch was removed (removeWatches).
        ChildWatchRemoved = 6,
        /// A persistent watch was removed (removeWatches).
        PersistentWatchRemoved = 7,
    }
}

wire_enum! {
    /// The session state carried by a watch event.
    KeeperState {
        /// The client is disconnected from the ensemble.
        Disconnected = 0,
        /// Unused; kept for compatibility.
        NoSyncConnected = 1,
        /// Connected; the state every node event carries.
        SyncConnected = 3,
        /// Authentication failed.
        AuthFailed = 4,
        /// Connected to a read-only server.
        ConnectedReadOnly = 5,
        /// SASL authentication succeeded.
        SaslAuthenticated = 6,
        /// The client closed the session.
        Closed = 7,
        /// The session has expired.
        Expired = -112,
    }
}

wire_enum! {
    /// The flags field of a create request.
    CreateMode {
        /// Lives until deleted.
        Persistent = 0,
        /// Deleted when the creating session ends.
        Ephemeral = 1,
        /// Persistent; the server appends a 10-digit counter kept by the parent.
        PersistentSequential = 2,
        /// Ephemeral with a server-appended 10-digit counter.
        EphemeralSequential = 3,
        /// Deleted by the server once it has had children and has none left.
        Container = 4,
        /// Deleted by the server once unmodified for its TTL and childless.
        PersistentWithTtl = 5,
        /// A TTL node with a server-appended 10-digit counter.
        PersistentSequentialWithTtl = 6,
    }
}

wire_enum! {
    /// The mode of an addWatch request.
    AddWatchMode {
        /// Data, existence and child-list changes of the node itself.
        Persistent = 0,
        /// Data and existence changes of the node and every node below it.
        PersistentRecursive = 1,
    }
}

wire_enum! {
    /// Which watches a removeWatches or checkWatches request names.
    WatcherType {
        /// Child watches.
        Children = 1,
        /// Data and exist watches.
        Data = 2,
        /// Every watch on the path.
        Any = 3,
        /// Persistent watches.
        Persistent = 4,
        /// Persistent recursive watches.
        PersistentRecursive = 5,
    }
}

impl CreateMode {
    /// The node is deleted when its session ends.
    pub fn is_ephemeral(self) -> bool {
        matches!(
            self,
            CreateMode::Ephemeral | CreateMode::EphemeralSequential
        )
    }

    /// The server appends a sequence number to the requested path.
    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential
                | CreateMode::EphemeralSequential
                | CreateMode::PersistentSequentialWithTtl
        )
    }

    /// The mode needs a time to live, sent with createTTL.
    pub fn is_ttl(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentWithTtl | CreateMode::PersistentSequentialWithTtl
        )
    }
}

/// ACL permission bits.
pub mod perms {
    /// getData, getChildren and exists' Stat.
    pub const READ: i32 = 1;
    /// setData.
    pub const WRITE: i32 = 2;
    /// Creating children of the node.
    pub const CREATE: i32 = 4;
    /// Deleting children of the node.
    pub const DELETE: i32 = 8;
    /// setACL.
    pub const ADMIN: i32 = 16;
    /// Every permission.
    pub const ALL: i32 = READ | WRITE | CREATE | DELETE | ADMIN;
}

/// Xids the protocol reserves for messages that answer no numbered request.
pub mod xid {
    /// A watch notification pushed by the server.
    pub const WATCH_EVENT: i32 = -1;
    /// A ping and its reply.
    pub const PING: i32 = -2;
    /// An auth packet and its reply.
    pub const AUTH: i32 = -4;
    /// A setWatches (or setWatches2) request and its reply.
    pub const SET_WATCHES: i32 = -8;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknowns_survive() {
        for op in OpCode::ALL {
            assert_eq!(OpCode::from(op.code()), *op);
        }
        for e in ErrorCode::ALL {
            assert_eq!(ErrorCode::from(e.code()), *e);
        }
        assert_eq!(OpCode::from(4242), OpCode::Unknown(4242));
        assert_eq!(ErrorCode::from(-999).code(), -999);
    }

    /// ZooKeeper's `CreateMode` table: each flag value with whether the
    /// node is ephemeral, sequential and a TTL node. Kills:
    /// `CreateMode::is_ephemeral`, `is_sequential`, `is_ttl` made constant.
    #[test]
    fn create_modes_are_zookeepers() {
        let table = [
            (0, false, false, false),
            (1, true, false, false),
            (2, false, true, false),
            (3, true, true, false),
            (4, false, false, false),
            (5, false, false, true),
            (6, false, true, true),
        ];
        assert_eq!(CreateMode::ALL.len(), table.len());
        for (&mode, (code, ephemeral, sequential, ttl)) in CreateMode::ALL.iter().zip(table) {
            assert_eq!(mode.code(), code, "{mode:?}");
            assert_eq!(
                (mode.is_ephemeral(), mode.is_sequential(), mode.is_ttl()),
                (ephemeral, sequential, ttl),
                "{mode:?}"
            );
        }
    }

    /// The permission bits and the reserved xids, as ZooKeeper's `ZooDefs.Perms`
    /// and `ClientCnxn` define them. Kills: `xid::AUTH` and `xid::SET_WATCHES`
    /// with their `-` deleted.
    #[test]
    fn permission_bits_and_reserved_xids_are_zookeepers() {
        use super::{perms, xid};
        assert_eq!(
            [
                perms::READ,
                perms::WRITE,
                perms::CREATE,
                perms::DELETE,
                perms::ADMIN,
                perms::ALL
            ],
            [1, 2, 4, 8, 16, 31]
        );
        assert_eq!(
            [xid::WATCH_EVENT, xid::PING, xid::AUTH, xid::SET_WATCHES],
            [-1, -2, -4, -8]
        );
    }
}
