//! The error replies, each spelled exactly as memcached 1.6 spells it (checked against its
//! `proto_text.c` and `proto_parser.c`).

/// An error reply. [`ProtocolError::as_str`] is the line without its `\r\n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProtocolError {
    /// An unknown command (also memcached's answer to its admin commands Ferrite does not
    /// serve).
    UnknownCommand,
    /// A malformed line: too few tokens, a bad `<bytes>`, a key over 250 bytes, …
    BadCommandLineFormat,
    /// `delete <key>` followed by anything but `0`, `noreply` or `0 noreply` (memcached
    /// 1.6 up to its parser rewrite of 2025, Debian's 1.6.18 among them: the clients' tests
    /// expect it).
    DeleteUsage,
    /// The `<bytes>` of data were not followed by `\r\n`.
    BadDataChunk,
    /// A `touch`, `gat`/`gats` or `flush_all` time that is not a 32-bit number.
    InvalidExptime,
    /// An `incr`/`decr` delta that is not an unsigned 64-bit number.
    InvalidDeltaArgument,
    /// `incr`/`decr`/`ma` on a value that is not a number (decided by the store).
    NonNumericValue,
    /// A value longer than the item limit: its data is swallowed.
    ObjectTooLarge,
    /// The store could not make room for a value.
    OutOfMemoryStoring,
    /// The store could not make room (incr, decr, ma, md).
    OutOfMemory,
    /// A meta flag's argument that is not a number (`N T R C E`).
    BadToken,
    /// A meta flag memcached does not know.
    InvalidFlag,
    /// A meta flag given twice.
    DuplicateFlag,
    /// More than 20 tokens on a meta line.
    FlagsTooLong,
    /// A `b` key that is not base64.
    ErrorDecodingKey,
    /// An `O` token longer than 32 bytes (with its `O`).
    OpaqueTooLong,
    /// `J` without an unsigned 64-bit number.
    InvalidNumericInitial,
    /// `D` without an unsigned 64-bit number.
    InvalidNumericDelta,
    /// Any flag error of `ma` (it reports them all alike).
    InvalidOrDuplicateFlag,
    /// An `M` mode `ms` does not know.
    InvalidMsMode,
    /// An `M` mode `ma` does not know.
    InvalidMaMode,
}

impl ProtocolError {
    /// The reply line, without `\r\n`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolError::UnknownCommand => "ERROR",
            ProtocolError::BadCommandLineFormat => "CLIENT_ERROR bad command line format",
            ProtocolError::DeleteUsage => {
                "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]"
            }
            ProtocolError::BadDataChunk => "CLIENT_ERROR bad data chunk",
            ProtocolError::InvalidExptime => "CLIENT_ERROR invalid exptime argument",
            ProtocolError::InvalidDeltaArgument => "CLIENT_ERROR invalid numeric delta argument",
            ProtocolError::NonNumericValue => {
                "CLIENT_ERROR cannot increment or decrement non-numeric value"
            }
            ProtocolError::ObjectTooLarge => "SERVER_ERROR object too large for cache",
            ProtocolError::OutOfMemoryStoring => "SERVER_ERROR out of memory storing object",
            ProtocolError::OutOfMemory => "SERVER_ERROR out of memory",
            ProtocolError::BadToken => "CLIENT_ERROR bad token in command line format",
            ProtocolError::InvalidFlag => "CLIENT_ERROR invalid flag",
            ProtocolError::DuplicateFlag => "CLIENT_ERROR duplicate flag",
            ProtocolError::FlagsTooLong => "CLIENT_ERROR options flags are too long",
            ProtocolError::ErrorDecodingKey => "CLIENT_ERROR error decoding key",
            ProtocolError::OpaqueTooLong => "CLIENT_ERROR opaque token too long",
            ProtocolError::InvalidNumericInitial => "CLIENT_ERROR invalid numeric initial value",
            ProtocolError::InvalidNumericDelta => "CLIENT_ERROR invalid numeric delta value",
            ProtocolError::InvalidOrDuplicateFlag => "CLIENT_ERROR invalid or duplicate flag",
            ProtocolError::InvalidMsMode => "CLIENT_ERROR invalid mode for ms M token",
            ProtocolError::InvalidMaMode => "CLIENT_ERROR invalid mode for ma M token",
        }
    }
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
