//! The meta commands (`mg ms md ma me`; `mn` needs no parsing): their flags read into
//! [`MetaFlags`] with the checks, and the error precedence, of memcached 1.6. Meta errors are
//! always replied, quiet mode or not.

use super::decode::{data_block, key_ok, Decoded, Limits, Line, Tokens};
use super::error::ProtocolError;
use super::number::{token_i32, token_u32, token_u64};
use super::request::{BinaryKey, Key, MetaFlags, Request, KEY_MAX_BYTES, OPAQUE_TOKEN_MAX_BYTES};

/// More tokens than this on a meta line (command and key included) are refused.
const META_TOKENS_MAX: usize = 20;

/// The meta commands whose replies carry flags, for the reply writer and quiet mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaCommand {
    Get,
    Set,
    Delete,
    Arithmetic,
}

impl MetaCommand {
    /// Whether quiet mode (`q`) suppresses a reply with this status, as memcached does:
    ///
    /// - `mg`: `EN` (a miss) is hidden; hits (`VA`, `HD`) are sent.
    /// - `ms`: `HD` (stored) is hidden; `NS`, `EX`, `NF` are sent.
    /// - `md`: `HD` (deleted or marked stale) is hidden; `NF`, `EX`, `NS` are sent.
    /// - `ma`: success (`HD`, or `VA` with the number) is hidden; `NF`, `NS`, `EX` are sent.
    ///
    /// `mn` and `me` have no quiet mode, and errors are never hidden.
    pub fn quiet_hides(self, status: MetaStatus) -> bool {
        matches!(
            (self, status),
            (MetaCommand::Get, MetaStatus::En)
                | (MetaCommand::Set, MetaStatus::Hd)
                | (MetaCommand::Delete, MetaStatus::Hd)
                | (MetaCommand::Arithmetic, MetaStatus::Hd | MetaStatus::Va)
        )
    }
}

/// The status code that opens a meta reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaStatus {
    /// `HD`: success without a value.
    Hd,
    /// `VA <size>`: success with a value.
    Va,
    /// `EN`: a miss (mg).
    En,
    /// `NF`: not found.
    Nf,
    /// `NS`: not stored.
    Ns,
    /// `EX`: the cas did not match.
    Ex,
}

impl MetaStatus {
    pub(crate) fn as_bytes(self) -> &'static [u8] {
        match self {
            MetaStatus::Hd => b"HD",
            MetaStatus::Va => b"VA",
            MetaStatus::En => b"EN",
            MetaStatus::Nf => b"NF",
            MetaStatus::Ns => b"NS",
            MetaStatus::Ex => b"EX",
        }
    }
}

fn refuse(error: ProtocolError, skip: usize) -> Decoded<'static> {
    Decoded::Error { reply: Some(error), skip, close: false }
}

/// Decodes `mg`, `md`, `ma`, `me` and `ms` lines (`ms` with its data block).
pub(crate) fn decode<'a>(line: Line<'a>, after: &'a [u8], limits: &Limits) -> Decoded<'a> {
    let skip = line.all.len();
    let command = &line.content[..2];
    let flags_from = if command == b"ms" { 3 } else { 2 };
    let min_tokens = flags_from;
    let Some(tokens) = Tokens::split(line.content, flags_from).filter(|t| t.count >= min_tokens)
    else {
        return refuse(ProtocolError::BadCommandLineFormat, skip);
    };
    let raw_key = tokens.get(1).expect("two tokens");
    match command {
        b"me" => decode_debug(&tokens, raw_key, skip),
        b"ms" => decode_set(line, after, &tokens, raw_key, limits),
        _ => {
            let (command, parsed) = match command {
                b"mg" => (MetaCommand::Get, parse_flags(&tokens, 2)),
                b"md" => (MetaCommand::Delete, parse_flags(&tokens, 2)),
                _ => (
                    MetaCommand::Arithmetic,
                    parse_flags(&tokens, 2).map_err(|_| ProtocolError::InvalidOrDuplicateFlag),
                ),
            };
            let (key, mut flags) = match parsed.and_then(|p| check(p, raw_key)) {
                Ok(parsed) => parsed,
                Err(error) => return refuse(error, skip),
            };
            match command {
                MetaCommand::Arithmetic => {
                    if !matches!(flags.mode, None | Some(b'I' | b'+' | b'D' | b'-')) {
                        return refuse(ProtocolError::InvalidMaMode, skip);
                    }
                }
                _ => flags.mode = None,
            }
            let request = match command {
                MetaCommand::Get => Request::MetaGet { key, flags },
                MetaCommand::Delete => Request::MetaDelete { key, flags },
                _ => Request::MetaArithmetic { key, flags },
            };
            Decoded::Request { request, consumed: skip }
        }
    }
}

/// `me <key> [b]`. memcached decodes a base64 key here only when a fourth token follows the
/// `b` (its check counts one token too many); Ferrite does the same.
fn decode_debug<'a>(tokens: &Tokens<'a>, raw_key: &'a [u8], skip: usize) -> Decoded<'a> {
    if raw_key.len() > KEY_MAX_BYTES {
        return refuse(ProtocolError::BadCommandLineFormat, skip);
    }
    let key = if tokens.count >= 4 && tokens.get(2) == Some(b"b") {
        match BinaryKey::decode(raw_key) {
            Some(key) => Key::Binary(key),
            None => return refuse(ProtocolError::BadCommandLineFormat, skip),
        }
    } else if key_ok(raw_key) {
        Key::Text(raw_key)
    } else {
        return refuse(ProtocolError::BadCommandLineFormat, skip);
    };
    Decoded::Request { request: Request::MetaDebug { key }, consumed: skip }
}

/// `ms <key> <datalen> <flags>*`: a bad `<datalen>` is refused alone; any later fault
/// swallows the data block too.
fn decode_set<'a>(
    line: Line<'a>,
    after: &'a [u8],
    tokens: &Tokens<'a>,
    raw_key: &'a [u8],
    limits: &Limits,
) -> Decoded<'a> {
    let line_len = line.all.len();
    let Some(value_len) = tokens.get(2).and_then(token_i32) else {
        return refuse(ProtocolError::BadCommandLineFormat, line_len);
    };
    if !(0..=i32::MAX - 2).contains(&value_len) {
        return refuse(ProtocolError::BadCommandLineFormat, line_len);
    }
    let value_len = value_len as usize;
    let whole = line_len + value_len + 2;
    let (key, flags) = match parse_flags(tokens, 3).and_then(|p| check(p, raw_key)) {
        Ok(parsed) => parsed,
        Err(error) => return refuse(error, whole),
    };
    if !matches!(flags.mode, None | Some(b'E' | b'A' | b'P' | b'R' | b'S')) {
        return refuse(ProtocolError::InvalidMsMode, whole);
    }
    if value_len > limits.item_max_bytes {
        return refuse(ProtocolError::ObjectTooLarge, whole);
    }
    let Some(data) = data_block(after, value_len) else { return Decoded::NeedMore };
    let Ok(data) = data else { return refuse(ProtocolError::BadDataChunk, whole) };
    Decoded::Request { request: Request::MetaSet { key, flags, data }, consumed: whole }
}

/// The flags with the key they apply to, before the checks that follow parsing.
struct Parsed<'a> {
    flags: MetaFlags<'a>,
    binary_key: Option<BinaryKey>,
}

/// The checks memcached makes after parsing the flags: a text key's characters (Ferrite's
/// own, see `key_ok`) and the opaque token's length.
fn check<'a>(
    parsed: Parsed<'a>,
    raw_key: &'a [u8],
) -> Result<(Key<'a>, MetaFlags<'a>), ProtocolError> {
    let key = match parsed.binary_key {
        Some(key) => Key::Binary(key),
        None if key_ok(raw_key) => Key::Text(raw_key),
        None => return Err(ProtocolError::BadCommandLineFormat),
    };
    if parsed.flags.opaque.is_some_and(|o| o.len() + 1 > OPAQUE_TOKEN_MAX_BYTES) {
        return Err(ProtocolError::OpaqueTooLong);
    }
    Ok((key, parsed.flags))
}

/// A flag's numeric argument: the rest of its token, which must not be empty.
fn argument(token: &[u8]) -> Option<&[u8]> {
    token.get(1..).filter(|a| !a.is_empty())
}

/// Reads the flag tokens from index `first` on, as memcached does: a repeated or unknown
/// flag stops at once; a bad argument is remembered and reading goes on (the last error
/// seen is the one replied).
fn parse_flags<'a>(tokens: &Tokens<'a>, first: usize) -> Result<Parsed<'a>, ProtocolError> {
    let raw_key = tokens.get(1).expect("a key token");
    if raw_key.len() > KEY_MAX_BYTES {
        return Err(ProtocolError::BadCommandLineFormat);
    }
    if tokens.count > META_TOKENS_MAX {
        return Err(ProtocolError::FlagsTooLong);
    }
    let mut flags = MetaFlags::default();
    let mut binary_key = None;
    let mut error: Option<ProtocolError> = None;
    let mut seen = [false; 128];
    for index in first..tokens.count {
        let token = tokens.get(index).expect("index below count");
        let flag = token[0];
        if flag >= 127 || seen[usize::from(flag)] {
            return Err(ProtocolError::DuplicateFlag);
        }
        seen[usize::from(flag)] = true;
        match flag {
            b'b' => {
                flags.base64_key = true;
                binary_key = BinaryKey::decode(raw_key);
                if binary_key.is_none() {
                    error = Some(ProtocolError::ErrorDecodingKey);
                }
            }
            b'N' | b'T' | b'R' => match argument(token).and_then(token_i32) {
                Some(ttl) => match flag {
                    b'N' => flags.vivify_ttl = Some(ttl),
                    b'T' => flags.ttl = Some(ttl),
                    _ => flags.recache_ttl = Some(ttl),
                },
                None => error = Some(ProtocolError::BadToken),
            },
            b'C' | b'E' => match argument(token).and_then(token_u64) {
                Some(cas) if flag == b'C' => flags.compare_cas = Some(cas),
                Some(cas) => flags.explicit_cas = Some(cas),
                None => error = Some(ProtocolError::BadToken),
            },
            b'F' => match argument(token).and_then(token_u32) {
                Some(client_flags) => flags.client_flags = Some(client_flags),
                // memcached flags the error without naming it: the default message stands.
                None => error = Some(error.unwrap_or(ProtocolError::BadCommandLineFormat)),
            },
            b'J' => match argument(token).and_then(token_u64) {
                Some(initial) => flags.initial = Some(initial),
                None => error = Some(ProtocolError::InvalidNumericInitial),
            },
            b'D' => match argument(token).and_then(token_u64) {
                Some(delta) => flags.delta = Some(delta),
                None => error = Some(ProtocolError::InvalidNumericDelta),
            },
            // The mode is the byte after `M` (a bare `M` reads the separator after it, which
            // no command accepts).
            b'M' => flags.mode = Some(token.get(1).copied().unwrap_or(b' ')),
            b'O' => flags.opaque = Some(&token[1..]),
            b'c' => flags.return_cas = true,
            b'f' => flags.return_flags = true,
            b'h' => flags.return_hit = true,
            b'k' => flags.return_key = true,
            b'l' => flags.return_last_access = true,
            b's' => flags.return_size = true,
            b't' => flags.return_ttl = true,
            b'v' => flags.return_value = true,
            b'q' => flags.quiet = true,
            b'u' => flags.no_bump = true,
            b'I' => flags.invalidate = true,
            b'x' => flags.remove_value = true,
            // The proxy's flags, accepted and ignored by the server.
            b'P' | b'L' => {}
            _ => return Err(ProtocolError::InvalidFlag),
        }
    }
    if let Some(error) = error {
        return Err(error);
    }
    flags.tokens = tokens.rest_from(first);
    Ok(Parsed { flags, binary_key })
}
