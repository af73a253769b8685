//! The public face of objects: values of any size that can be read and written at any
//! offset. (API skeleton: bodies land with the implementation.)

use std::io::{self, Read, Seek, SeekFrom, Write};

use crate::db::Tree;
use crate::error::{Error, Result};

/// Largest object (and value): 1 TiB.
pub const MAX_OBJECT_LEN: u64 = 1 << 40;

/// What [`Tree::object_stat`] says of a key's value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ObjectStat {
    /// Length in bytes.
    pub len: u64,
    /// Whether the value is a small one held in its leaf (or a Value page), not an object.
    pub inline: bool,
    /// Extents (runs of whole 4 KiB pages) holding the object's aligned data.
    pub extents: u64,
    /// Pages those extents hold.
    pub extent_pages: u64,
    /// Blocks with fragments (small or unaligned writes not merged yet).
    pub fragments: u64,
    /// Bytes those fragments hold.
    pub fragment_bytes: u64,
}

fn todo() -> Error {
    Error::BadOptions { reason: "objects are not built yet".into() }
}

impl Tree {
    /// Writes `bytes` at `offset` of the object `key` (created empty if absent; a small
    /// value becomes an object), growing it if the write ends past its length.
    pub fn write_at(&self, key: &[u8], offset: u64, bytes: &[u8]) -> Result<()> {
        let _ = (key, offset, bytes);
        Err(todo())
    }

    /// Reads into `buf` from `offset` of `key`'s value: `None` if absent, else the bytes
    /// read (fewer than `buf.len()` only at the end; 0 at or past it).
    pub fn read_at(&self, key: &[u8], offset: u64, buf: &mut [u8]) -> Result<Option<usize>> {
        let _ = (key, offset, buf);
        Err(todo())
    }

    /// Length of `key`'s value, if present.
    pub fn object_len(&self, key: &[u8]) -> Result<Option<u64>> {
        let _ = key;
        Err(todo())
    }

    /// Sets the length of `key`'s value (bytes past the old end read as zeros); returns
    /// whether `key` was present (an absent key is left absent).
    pub fn truncate(&self, key: &[u8], len: u64) -> Result<bool> {
        let _ = (key, len);
        Err(todo())
    }

    /// Appends `bytes` to `key`'s value (created empty if absent); returns the new length.
    pub fn append(&self, key: &[u8], bytes: &[u8]) -> Result<u64> {
        let _ = (key, bytes);
        Err(todo())
    }

    /// Size, extents and fragments of `key`'s value, if present.
    pub fn object_stat(&self, key: &[u8]) -> Result<Option<ObjectStat>> {
        let _ = key;
        Err(todo())
    }

    /// Puts the bytes `source` yields as `key`'s value, streamed (never all in memory), in
    /// one commit: a reader sees the old value or the whole new one. Returns the length.
    pub fn put_from(&self, key: &[u8], source: &mut dyn Read) -> Result<u64> {
        let _ = (key, source);
        Err(todo())
    }

    /// Writes `key`'s value into `sink`, streamed; `None` if absent, else the length.
    pub fn get_into(&self, key: &[u8], sink: &mut dyn Write) -> Result<Option<u64>> {
        let _ = (key, sink);
        Err(todo())
    }

    /// A reader of `key`'s value (`Read + Seek`), if present.
    pub fn object_reader(&self, key: &[u8]) -> Result<Option<ObjectReader>> {
        let _ = key;
        Err(todo())
    }

    /// A writer into `key`'s object (`Write + Seek`, starting at offset 0, created empty if
    /// absent). Writes are buffered up to 1 MiB and each flush is one `write_at`.
    pub fn object_writer(&self, key: &[u8]) -> Result<ObjectWriter> {
        let _ = key;
        Err(todo())
    }
}

/// Reads an object as a stream (`Read + Seek`); see [`Tree::object_reader`].
#[derive(Debug)]
pub struct ObjectReader {
    tree: Tree,
    key: Vec<u8>,
    pos: u64,
}

impl Read for ObjectReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let _ = (&self.tree, &self.key, self.pos, buf);
        Err(io::Error::other(todo()))
    }
}

impl Seek for ObjectReader {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let _ = pos;
        Err(io::Error::other(todo()))
    }
}

/// Writes into an object (`Write + Seek`); see [`Tree::object_writer`].
#[derive(Debug)]
pub struct ObjectWriter {
    tree: Tree,
    key: Vec<u8>,
    pos: u64,
    buffer: Vec<u8>,
}

impl Write for ObjectWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let _ = (&self.tree, &self.key, self.pos, &self.buffer, buf);
        Err(io::Error::other(todo()))
    }
    fn flush(&mut self) -> io::Result<()> {
        Err(io::Error::other(todo()))
    }
}

impl Seek for ObjectWriter {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let _ = pos;
        Err(io::Error::other(todo()))
    }
}
