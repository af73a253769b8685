//! How an item lives in the engine: the value of its key in the server's tree is a 16-byte
//! header, then the item's data. Values past the engine's in-leaf limit are objects (written
//! through the worker's ring), so an item may be as large as `--item-max-mib`.
//!
//! | bytes | field | meaning |
//! |---|---|---|
//! | 0..4 | client flags | u32, little-endian, as the client gave them |
//! | 4..8 | expiry | u32 Unix seconds; 0: never expires |
//! | 8..16 | cas | u64: the item's cas unique, new at every change |
//! | 16.. | data | the item's bytes |

use std::time::{SystemTime, UNIX_EPOCH};

/// Bytes of the header before an item's data.
pub const HEADER_BYTES: usize = 16;

/// An exptime above this many seconds is an absolute Unix time (memcached's rule: 30 days).
pub const RELATIVE_EXPTIME_MAX: i64 = 60 * 60 * 24 * 30;

/// An item's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub flags: u32,
    /// Unix seconds when the item expires; 0: never.
    pub expires: u32,
    pub cas: u64,
}

impl Header {
    /// Whether the item is gone at Unix second `now`.
    pub fn expired(&self, now: u32) -> bool {
        self.expires != 0 && self.expires <= now
    }

    /// Seconds left at `now`; `None` for an item that never expires.
    pub fn ttl_remaining(&self, now: u32) -> Option<u32> {
        (self.expires != 0).then(|| self.expires.saturating_sub(now))
    }
}

/// The stored value of an item: its header, then `data`.
pub fn encode(header: &Header, data: &[u8]) -> Vec<u8> {
    let mut value = Vec::with_capacity(HEADER_BYTES + data.len());
    value.extend_from_slice(&header.flags.to_le_bytes());
    value.extend_from_slice(&header.expires.to_le_bytes());
    value.extend_from_slice(&header.cas.to_le_bytes());
    value.extend_from_slice(data);
    value
}

/// The header and data of a stored value; `None` if it is too short to be an item (a value
/// this server did not write).
pub fn decode(value: &[u8]) -> Option<(Header, &[u8])> {
    if value.len() < HEADER_BYTES {
        return None;
    }
    let u32_at = |at: usize| u32::from_le_bytes(value[at..at + 4].try_into().expect("4 bytes"));
    let cas = u64::from_le_bytes(value[8..16].try_into().expect("8 bytes"));
    Some((Header { flags: u32_at(0), expires: u32_at(4), cas }, &value[HEADER_BYTES..]))
}

/// Unix seconds now.
pub fn now() -> u32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs().min(u32::MAX as u64) as u32)
}

/// The expiry (Unix seconds, 0: never) of an exptime a client sent at Unix second `now`, as
/// memcached reads it: 0 never expires; a negative one has already expired; up to 30 days
/// it is relative; beyond, absolute (one in the past: expired).
pub fn expiry(exptime: i64, now: u32) -> u32 {
    match exptime {
        0 => 0,
        t if t < 0 => 1,
        t if t <= RELATIVE_EXPTIME_MAX => (i64::from(now) + t).min(i64::from(u32::MAX)) as u32,
        t => t.min(i64::from(u32::MAX)) as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_round_trip_and_expire_as_memcached_reads_exptime() {
        let header = Header { flags: 0xDEAD_BEEF, expires: 1_700_000_000, cas: 42 };
        let value = encode(&header, b"data");
        assert_eq!(value.len(), HEADER_BYTES + 4);
        assert_eq!(decode(&value), Some((header, &b"data"[..])));
        assert_eq!(decode(&value[..15]), None);
        let now = 1_800_000_000;
        assert_eq!(expiry(0, now), 0);
        assert_eq!(expiry(-1, now), 1);
        assert_eq!(expiry(100, now), now + 100);
        assert_eq!(expiry(RELATIVE_EXPTIME_MAX, now), now + RELATIVE_EXPTIME_MAX as u32);
        assert_eq!(expiry(RELATIVE_EXPTIME_MAX + 1, now), RELATIVE_EXPTIME_MAX as u32 + 1);
        assert!(Header { expires: 1, ..header }.expired(now));
        assert!(!Header { expires: 0, ..header }.expired(now));
        assert_eq!(Header { expires: now + 5, ..header }.ttl_remaining(now), Some(5));
        assert_eq!(Header { expires: 0, ..header }.ttl_remaining(now), None);
    }
}
