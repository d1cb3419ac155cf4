//! What the pumps follow in the byte stream: ZooKeeper framing (to find
//! the reply to a request) and the election hello (to rewrite its address).

/// The first message a member sends on an election connection: protocol
/// version (8 bytes), server id (8), then a length-prefixed `host:port`
/// list; the bytes read so far.
#[derive(Default)]
pub(super) struct ElectionHello {
    pub(super) bytes: Vec<u8>,
}

impl ElectionHello {
    /// Address given as the wildcard, once the whole hello is in: the
    /// hello rewritten, followed by whatever came after it. A version this
    /// does not know passes unchanged.
    pub(super) fn rewrite(&self) -> Option<Vec<u8>> {
        const V1: i64 = -65536;
        const V2: i64 = -65535;
        if self.bytes.len() < 8 {
            return None;
        }
        let version = i64::from_be_bytes(self.bytes[..8].try_into().ok()?);
        if version != V1 && version != V2 {
            return Some(self.bytes.clone());
        }
        if self.bytes.len() < 20 {
            return None;
        }
        let len = usize::try_from(be_i32(&self.bytes[16..20])).ok()?;
        if self.bytes.len() < 20 + len {
            return None;
        }
        let wildcard = b"0.0.0.0:0";
        let mut out = Vec::with_capacity(self.bytes.len());
        out.extend_from_slice(&self.bytes[..16]);
        out.extend_from_slice(&(wildcard.len() as i32).to_be_bytes());
        out.extend_from_slice(wildcard);
        out.extend_from_slice(&self.bytes[20 + len..]);
        Some(out)
    }
}

/// Something the frame scanner noticed.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum FrameEvent {
    /// The first 8 body bytes of a frame: for a request, xid and op type (for a
    /// reply, xid and half of the zxid).
    Header { xid: i32, op: i32 },
    /// A frame ended; `xid` is its first 4 body bytes, if it had them.
    End { xid: Option<i32> },
}

/// Follows ZooKeeper framing (4-byte big-endian length, then the body) across
/// arbitrary chunk boundaries. The first frame of a connection (connect
/// request / response) has no xid, so it yields only `End { xid: None }`.
#[derive(Default)]
pub(super) struct FrameScanner {
    frames_done: u64,
    len_buf: [u8; 4],
    len_have: usize,
    body_left: usize,
    head: [u8; 8],
    head_have: usize,
    head_want: usize,
}

impl FrameScanner {
    pub(super) fn feed(&mut self, mut data: &[u8], mut on_event: impl FnMut(FrameEvent)) {
        while !data.is_empty() {
            if self.len_have < 4 {
                let take = (4 - self.len_have).min(data.len());
                self.len_buf[self.len_have..self.len_have + take].copy_from_slice(&data[..take]);
                self.len_have += take;
                data = &data[take..];
                if self.len_have == 4 {
                    self.body_left = u32::from_be_bytes(self.len_buf) as usize;
                    self.head_have = 0;
                    self.head_want = if self.frames_done == 0 {
                        0
                    } else {
                        self.body_left.min(8)
                    };
                    if self.body_left == 0 {
                        self.end_frame(&mut on_event);
                    }
                }
                continue;
            }
            let take = self.body_left.min(data.len());
            if self.head_have < self.head_want {
                let copy = (self.head_want - self.head_have).min(take);
                self.head[self.head_have..self.head_have + copy].copy_from_slice(&data[..copy]);
                self.head_have += copy;
                if self.head_have == 8 {
                    on_event(FrameEvent::Header {
                        xid: be_i32(&self.head[0..4]),
                        op: be_i32(&self.head[4..8]),
                    });
                }
            }
            self.body_left -= take;
            data = &data[take..];
            if self.body_left == 0 {
                self.end_frame(&mut on_event);
            }
        }
    }

    fn end_frame(&mut self, on_event: &mut impl FnMut(FrameEvent)) {
        let xid = (self.head_have >= 4).then(|| be_i32(&self.head[0..4]));
        on_event(FrameEvent::End { xid });
        self.frames_done += 1;
        self.len_have = 0;
        self.head_have = 0;
        self.head_want = 0;
    }
}

fn be_i32(bytes: &[u8]) -> i32 {
    i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}
