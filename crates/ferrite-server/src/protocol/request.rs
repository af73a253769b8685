//! What a decoded request is: one variant per memcached command, borrowing its key, keys and
//! data from the connection's read buffer (a base64 meta key is the one thing copied, into
//! the request itself, because its decoded bytes exist nowhere else).

use super::base64;

/// Longest key memcached accepts, in bytes (its `KEY_MAX_LENGTH`); for a base64 meta key
/// this bounds the encoded form.
pub const KEY_MAX_BYTES: usize = 250;

/// Longest decoded base64 key: 250 base64 characters decode to at most 187 bytes.
pub const BINARY_KEY_MAX_BYTES: usize = KEY_MAX_BYTES / 4 * 3;

/// Longest meta opaque token, counted with its leading `O` as memcached counts it.
pub const OPAQUE_TOKEN_MAX_BYTES: usize = 32;

/// One decoded request. Keys and data borrow from the buffer given to
/// [`decode`](super::decode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    /// `get|gets|gat|gats [<exptime>] <key>*`: one `VALUE` per hit, then one `END`.
    Get { command: GetCommand, exptime: Option<i32>, keys: Keys<'a> },
    /// `set|add|replace|append|prepend <key> <flags> <exptime> <bytes> [noreply]` and
    /// `cas <key> <flags> <exptime> <bytes> <cas unique> [noreply]`, with the data block.
    Store {
        command: StoreCommand,
        key: &'a [u8],
        flags: u32,
        exptime: i32,
        /// The `<cas unique>` of `cas`; `None` for the other storage commands.
        cas: Option<u64>,
        data: &'a [u8],
        noreply: bool,
    },
    /// `incr|decr <key> <delta> [noreply]`.
    Arithmetic { incr: bool, key: &'a [u8], delta: u64, noreply: bool },
    /// `touch <key> <exptime> [noreply]`.
    Touch { key: &'a [u8], exptime: i32, noreply: bool },
    /// `delete <key> [noreply]`.
    Delete { key: &'a [u8], noreply: bool },
    /// `flush_all [<delay>] [noreply]` (delay 0 when absent).
    FlushAll { delay: i32, noreply: bool },
    /// `stats [<args>]`: the arguments as sent (spaces between them kept), empty for none.
    Stats { args: &'a [u8] },
    /// `version`.
    Version,
    /// `verbosity <level> [noreply]`.
    Verbosity { level: u32, noreply: bool },
    /// `quit`: the caller closes the connection without a reply.
    Quit,
    /// `mg <key> <flags>*`.
    MetaGet { key: Key<'a>, flags: MetaFlags<'a> },
    /// `ms <key> <datalen> <flags>*` with its data block.
    MetaSet { key: Key<'a>, flags: MetaFlags<'a>, data: &'a [u8] },
    /// `md <key> <flags>*`.
    MetaDelete { key: Key<'a>, flags: MetaFlags<'a> },
    /// `ma <key> <flags>*`.
    MetaArithmetic { key: Key<'a>, flags: MetaFlags<'a> },
    /// `mn`: answered `MN`.
    MetaNoop,
    /// `me <key> [b]`: answered `ME <key> <debug>` or `EN`.
    MetaDebug { key: Key<'a> },
    /// `backup <name>` (Ferrite's own): an online backup of the database into `<name>`
    /// under the server's backup directory. The name is 1..=64 bytes of letters, digits,
    /// `.`, `_` and `-`, not starting with `.` (so it names one entry of that directory).
    Backup { name: &'a [u8] },
}

/// Which of the four retrieval commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GetCommand {
    Get,
    Gets,
    Gat,
    Gats,
}

impl GetCommand {
    /// Whether `VALUE` lines carry the cas unique (`gets`, `gats`).
    pub fn returns_cas(self) -> bool {
        matches!(self, GetCommand::Gets | GetCommand::Gats)
    }
}

/// Which text storage command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreCommand {
    Set,
    Add,
    Replace,
    Append,
    Prepend,
    Cas,
}

/// The keys of a retrieval command, split on spaces as they are walked (no allocation).
/// Every key has already been checked (1..=250 bytes, no control characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keys<'a> {
    pub(crate) rest: &'a [u8],
}

impl<'a> Keys<'a> {
    /// The keys as sent, separated by one or more spaces.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.rest
    }
}

impl<'a> Iterator for Keys<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let start = self.rest.iter().position(|&b| b != b' ')?;
        let rest = &self.rest[start..];
        let end = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
        self.rest = &rest[end..];
        Some(&rest[..end])
    }
}

/// A meta command's key: as sent, or decoded from base64 when the `b` flag was given.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Key<'a> {
    Text(&'a [u8]),
    Binary(BinaryKey),
}

impl<'a> Key<'a> {
    /// The key's bytes (decoded, for a binary key).
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Key::Text(key) => key,
            Key::Binary(key) => key.as_bytes(),
        }
    }

    /// Whether the key came base64-encoded (replies then echo it encoded, followed by ` b`).
    pub fn is_binary(&self) -> bool {
        matches!(self, Key::Binary(_))
    }
}

impl std::fmt::Debug for Key<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Key::Text(key) => write!(f, "Text({:?})", String::from_utf8_lossy(key)),
            Key::Binary(key) => write!(f, "Binary({:?})", key.as_bytes()),
        }
    }
}

/// A decoded base64 key, held inline.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct BinaryKey {
    len: u8,
    bytes: [u8; BINARY_KEY_MAX_BYTES],
}

const _: () = assert!(BINARY_KEY_MAX_BYTES <= u8::MAX as usize);

impl std::fmt::Debug for BinaryKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BinaryKey({:?})", self.as_bytes())
    }
}

impl BinaryKey {
    /// Decodes `encoded` as memcached does (characters outside the alphabet skipped); `None`
    /// where memcached answers `CLIENT_ERROR error decoding key`.
    pub(crate) fn decode(encoded: &[u8]) -> Option<BinaryKey> {
        debug_assert!(encoded.len() <= KEY_MAX_BYTES);
        let mut bytes = [0; BINARY_KEY_MAX_BYTES];
        let len = base64::decode(encoded, &mut bytes)?;
        Some(BinaryKey { len: u8::try_from(len).ok()?, bytes })
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// The flags of a meta command in typed form. Every meta command accepts every flag
/// memcached knows (it ignores those that do not apply); the return flags are echoed in the
/// order they were sent, which [`MetaFlags::tokens`] gives back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetaFlags<'a> {
    /// The flag tokens as sent, separated by spaces.
    pub(crate) tokens: &'a [u8],
    /// `b`: the key is base64.
    pub base64_key: bool,
    /// `c`: return the cas value.
    pub return_cas: bool,
    /// `f`: return the client flags.
    pub return_flags: bool,
    /// `h`: return whether the item was fetched before.
    pub return_hit: bool,
    /// `k`: return the key.
    pub return_key: bool,
    /// `l`: return the seconds since the last access.
    pub return_last_access: bool,
    /// `s`: return the value's size.
    pub return_size: bool,
    /// `t`: return the remaining TTL.
    pub return_ttl: bool,
    /// `v`: return the value.
    pub return_value: bool,
    /// `q`: quiet (see [`MetaCommand::quiet_hides`](super::MetaCommand::quiet_hides)).
    pub quiet: bool,
    /// `u`: do not bump the item in the LRU.
    pub no_bump: bool,
    /// `I`: invalidate (mark stale) instead of the usual effect.
    pub invalidate: bool,
    /// `x`: md removes the value but keeps the item.
    pub remove_value: bool,
    /// `O<token>`: opaque, echoed back (without its `O`).
    pub opaque: Option<&'a [u8]>,
    /// `N<ttl>`: vivify on miss with this TTL.
    pub vivify_ttl: Option<i32>,
    /// `R<ttl>`: win the recache token when the remaining TTL is below this.
    pub recache_ttl: Option<i32>,
    /// `T<ttl>`: the new TTL.
    pub ttl: Option<i32>,
    /// `C<cas>`: compare this cas.
    pub compare_cas: Option<u64>,
    /// `E<cas>`: use this as the new cas.
    pub explicit_cas: Option<u64>,
    /// `F<flags>`: ms's client flags.
    pub client_flags: Option<u32>,
    /// `M<mode>`: the mode character of ms (`E A P R S`) or ma (`I + D -`), already checked
    /// against the command.
    pub mode: Option<u8>,
    /// `D<delta>`: ma's delta (1 when absent).
    pub delta: Option<u64>,
    /// `J<initial>`: ma's initial value on vivify (0 when absent).
    pub initial: Option<u64>,
}

impl<'a> MetaFlags<'a> {
    /// The flag tokens in the order sent (`v`, `O123`, `T30`, …).
    pub fn tokens(&self) -> impl Iterator<Item = &'a [u8]> {
        self.tokens.split(|&b| b == b' ').filter(|t| !t.is_empty())
    }
}
