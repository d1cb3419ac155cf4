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
        Notification = 0,
        Create = 1,
        Delete = 2,
        Exists = 3,
        GetData = 4,
        SetData = 5,
        GetAcl = 6,
        SetAcl = 7,
        GetChildren = 8,
        Sync = 9,
        Ping = 11,
        GetChildren2 = 12,
        Check = 13,
        Multi = 14,
        Create2 = 15,
        Reconfig = 16,
        CheckWatches = 17,
        RemoveWatches = 18,
        CreateContainer = 19,
        DeleteContainer = 20,
        CreateTtl = 21,
        MultiRead = 22,
        Auth = 100,
        SetWatches = 101,
        Sasl = 102,
        GetEphemerals = 103,
        GetAllChildrenNumber = 104,
        SetWatches2 = 105,
        AddWatch = 106,
        WhoAmI = 107,
        CreateSession = -10,
        CloseSession = -11,
        /// Marks a failed op inside a multi result.
        Error = -1,
    }
}

wire_enum! {
    /// The err field of a reply header (ZooKeeper's `KeeperException.Code`).
    ErrorCode {
        Ok = 0,
        SystemError = -1,
        RuntimeInconsistency = -2,
        DataInconsistency = -3,
        ConnectionLoss = -4,
        MarshallingError = -5,
        Unimplemented = -6,
        OperationTimeout = -7,
        BadArguments = -8,
        UnknownSession = -12,
        NewConfigNoQuorum = -13,
        ReconfigInProgress = -14,
        ApiError = -100,
        NoNode = -101,
        NoAuth = -102,
        BadVersion = -103,
        NoChildrenForEphemerals = -108,
        NodeExists = -110,
        NotEmpty = -111,
        SessionExpired = -112,
        InvalidCallback = -113,
        InvalidAcl = -114,
        AuthFailed = -115,
        SessionMoved = -118,
        NotReadOnly = -119,
        EphemeralOnLocalSession = -120,
        NoWatcher = -121,
        RequestTimeout = -122,
        ReconfigDisabled = -123,
        SessionClosedRequireSaslAuth = -124,
        QuotaExceeded = -125,
        Throttled = -127,
    }
}

wire_enum! {
    /// What a watch event says happened.
    EventType {
        None = -1,
        NodeCreated = 1,
        NodeDeleted = 2,
        NodeDataChanged = 3,
        NodeChildrenChanged = 4,
        DataWatchRemoved = 5,
        ChildWatchRemoved = 6,
        PersistentWatchRemoved = 7,
    }
}

wire_enum! {
    /// The session state carried by a watch event.
    KeeperState {
        Disconnected = 0,
        NoSyncConnected = 1,
        SyncConnected = 3,
        AuthFailed = 4,
        ConnectedReadOnly = 5,
        SaslAuthenticated = 6,
        Closed = 7,
        Expired = -112,
    }
}

wire_enum! {
    /// The flags field of a create request.
    CreateMode {
        Persistent = 0,
        Ephemeral = 1,
        PersistentSequential = 2,
        EphemeralSequential = 3,
        Container = 4,
        PersistentWithTtl = 5,
        PersistentSequentialWithTtl = 6,
    }
}

wire_enum! {
    /// The mode of an addWatch request.
    AddWatchMode {
        Persistent = 0,
        PersistentRecursive = 1,
    }
}

wire_enum! {
    /// Which watches a removeWatches or checkWatches request names.
    WatcherType {
        Children = 1,
        Data = 2,
        Any = 3,
        Persistent = 4,
        PersistentRecursive = 5,
    }
}

impl CreateMode {
    pub fn is_ephemeral(self) -> bool {
        matches!(
            self,
            CreateMode::Ephemeral | CreateMode::EphemeralSequential
        )
    }

    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential
                | CreateMode::EphemeralSequential
                | CreateMode::PersistentSequentialWithTtl
        )
    }

    pub fn is_ttl(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentWithTtl | CreateMode::PersistentSequentialWithTtl
        )
    }
}

/// ACL permission bits.
pub mod perms {
    pub const READ: i32 = 1;
    pub const WRITE: i32 = 2;
    pub const CREATE: i32 = 4;
    pub const DELETE: i32 = 8;
    pub const ADMIN: i32 = 16;
    pub const ALL: i32 = READ | WRITE | CREATE | DELETE | ADMIN;
}

/// Xids the protocol reserves for messages that answer no numbered request.
pub mod xid {
    pub const WATCH_EVENT: i32 = -1;
    pub const PING: i32 = -2;
    pub const AUTH: i32 = -4;
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
}
