//! The text-protocol decoder: one call finds one request line (and its data block) at the
//! front of the buffer and answers with a request, an error to reply, or "need more bytes".
//! Each command's fields are read in the order memcached 1.6 reads them, so that when a
//! line has several faults the error named is the one memcached names.

use super::error::ProtocolError;
use super::meta;
use super::number::{c_strtol_i32, c_strtoul_u32, token_i32, token_u32, token_u64};
use super::request::{GetCommand, Keys, Request, StoreCommand, KEY_MAX_BYTES};

/// The longest request line memcached waits for: with more than this many bytes buffered and
/// no newline among them it closes the connection, unless the line starts as a `get`/`gets`.
pub const LINE_MAX_BYTES: usize = 2048;

/// memcached lets at most this many spaces precede a `get ` it keeps buffering.
const MULTIGET_LEADING_SPACES_MAX: usize = 100;

/// The most tokens memcached's tokenizer indexes on a line (the rest of a longer line is
/// ignored, except by the key walk of the retrieval commands).
const TOKENS_MAX: usize = 23;

/// The bounds the decoder enforces, sized at start-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The longest value a storage command may carry (memcached's `-I`, 1 MiB by default);
    /// a longer one is answered `SERVER_ERROR object too large for cache` and its data
    /// swallowed.
    pub item_max_bytes: usize,
    /// The longest `get`/`gets` line buffered while waiting for its newline (memcached has
    /// no bound here; Ferrite closes the connection past it). At least [`LINE_MAX_BYTES`].
    pub multiget_line_max_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { item_max_bytes: 1 << 20, multiget_line_max_bytes: 1 << 20 }
    }
}

impl Limits {
    /// The most bytes [`decode`] may ask the caller to hold before it answers: a read buffer
    /// of this size never has to grow.
    pub fn buffer_max_bytes(&self) -> usize {
        // A storage line is at most LINE_MAX_BYTES + 1 with its newline, then data and "\r\n".
        (LINE_MAX_BYTES + 1 + self.item_max_bytes + 2).max(self.multiget_line_max_bytes + 1)
    }
}

/// What [`decode`] found at the front of the buffer.
// A request holds a decoded binary key inline (at most 187 bytes): boxing it would put an
// allocation on the hot path to save a copy of a few hundred bytes.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// No whole request yet: call again with more bytes appended (the buffer holds fewer than
    /// [`Limits::buffer_max_bytes`]).
    NeedMore,
    /// A request, taking the first `consumed` bytes of the buffer.
    Request { request: Request<'a>, consumed: usize },
    /// A refused request. Write `reply` (if any: `noreply` and hostile input get none),
    /// then discard `skip` bytes; `skip` may exceed the buffer when a refused storage
    /// command's data has not all arrived, and the rest is discarded as it comes. When
    /// `close` is set, close the connection after writing instead.
    Error { reply: Option<ProtocolError>, skip: usize, close: bool },
}

/// Decodes the request at the front of `buf`. See the module documentation for the contract.
pub fn decode<'a>(buf: &'a [u8], limits: &Limits) -> Decoded<'a> {
    assert!(limits.multiget_line_max_bytes >= LINE_MAX_BYTES, "multiget limit below line limit");
    let newline = match find_newline(buf, LINE_MAX_BYTES) {
        Some(newline) => newline,
        None if buf.len() <= LINE_MAX_BYTES => return Decoded::NeedMore,
        None if !starts_multiget(buf) => return close(buf.len()),
        None => match find_newline(buf, limits.multiget_line_max_bytes) {
            Some(newline) => newline,
            None if buf.len() <= limits.multiget_line_max_bytes => return Decoded::NeedMore,
            None => return close(buf.len()),
        },
    };
    let line = &buf[..=newline];
    decode_line(Line::new(line), &buf[line.len()..], limits)
}

/// The index of the first `\n` among the first `line_max + 1` bytes.
fn find_newline(buf: &[u8], line_max: usize) -> Option<usize> {
    buf[..buf.len().min(line_max + 1)].iter().position(|&b| b == b'\n')
}

/// Whether a line without a newline yet is one memcached keeps buffering: up to 100 spaces,
/// then `get ` or `gets `.
fn starts_multiget(buf: &[u8]) -> bool {
    let spaces = buf.iter().take_while(|&&b| b == b' ').count();
    let rest = &buf[spaces..];
    spaces <= MULTIGET_LEADING_SPACES_MAX
        && (rest.starts_with(b"get ") || rest.starts_with(b"gets "))
}

fn close(skip: usize) -> Decoded<'static> {
    Decoded::Error { reply: None, skip, close: true }
}

fn refuse(error: ProtocolError, noreply: bool, skip: usize) -> Decoded<'static> {
    Decoded::Error { reply: (!noreply).then_some(error), skip, close: false }
}

/// A request line: all of it (with its newline) and its content (without `\r\n` or `\n`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Line<'a> {
    pub(crate) all: &'a [u8],
    pub(crate) content: &'a [u8],
}

impl<'a> Line<'a> {
    fn new(all: &'a [u8]) -> Line<'a> {
        debug_assert_eq!(all.last(), Some(&b'\n'));
        let end = if all.len() >= 2 && all[all.len() - 2] == b'\r' {
            all.len() - 2
        } else {
            all.len() - 1
        };
        Line { all, content: &all[..end] }
    }
}

/// Where the tokens of a line start and end, as memcached's tokenizer splits them: on
/// single spaces (runs of spaces are one separator), at most [`TOKENS_MAX`] tokens.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tokens<'a> {
    content: &'a [u8],
    ranges: [(u32, u32); TOKENS_MAX],
    pub(crate) count: usize,
}

impl<'a> Tokens<'a> {
    /// Splits `content`; `None` where memcached's tokenizer fails: a token at index
    /// `flags_from` or later whose first byte is neither in `A..=z` nor a digit.
    pub(crate) fn split(content: &'a [u8], flags_from: usize) -> Option<Tokens<'a>> {
        let mut tokens = Tokens { content, ranges: [(0, 0); TOKENS_MAX], count: 0 };
        let mut i = 0;
        while i < content.len() && tokens.count < TOKENS_MAX {
            if content[i] == b' ' {
                i += 1;
                continue;
            }
            let start = i;
            let end = content[i..].iter().position(|&b| b == b' ').map_or(content.len(), |n| i + n);
            if tokens.count >= flags_from {
                let first = content[start];
                if !((b'A'..=b'z').contains(&first) || first.is_ascii_digit()) {
                    return None;
                }
            }
            // Lines are at most LINE_MAX_BYTES long, or a multiget line within its limit.
            tokens.ranges[tokens.count] = (start as u32, end as u32);
            tokens.count += 1;
            i = end;
        }
        Some(tokens)
    }

    pub(crate) fn get(&self, index: usize) -> Option<&'a [u8]> {
        let &(start, end) = self.ranges[..self.count].get(index)?;
        Some(&self.content[start as usize..end as usize])
    }

    /// Where token `index` starts in the line's content.
    fn start(&self, index: usize) -> usize {
        self.ranges[index].0 as usize
    }

    /// The content from token `index` on (empty past the last token).
    pub(crate) fn rest_from(&self, index: usize) -> &'a [u8] {
        if index < self.count {
            &self.content[self.start(index)..]
        } else {
            &[]
        }
    }

    /// Whether the last token is `noreply`, which is how memcached decides.
    fn noreply(&self) -> bool {
        self.count > 0 && self.get(self.count - 1) == Some(b"noreply")
    }
}

/// A text key memcached accepts: 1..=250 bytes. Ferrite also refuses control characters,
/// which the protocol text forbids (memcached itself stores them).
pub(crate) fn key_ok(key: &[u8]) -> bool {
    !key.is_empty() && key.len() <= KEY_MAX_BYTES && !key.iter().any(|&b| b < 0x20 || b == 0x7f)
}

fn decode_line<'a>(line: Line<'a>, after: &'a [u8], limits: &Limits) -> Decoded<'a> {
    let skip = line.all.len();
    // Shorter than the shortest command ("mn\r\n"): memcached refuses it as malformed.
    if line.all.len() < 4 {
        return refuse(ProtocolError::BadCommandLineFormat, false, skip);
    }
    let command_len = line.content.iter().position(|&b| b == b' ').unwrap_or(line.content.len());
    let request = |request: Request<'a>| Decoded::Request { request, consumed: skip };
    match &line.content[..command_len] {
        b"get" => decode_get(line, GetCommand::Get),
        b"gets" => decode_get(line, GetCommand::Gets),
        b"gat" => decode_get(line, GetCommand::Gat),
        b"gats" => decode_get(line, GetCommand::Gats),
        b"set" => decode_store(line, after, StoreCommand::Set, limits),
        b"add" => decode_store(line, after, StoreCommand::Add, limits),
        b"replace" => decode_store(line, after, StoreCommand::Replace, limits),
        b"append" => decode_store(line, after, StoreCommand::Append, limits),
        b"prepend" => decode_store(line, after, StoreCommand::Prepend, limits),
        b"cas" => decode_store(line, after, StoreCommand::Cas, limits),
        b"incr" => decode_arithmetic(line, true),
        b"decr" => decode_arithmetic(line, false),
        b"touch" => decode_touch(line),
        b"delete" => decode_delete(line),
        b"flush_all" => decode_flush_all(line),
        b"verbosity" => decode_verbosity(line),
        b"stats" => {
            let args = &line.content[command_len..];
            let start = args.iter().position(|&b| b != b' ').unwrap_or(args.len());
            request(Request::Stats { args: &args[start..] })
        }
        b"version" => request(Request::Version),
        b"backup" => decode_backup(line),
        b"quit" => request(Request::Quit),
        b"mn" => request(Request::MetaNoop),
        b"mg" | b"md" | b"ma" | b"me" | b"ms" => meta::decode(line, after, limits),
        _ => decode_unknown(line),
    }
}

/// An unknown command: `ERROR`, unless its last token is `noreply` (then nothing), or it
/// looks like an HTTP request line (then memcached closes the connection without a word).
fn decode_unknown(line: Line<'_>) -> Decoded<'static> {
    let skip = line.all.len();
    let tokens = Tokens::split(line.content, usize::MAX).expect("no flags to check");
    if tokens.count > 1 && tokens.get(tokens.count - 1).is_some_and(|t| t.starts_with(b"HTTP/")) {
        return close(skip);
    }
    refuse(ProtocolError::UnknownCommand, tokens.noreply(), skip)
}

/// `get|gets <key>*`, `gat|gats <exptime> <key>*`. Retrieval commands have no `noreply`
/// (a trailing `noreply` is a key); every key is checked before any is looked up.
fn decode_get(line: Line<'_>, command: GetCommand) -> Decoded<'_> {
    let skip = line.all.len();
    let tokens = Tokens::split(line.content, usize::MAX).expect("no flags to check");
    let touch = matches!(command, GetCommand::Gat | GetCommand::Gats);
    let first_key = if touch { 2 } else { 1 };
    if tokens.count <= first_key {
        return refuse(ProtocolError::BadCommandLineFormat, false, skip);
    }
    let exptime = if touch {
        match tokens.get(1).and_then(token_i32) {
            Some(exptime) => Some(exptime),
            None => return refuse(ProtocolError::InvalidExptime, false, skip),
        }
    } else {
        None
    };
    let keys = Keys { rest: &line.content[tokens.start(first_key)..] };
    if !keys.into_iter().all(key_ok) {
        return refuse(ProtocolError::BadCommandLineFormat, false, skip);
    }
    Decoded::Request { request: Request::Get { command, exptime, keys }, consumed: skip }
}

/// `<command> <key> <flags> <exptime> <bytes> [<cas unique>] [noreply]` and its data block.
fn decode_store<'a>(
    line: Line<'a>,
    after: &'a [u8],
    command: StoreCommand,
    limits: &Limits,
) -> Decoded<'a> {
    let line_len = line.all.len();
    let tokens = Tokens::split(line.content, usize::MAX).expect("no flags to check");
    // A bad <bytes> is refused before anything is swallowed: what follows is read as
    // commands, as memcached reads it.
    let Some(value_len) = tokens.get(4).filter(|_| tokens.count >= 5).and_then(token_i32) else {
        return refuse(ProtocolError::BadCommandLineFormat, false, line_len);
    };
    if !(0..=i32::MAX - 2).contains(&value_len) {
        return refuse(ProtocolError::BadCommandLineFormat, false, line_len);
    }
    let value_len = value_len as usize;
    let noreply = tokens.noreply();
    let whole = line_len + value_len + 2;
    let swallow = |error| refuse(error, noreply, whole);
    let key = tokens.get(1).expect("five tokens");
    if !key_ok(key) {
        return swallow(ProtocolError::BadCommandLineFormat);
    }
    let flags = c_strtoul_u32(&line.all[tokens.start(2)..]);
    let exptime = c_strtol_i32(&line.all[tokens.start(3)..]);
    let (Some(flags), Some(exptime)) = (flags, exptime) else {
        return swallow(ProtocolError::BadCommandLineFormat);
    };
    let cas = if command == StoreCommand::Cas {
        match tokens.get(5).and_then(token_u64) {
            Some(cas) => Some(cas),
            None => return swallow(ProtocolError::BadCommandLineFormat),
        }
    } else {
        None
    };
    if value_len > limits.item_max_bytes {
        return swallow(ProtocolError::ObjectTooLarge);
    }
    let Some(data) = data_block(after, value_len) else { return Decoded::NeedMore };
    let Ok(data) = data else { return swallow(ProtocolError::BadDataChunk) };
    let request = Request::Store { command, key, flags, exptime, cas, data, noreply };
    Decoded::Request { request, consumed: whole }
}

/// The data block of `value_len` bytes at the front of `after`: `None` until it and its
/// `\r\n` have arrived, then the data, or `Err` when the two bytes after it are not `\r\n`.
pub(crate) fn data_block(after: &[u8], value_len: usize) -> Option<Result<&[u8], ()>> {
    let block = after.get(..value_len + 2)?;
    Some(if block.ends_with(b"\r\n") { Ok(&block[..value_len]) } else { Err(()) })
}

/// `incr|decr <key> <delta> [noreply]`.
fn decode_arithmetic(line: Line<'_>, incr: bool) -> Decoded<'_> {
    let skip = line.all.len();
    match key_and_number(line, token_u64, ProtocolError::InvalidDeltaArgument) {
        Ok((key, delta, noreply)) => Decoded::Request {
            request: Request::Arithmetic { incr, key, delta, noreply },
            consumed: skip,
        },
        Err((error, noreply)) => refuse(error, noreply, skip),
    }
}

/// `touch <key> <exptime> [noreply]`.
fn decode_touch(line: Line<'_>) -> Decoded<'_> {
    let skip = line.all.len();
    match key_and_number(line, token_i32, ProtocolError::InvalidExptime) {
        Ok((key, exptime, noreply)) => {
            Decoded::Request { request: Request::Touch { key, exptime, noreply }, consumed: skip }
        }
        Err((error, noreply)) => refuse(error, noreply, skip),
    }
}

/// The fields of `<command> <key> <number> [noreply]`: the key, the number read by
/// `number` (refused with `bad_number`) and `noreply`; or the error memcached answers, and
/// whether `noreply` hides it.
fn key_and_number<'a, T>(
    line: Line<'a>,
    number: impl Fn(&[u8]) -> Option<T>,
    bad_number: ProtocolError,
) -> Result<(&'a [u8], T, bool), (ProtocolError, bool)> {
    let tokens = Tokens::split(line.content, usize::MAX).expect("no flags to check");
    if tokens.count < 3 {
        return Err((ProtocolError::BadCommandLineFormat, false));
    }
    let noreply = tokens.noreply();
    let key = tokens.get(1).expect("three tokens");
    if !key_ok(key) {
        return Err((ProtocolError::BadCommandLineFormat, noreply));
    }
    match tokens.get(2).and_then(number) {
        Some(value) => Ok((key, value, noreply)),
        None => Err((bad_number, noreply)),
    }
}

/// `delete <key> [0] [noreply]`: the `0` is the old delay argument, still accepted; any
/// other trailing token is refused, as memcached 1.6.18 (Debian's) refuses it. (memcached's
/// parser of 2025 ignores trailing tokens instead; libmemcached's `memccapable` expects the
/// refusal.)
fn decode_delete(line: Line<'_>) -> Decoded<'_> {
    let skip = line.all.len();
    let tokens = Tokens::split(line.content, usize::MAX).expect("no flags to check");
    if tokens.count < 2 {
        return refuse(ProtocolError::BadCommandLineFormat, false, skip);
    }
    let noreply = tokens.noreply();
    let key = tokens.get(1).expect("two tokens");
    if !key_ok(key) {
        return refuse(ProtocolError::BadCommandLineFormat, noreply, skip);
    }
    let zero = tokens.get(2) == Some(&b"0"[..]);
    let valid = match tokens.count {
        2 => true,
        3 => zero || noreply,
        4 => zero && noreply,
        _ => false,
    };
    if !valid {
        return refuse(ProtocolError::DeleteUsage, noreply, skip);
    }
    Decoded::Request { request: Request::Delete { key, noreply }, consumed: skip }
}

/// `flush_all [<delay>] [noreply]`: the delay is read whenever there is a token besides
/// the command and a trailing `noreply`.
fn decode_flush_all(line: Line<'_>) -> Decoded<'_> {
    let skip = line.all.len();
    let tokens = Tokens::split(line.content, usize::MAX).expect("no flags to check");
    let noreply = tokens.noreply();
    let delay = if tokens.count != if noreply { 2 } else { 1 } {
        match tokens.get(1).and_then(token_i32) {
            Some(delay) => delay,
            None => return refuse(ProtocolError::InvalidExptime, noreply, skip),
        }
    } else {
        0
    };
    Decoded::Request { request: Request::FlushAll { delay, noreply }, consumed: skip }
}

/// `verbosity <level> [noreply]`.
/// `backup <name>`: a name that can only be one entry of the backup directory.
fn decode_backup(line: Line<'_>) -> Decoded<'_> {
    let skip = line.all.len();
    let tokens = Tokens::split(line.content, usize::MAX).expect("no flags to check");
    match (tokens.get(1), tokens.get(2)) {
        (Some(name), None) if backup_name_ok(name) => {
            Decoded::Request { request: Request::Backup { name }, consumed: skip }
        }
        _ => refuse(ProtocolError::BadCommandLineFormat, false, skip),
    }
}

/// Longest name `backup` takes.
pub const BACKUP_NAME_MAX_BYTES: usize = 64;

fn backup_name_ok(name: &[u8]) -> bool {
    (1..=BACKUP_NAME_MAX_BYTES).contains(&name.len())
        && name[0] != b'.'
        && name.iter().all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn decode_verbosity(line: Line<'_>) -> Decoded<'_> {
    let skip = line.all.len();
    let tokens = Tokens::split(line.content, usize::MAX).expect("no flags to check");
    let noreply = tokens.noreply();
    let Some(level) = tokens.get(1).and_then(token_u32) else {
        return refuse(ProtocolError::BadCommandLineFormat, noreply, skip);
    };
    Decoded::Request { request: Request::Verbosity { level, noreply }, consumed: skip }
}
