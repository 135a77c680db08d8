//! Limits every decoder enforces, with documented defaults (docs/PROTOCOL.md, "Limits").
//! A decoder checks a declared length or count against these before it allocates or reads,
//! so a hostile peer cannot make it allocate more than the limit.

/// Protocol limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest binary frame, header included. Default 4 MiB (UDP frames are also bounded by
    /// the datagram size, 65,507 bytes).
    pub max_frame: usize,
    /// Most operations in one frame. Default 1024.
    pub max_ops: usize,
    /// Longest key. Default 460.
    pub max_key: usize,
    /// Largest value. Default 1 MiB.
    pub max_value: usize,
    /// Most items one SCAN reply carries. Default 1000.
    pub max_scan_items: usize,
    /// Most key and value bytes one SCAN reply carries. Default 1 MiB.
    pub max_scan_bytes: usize,
    /// Longest auth token. Default 255 (one length byte).
    pub max_token: usize,
    /// Largest RESP bulk string. Default 1 MiB + 1 KiB (a maximal value plus room).
    pub max_bulk: usize,
    /// Most elements in a RESP array (a command's arguments: MSET, DEL and MGET of many keys).
    /// Default 1,048,576, as Redis; a command must also fit in `max_frame` bytes.
    pub max_array: usize,
    /// Longest RESP inline command or simple line. Default 64 KiB.
    pub max_inline: usize,
    /// Deepest nesting of RESP arrays a reply parser accepts. Default 8.
    pub max_depth: usize,
}

impl Limits {
    /// The longest RESP command a server reads: a frame's worth, or two of the largest bulk
    /// strings with room for the rest of the command (a SET of a maximal value, say).
    pub fn max_resp_command(&self) -> usize {
        self.max_frame.max(2 * self.max_bulk + (64 << 10))
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_frame: 4 << 20,
            max_ops: 1024,
            max_key: 460,
            max_value: 1 << 20,
            max_scan_items: 1000,
            max_scan_bytes: 1 << 20,
            max_token: 255,
            max_bulk: (1 << 20) + 1024,
            max_array: 1 << 20,
            max_inline: 64 << 10,
            max_depth: 8,
        }
    }
}
