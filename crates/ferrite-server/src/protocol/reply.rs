//! The reply writer: appends memcached 1.6's replies, byte for byte, to a connection's
//! output `Vec<u8>`. Meta replies echo the request's return flags in the order the client
//! sent them, as memcached does.

use std::io::Write as _;

use super::base64;
use super::error::ProtocolError;
use super::meta::{MetaCommand, MetaStatus};
use super::request::{Key, MetaFlags};

/// The one-word replies of the text protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Stored,
    NotStored,
    Exists,
    NotFound,
    Deleted,
    Touched,
    Ok,
    End,
    /// `stats reset`'s reply.
    Reset,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Stored => "STORED",
            Status::NotStored => "NOT_STORED",
            Status::Exists => "EXISTS",
            Status::NotFound => "NOT_FOUND",
            Status::Deleted => "DELETED",
            Status::Touched => "TOUCHED",
            Status::Ok => "OK",
            Status::End => "END",
            Status::Reset => "RESET",
        }
    }
}

fn line(out: &mut Vec<u8>, text: &[u8]) {
    out.extend_from_slice(text);
    out.extend_from_slice(b"\r\n");
}

/// `STORED\r\n`, `NOT_FOUND\r\n`, …
pub fn write_status(out: &mut Vec<u8>, status: Status) {
    line(out, status.as_str().as_bytes());
}

/// An error line, e.g. `CLIENT_ERROR bad data chunk\r\n`.
pub fn write_error(out: &mut Vec<u8>, error: ProtocolError) {
    line(out, error.as_str().as_bytes());
}

/// One hit of a retrieval command: `VALUE <key> <flags> <bytes>[ <cas>]\r\n<data>\r\n`.
/// Follow the last with [`write_end`].
pub fn write_value(out: &mut Vec<u8>, key: &[u8], flags: u32, data: &[u8], cas: Option<u64>) {
    write_value_line(out, key, flags, data.len() as u64, cas);
    line(out, data);
}

/// The line before a value of `len` bytes: `VALUE <key> <flags> <bytes>[ <cas>]\r\n` (the
/// data and its `\r\n` follow; a streamed value sends them later).
pub fn write_value_line(out: &mut Vec<u8>, key: &[u8], flags: u32, len: u64, cas: Option<u64>) {
    out.extend_from_slice(b"VALUE ");
    out.extend_from_slice(key);
    write!(out, " {flags} {len}").expect("writing to a Vec");
    if let Some(cas) = cas {
        write!(out, " {cas}").expect("writing to a Vec");
    }
    out.extend_from_slice(b"\r\n");
}

/// `END\r\n`, closing every retrieval reply (hits or not).
pub fn write_end(out: &mut Vec<u8>) {
    write_status(out, Status::End);
}

/// The new value after `incr`/`decr`: the number alone on its line.
pub fn write_number(out: &mut Vec<u8>, value: u64) {
    write!(out, "{value}\r\n").expect("writing to a Vec");
}

/// One statistic: `STAT <name> <value>\r\n` (the list ends with [`write_end`]).
pub fn write_stat(out: &mut Vec<u8>, name: &str, value: impl std::fmt::Display) {
    write!(out, "STAT {name} {value}\r\n").expect("writing to a Vec");
}

/// `VERSION <version>\r\n`.
pub fn write_version(out: &mut Vec<u8>, version: &str) {
    write!(out, "VERSION {version}\r\n").expect("writing to a Vec");
}

/// `MN\r\n`, the reply to `mn`.
pub fn write_meta_noop(out: &mut Vec<u8>) {
    line(out, b"MN");
}

/// What the store knows of an item, for the return flags of a meta reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetaItem {
    /// The value's length in bytes (`s`).
    pub size: u64,
    /// The client flags (`f`).
    pub client_flags: u32,
    /// The cas value (`c`).
    pub cas: u64,
    /// Seconds of life left (`t`); `None` for an item that never expires (written `-1`).
    pub ttl_remaining: Option<u32>,
    /// Seconds since the last access (`l`).
    pub last_access: u32,
    /// Whether the item was fetched before (`h`).
    pub fetched: bool,
    /// The item already sent a winning token (mg appends `Z`).
    pub token_sent: bool,
    /// The item is stale (mg appends `X`).
    pub stale: bool,
    /// This request won the recache token (mg appends `W`).
    pub won: bool,
}

/// One meta reply to write.
#[derive(Debug, Clone, Copy)]
pub struct MetaReply<'r, 'a> {
    pub command: MetaCommand,
    pub status: MetaStatus,
    /// The request's key, echoed by `k` (base64 again, then ` b`, for a binary key).
    pub key: &'r Key<'a>,
    pub flags: &'r MetaFlags<'a>,
    /// The item, for the flags that report on it: needed for an mg hit and an ma success;
    /// for ms it gives `c` and `s` (0 without it, as memcached writes after a failure).
    pub item: Option<&'r MetaItem>,
    /// The value after a `VA` status (mg's data, ma's number in decimal).
    pub value: Option<&'r [u8]>,
}

/// Writes a meta reply, or nothing when quiet mode hides it (see
/// [`MetaCommand::quiet_hides`]); returns whether anything was written.
///
/// Which return flags each command echoes (the others are accepted and not echoed):
/// - `mg` hit: `s t c f l h O k` in request order, then `Z`, `X`, `W` as the item says;
///   miss (`EN`): `O k`.
/// - `ms`: `O k c s`.
/// - `md`: `O k`.
/// - `ma` success: `c t O k`; otherwise `O k`.
pub fn write_meta(out: &mut Vec<u8>, reply: &MetaReply<'_, '_>) -> bool {
    if reply.flags.quiet && reply.command.quiet_hides(reply.status) {
        return false;
    }
    out.extend_from_slice(reply.status.as_bytes());
    let value = match reply.status {
        MetaStatus::Va => reply.value.expect("a VA reply carries a value"),
        _ => &[],
    };
    if reply.status == MetaStatus::Va {
        write!(out, " {}", value.len()).expect("writing to a Vec");
    }
    let hit = matches!(reply.status, MetaStatus::Hd | MetaStatus::Va);
    let item = reply.item.copied().unwrap_or_default();
    let reports_item = match reply.command {
        MetaCommand::Get | MetaCommand::Arithmetic => hit && reply.item.is_some(),
        MetaCommand::Set => true,
        MetaCommand::Delete => false,
    };
    for token in reply.flags.tokens() {
        match token[0] {
            b'O' => {
                out.push(b' ');
                out.extend_from_slice(token);
            }
            b'k' => write_key(out, reply.key),
            flag if reports_item => write_item_flag(out, reply.command, flag, &item),
            _ => {}
        }
    }
    if reply.command == MetaCommand::Get && reports_item {
        for (set, flag) in [(item.token_sent, b'Z'), (item.stale, b'X'), (item.won, b'W')] {
            if set {
                out.extend_from_slice(&[b' ', flag]);
            }
        }
    }
    out.extend_from_slice(b"\r\n");
    if reply.status == MetaStatus::Va {
        line(out, value);
    }
    true
}

/// ` k<key>`, or ` k<base64 key> b` for a binary key.
fn write_key(out: &mut Vec<u8>, key: &Key<'_>) {
    out.extend_from_slice(b" k");
    match key {
        Key::Text(key) => out.extend_from_slice(key),
        Key::Binary(key) => {
            base64::encode(key.as_bytes(), out);
            out.extend_from_slice(b" b");
        }
    }
}

/// The item-reporting flags each command echoes.
fn write_item_flag(out: &mut Vec<u8>, command: MetaCommand, flag: u8, item: &MetaItem) {
    let echoes = match command {
        MetaCommand::Get => b"stcflh".contains(&flag),
        MetaCommand::Set => b"cs".contains(&flag),
        MetaCommand::Arithmetic => b"ct".contains(&flag),
        MetaCommand::Delete => false,
    };
    if !echoes {
        return;
    }
    out.push(b' ');
    out.push(flag);
    let written = match flag {
        b's' => write!(out, "{}", item.size),
        b't' => match item.ttl_remaining {
            Some(ttl) => write!(out, "{ttl}"),
            None => write!(out, "-1"),
        },
        b'c' => write!(out, "{}", item.cas),
        b'f' => write!(out, "{}", item.client_flags),
        b'l' => write!(out, "{}", item.last_access),
        _ => write!(out, "{}", u8::from(item.fetched)),
    };
    written.expect("writing to a Vec");
}

/// What `me` reports of an item.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetaDebug {
    /// Seconds of life left, -1 for never.
    pub exp: i64,
    /// Seconds since the last access.
    pub la: u64,
    pub cas: u64,
    pub fetched: bool,
    /// The slab class (memcached's; Ferrite reports what it likes here).
    pub cls: u32,
    /// The item's total size in bytes.
    pub size: u64,
}

/// `ME <key> exp=… la=… cas=… fetch=yes|no cls=… size=…\r\n` (a binary key is written in
/// base64, without the ` b` that `k` adds).
pub fn write_meta_debug(out: &mut Vec<u8>, key: &Key<'_>, debug: &MetaDebug) {
    out.extend_from_slice(b"ME ");
    match key {
        Key::Text(key) => out.extend_from_slice(key),
        Key::Binary(key) => base64::encode(key.as_bytes(), out),
    }
    let fetch = if debug.fetched { "yes" } else { "no" };
    write!(
        out,
        " exp={} la={} cas={} fetch={fetch} cls={} size={}\r\n",
        debug.exp, debug.la, debug.cas, debug.cls, debug.size
    )
    .expect("writing to a Vec");
}
