//! The public face of objects: values of any size that can be read and written at any
//! offset, whole (`put`, `get`, streamed with `put_from` and `get_into`) or in part. These
//! calls block (object data is read and written with blocking calls); inside a task they
//! are refused like other blocking writes.

use std::io::{self, Read, Seek, SeekFrom, Write};

use super::format::{self, BLOCK, KIND_EXTENT};
use super::ops::Stored;
use crate::db::Tree;
use crate::error::{Error, Result};

/// Largest object (and value): 1 TiB.
pub const MAX_OBJECT_LEN: u64 = 1 << 40;

/// What [`Tree::object_stat`] says of a key's value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
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
    /// Bytes the fragment log holds for them (a byte written twice counts twice until
    /// the merge).
    pub fragment_bytes: u64,
}

fn too_large() -> Error {
    Error::ValueTooLarge { len: usize::MAX, max: MAX_OBJECT_LEN as usize }
}

/// Fails unless `len` bytes at `offset` end within the largest object.
pub(crate) fn check_object_end(offset: u64, len: u64) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= MAX_OBJECT_LEN => Ok(()),
        _ => Err(too_large()),
    }
}

fn refuse_in_task() -> Result<()> {
    match crate::sched::on_worker() {
        true => Err(Error::BlockingWriteInTask),
        false => Ok(()),
    }
}

impl Tree {
    /// Writes `bytes` at `offset` of the object `key` (created empty if absent; a small
    /// value becomes an object), growing it if the write ends past its length (a gap reads
    /// as zeros). Whole 4 KiB blocks go copy-on-write into new extents; the rest is logged
    /// as fragments and merged later. One commit, durable as the database's durability asks.
    pub fn write_at(
        &self,
        key: impl AsRef<[u8]>,
        offset: u64,
        bytes: impl AsRef<[u8]>,
    ) -> Result<()> {
        refuse_in_task()?;
        let durability = self.shared.durability;
        self.write_pieces(key.as_ref(), offset, bytes.as_ref(), false, durability).map(|_| ())
    }

    /// [`Tree::write_at`] with its own durability instead of the database's. (The new data
    /// itself is always on disk before the commit: only the commit's record may wait.)
    pub fn write_at_with(
        &self,
        key: impl AsRef<[u8]>,
        offset: u64,
        bytes: impl AsRef<[u8]>,
        durability: crate::options::Durability,
    ) -> Result<()> {
        refuse_in_task()?;
        self.write_pieces(key.as_ref(), offset, bytes.as_ref(), false, durability).map(|_| ())
    }

    /// Reads into `buf` from `offset` of `key`'s value: `None` if absent, else the bytes
    /// read (fewer than `buf.len()` only at the end; 0 at or past it).
    pub fn read_at(
        &self,
        key: impl AsRef<[u8]>,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<Option<usize>> {
        crate::sched::block_on(self.read_at_bytes_async(key.as_ref(), offset, buf))
    }

    /// Length of `key`'s value, if present.
    pub fn object_len(&self, key: impl AsRef<[u8]>) -> Result<Option<u64>> {
        self.object_len_bytes(key.as_ref())
    }

    /// [`Tree::object_len`] of a borrowed key.
    fn object_len_bytes(&self, key: &[u8]) -> Result<Option<u64>> {
        crate::db::check_key(key)?;
        Ok(match self.stored(key)? {
            Stored::Absent => None,
            Stored::Plain(value) => Some(value.len() as u64),
            Stored::Object { len, .. } => Some(len),
        })
    }

    /// Sets the length of `key`'s value (bytes past the old end read as zeros); returns
    /// whether `key` was present (an absent key is left absent).
    pub fn truncate(&self, key: impl AsRef<[u8]>, len: u64) -> Result<bool> {
        refuse_in_task()?;
        self.truncate_to(key.as_ref(), len)
    }

    /// Appends `bytes` to `key`'s value (created empty if absent); returns the new length.
    pub fn append(&self, key: impl AsRef<[u8]>, bytes: impl AsRef<[u8]>) -> Result<u64> {
        refuse_in_task()?;
        self.write_pieces(key.as_ref(), 0, bytes.as_ref(), true, self.shared.durability)
    }

    /// Size, extents and fragments of `key`'s value, if present.
    pub fn object_stat(&self, key: impl AsRef<[u8]>) -> Result<Option<ObjectStat>> {
        self.object_stat_bytes(key.as_ref())
    }

    /// [`Tree::object_stat`] of a borrowed key.
    fn object_stat_bytes(&self, key: &[u8]) -> Result<Option<ObjectStat>> {
        crate::db::check_key(key)?;
        let (id, len) = match self.stored(key)? {
            Stored::Absent => return Ok(None),
            Stored::Plain(value) => {
                return Ok(Some(ObjectStat {
                    len: value.len() as u64,
                    inline: true,
                    ..ObjectStat::default()
                }))
            }
            Stored::Object { id, len } => (id, len),
        };
        let mut stat = ObjectStat { len, ..ObjectStat::default() };
        let _map = self.shared.object_space.map_read(id);
        let Some(objects) = self.shared.objects_tree(false)? else { return Ok(Some(stat)) };
        let low = format::key(id, KIND_EXTENT, 0);
        let high = format::key(id, KIND_EXTENT, u64::MAX);
        for entry in objects.range(&low[..]..=&high[..]) {
            let (key, value) = entry?;
            let (_, _, last) = format::parse_key(&key).expect("a key of the range");
            let extent = format::Extent::decode(last, &value).map_err(|reason| Error::Corrupt {
                page: 0,
                file: self.shared.dir.clone(),
                reason,
            })?;
            stat.extents += 1;
            stat.extent_pages += extent.blocks();
        }
        let index = self.shared.object_space.fragments();
        if let Some(blocks) = index.by_object.get(&id) {
            stat.fragments = blocks.len() as u64;
            stat.fragment_bytes = blocks.values().flatten().map(|e| e.1 as u64).sum();
        }
        Ok(Some(stat))
    }

    /// Puts the bytes `source` yields as `key`'s value, streamed (never all in memory), in
    /// one commit: a reader sees the old value or the whole new one. Returns the length.
    pub fn put_from(&self, key: impl AsRef<[u8]>, source: &mut dyn Read) -> Result<u64> {
        refuse_in_task()?;
        self.put_stream(key.as_ref(), source)
    }

    /// Writes `key`'s value into `sink`, streamed a MiB at a time; `None` if absent, else
    /// the length. (Each MiB is read at one moment; a writer changing the object in place
    /// meanwhile may show in later MiBs. A value replaced or deleted meanwhile ends the
    /// stream with an error: the bytes already written are of the old value.)
    pub fn get_into(&self, key: impl AsRef<[u8]>, sink: &mut dyn Write) -> Result<Option<u64>> {
        self.get_into_bytes(key.as_ref(), sink)
    }

    /// [`Tree::get_into`] of a borrowed key.
    fn get_into_bytes(&self, key: &[u8], sink: &mut dyn Write) -> Result<Option<u64>> {
        crate::db::check_key(key)?;
        let sink_error = |e| Error::io("writing the value out", e);
        match self.stored(key)? {
            Stored::Absent => Ok(None),
            Stored::Plain(value) => {
                sink.write_all(&value).map_err(sink_error)?;
                Ok(Some(value.len() as u64))
            }
            Stored::Object { id, len } => {
                let mut buf = vec![0u8; (256 * BLOCK) as usize];
                let mut at = 0;
                while at < len {
                    let n = ((len - at) as usize).min(buf.len());
                    let read = self.read_object(id, at, &mut buf[..n]);
                    // The bytes are the object's only if the key still holds it (see
                    // `still_holds` in `Tree::get_with_async`); what went to the sink cannot
                    // be taken back, so a replaced value ends the stream with an error.
                    if !matches!(self.stored(key)?, Stored::Object { id: now, .. } if now == id) {
                        return Err(Error::io(
                            "streaming a value",
                            std::io::Error::other(
                                "the value was replaced or deleted while it was streamed; read \
                                 it again",
                            ),
                        ));
                    }
                    read?;
                    sink.write_all(&buf[..n]).map_err(sink_error)?;
                    at += n as u64;
                }
                Ok(Some(len))
            }
        }
    }

    /// A reader of `key`'s value (`Read + Seek`), if present.
    pub fn object_reader(&self, key: impl AsRef<[u8]>) -> Result<Option<ObjectReader>> {
        let key = key.as_ref();
        Ok(self.object_len_bytes(key)?.map(|_| ObjectReader {
            tree: self.clone(),
            key: key.to_vec(),
            pos: 0,
        }))
    }

    /// A writer into `key`'s object (`Write + Seek`, starting at offset 0, created empty if
    /// absent). Writes are buffered up to 1 MiB and each flush is one `write_at`; dropping
    /// the writer flushes, ignoring errors: call `flush` to see them.
    pub fn object_writer(&self, key: impl AsRef<[u8]>) -> Result<ObjectWriter> {
        let key = key.as_ref();
        crate::db::check_key(key)?;
        if self.object_len_bytes(key)?.is_none() {
            self.write_at(key, 0, b"")?;
        }
        Ok(ObjectWriter { tree: self.clone(), key: key.to_vec(), pos: 0, buffer: Vec::new() })
    }

    /// [`Tree::object_reader`] as a future (read with [`ObjectReader::read_async`]).
    pub async fn object_reader_async(&self, key: impl AsRef<[u8]>) -> Result<Option<ObjectReader>> {
        crate::db::in_task("Tree::object_reader_async")?;
        let key = key.as_ref();
        Ok(self.object_len_bytes_async(key).await?.map(|_| ObjectReader {
            tree: self.clone(),
            key: key.to_vec(),
            pos: 0,
        }))
    }

    /// [`Tree::object_writer`] as a future (for tasks: write with
    /// [`ObjectWriter::write_async`] and finish with [`ObjectWriter::flush_async`]).
    pub async fn object_writer_async(&self, key: impl AsRef<[u8]>) -> Result<ObjectWriter> {
        crate::db::in_task("Tree::object_writer_async")?;
        let key = key.as_ref();
        crate::db::check_key(key)?;
        if self.object_len_bytes_async(key).await?.is_none() {
            self.write_at_async(key, 0, b"").await?;
        }
        Ok(ObjectWriter { tree: self.clone(), key: key.to_vec(), pos: 0, buffer: Vec::new() })
    }
}

/// Where a seek lands, from `pos` and the object's `len`.
fn seek_to(pos: u64, len: u64, to: SeekFrom) -> io::Result<u64> {
    let target = match to {
        SeekFrom::Start(n) => Some(n),
        SeekFrom::End(d) => len.checked_add_signed(d),
        SeekFrom::Current(d) => pos.checked_add_signed(d),
    };
    target.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "seek before the start"))
}

/// Reads an object as a stream (`Read + Seek`); see [`Tree::object_reader`]. Each `read`
/// reads at one moment of the object.
#[derive(Debug)]
pub struct ObjectReader {
    tree: Tree,
    key: Vec<u8>,
    pos: u64,
}

impl Read for ObjectReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.tree.read_at(&self.key, self.pos, buf).map_err(io::Error::other)? {
            Some(n) => {
                self.pos += n as u64;
                Ok(n)
            }
            None => Err(io::Error::new(io::ErrorKind::NotFound, "the object was deleted")),
        }
    }
}

impl ObjectReader {
    /// [`Read::read`] as a future: on a worker, the data is read through its ring while the
    /// task yields.
    pub async fn read_async(&mut self, buf: &mut [u8]) -> Result<usize> {
        crate::db::in_task("ObjectReader::read_async")?;
        match self.tree.read_at_bytes_async(&self.key, self.pos, buf).await? {
            Some(n) => {
                self.pos += n as u64;
                Ok(n)
            }
            None => Err(Error::io(
                "reading an object",
                io::Error::new(io::ErrorKind::NotFound, "the object was deleted"),
            )),
        }
    }
}

impl Seek for ObjectReader {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let len = self.tree.object_len(&self.key).map_err(io::Error::other)?.unwrap_or(0);
        self.pos = seek_to(self.pos, len, to)?;
        Ok(self.pos)
    }
}

/// A value read from a task a slice at a time ([`Tree::value_slices_async`]), every slice of
/// the version the reader began on: a server sends slice `i` while it reads slice `i + 1`,
/// and never holds the whole of a large value.
#[derive(Debug)]
pub struct ValueSlices {
    tree: Tree,
    key: Vec<u8>,
    source: SliceSource,
    len: u64,
    pos: u64,
}

#[derive(Debug)]
enum SliceSource {
    /// A value in its leaf (or Value page), read whole when the reader began.
    Plain(Vec<u8>),
    /// An object: its id, checked after every slice.
    Object(u64),
}

impl Tree {
    /// A reader of `key`'s value a slice at a time, as it is now; `None` if absent. A value
    /// in its leaf is read now, whole (at most [`crate::MAX_VALUE_LEN`] bytes); an object's
    /// data is read by [`ValueSlices::read_async`].
    pub async fn value_slices_async(&self, key: impl AsRef<[u8]>) -> Result<Option<ValueSlices>> {
        crate::db::in_task("Tree::value_slices_async")?;
        self.value_slices_bytes_async(key.as_ref()).await
    }

    /// [`Tree::value_slices_async`] of a borrowed key.
    async fn value_slices_bytes_async(&self, key: &[u8]) -> Result<Option<ValueSlices>> {
        crate::db::check_key(key)?;
        let (source, len) = match self.stored_async(key).await? {
            Stored::Absent => return Ok(None),
            Stored::Plain(value) => {
                let len = value.len() as u64;
                (SliceSource::Plain(value), len)
            }
            Stored::Object { id, len } => (SliceSource::Object(id), len),
        };
        Ok(Some(ValueSlices { tree: self.clone(), key: key.to_vec(), source, len, pos: 0 }))
    }
}

impl ValueSlices {
    /// The value's length.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the value is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes read so far.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Whether the value is an object (its slices are read from the disk as they are
    /// asked for), not a value read whole when the reader began.
    pub fn is_object(&self) -> bool {
        matches!(self.source, SliceSource::Object(_))
    }

    /// The object's id, if the value is an object: it names this version of the value (a
    /// put of the key makes a new object; ids are never reused), so a caller may share the
    /// slices of one id between readers, as long as nothing writes it in place
    /// (`write_at`, `truncate`, `append` keep the id).
    pub fn object_id(&self) -> Option<u64> {
        match self.source {
            SliceSource::Object(id) => Some(id),
            SliceSource::Plain(_) => None,
        }
    }

    /// Moves on by `n` bytes without reading them: for a caller that has them from another
    /// reader of the same object (see [`ValueSlices::object_id`]).
    pub fn skip(&mut self, n: u64) {
        self.pos = (self.pos + n).min(self.len);
    }

    /// Reads the next bytes of the value into `buf` (as many as fit; 0 at the end). `None`
    /// if the key no longer holds the value the reader began on (replaced or deleted): the
    /// bytes are not of it, and nothing more can be read. On a worker an object's slice is
    /// read through the worker's ring while the task yields.
    pub async fn read_async(&mut self, buf: &mut [u8]) -> Result<Option<usize>> {
        crate::db::in_task("ValueSlices::read_async")?;
        let n = buf.len().min((self.len - self.pos) as usize);
        match &self.source {
            SliceSource::Plain(value) => {
                let at = self.pos as usize;
                buf[..n].copy_from_slice(&value[at..at + n]);
            }
            &SliceSource::Object(id) => {
                if n == 0 {
                    return Ok(Some(0));
                }
                let read = self.tree.read_object_async(id, self.pos, &mut buf[..n]).await;
                // Kept only if the key still holds this object (as `read_at_async` checks):
                // a put may have replaced it meanwhile, and its pages gone to another value.
                let still = matches!(self.tree.stored_async(&self.key).await?,
                    Stored::Object { id: now, .. } if now == id);
                if !still {
                    return Ok(None);
                }
                read?;
            }
        }
        self.pos += n as u64;
        Ok(Some(n))
    }
}

/// Writes into an object (`Write + Seek`); see [`Tree::object_writer`].
#[derive(Debug)]
pub struct ObjectWriter {
    tree: Tree,
    key: Vec<u8>,
    /// Where the buffered bytes go.
    pos: u64,
    buffer: Vec<u8>,
}

/// Bytes an `ObjectWriter` gathers before one `write_at`.
const WRITER_BUFFER: usize = 1 << 20;

impl Write for ObjectWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self
            .pos
            .checked_add((self.buffer.len() + buf.len()) as u64)
            .is_none_or(|e| e > MAX_OBJECT_LEN)
        {
            return Err(io::Error::other(too_large()));
        }
        let n = buf.len().min(WRITER_BUFFER - self.buffer.len());
        self.buffer.extend_from_slice(&buf[..n]);
        if self.buffer.len() == WRITER_BUFFER {
            self.flush()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        self.tree.write_at(&self.key, self.pos, &self.buffer).map_err(io::Error::other)?;
        self.pos += self.buffer.len() as u64;
        self.buffer.clear();
        Ok(())
    }
}

impl ObjectWriter {
    /// [`Write::write`] as a future; each full buffer is one [`Tree::write_at_async`]. In a
    /// task, finish with [`ObjectWriter::flush_async`]: the flush of a drop is a blocking
    /// call, refused there.
    pub async fn write_async(&mut self, buf: &[u8]) -> Result<usize> {
        crate::db::in_task("ObjectWriter::write_async")?;
        if self
            .pos
            .checked_add((self.buffer.len() + buf.len()) as u64)
            .is_none_or(|e| e > MAX_OBJECT_LEN)
        {
            return Err(too_large());
        }
        let n = buf.len().min(WRITER_BUFFER - self.buffer.len());
        self.buffer.extend_from_slice(&buf[..n]);
        if self.buffer.len() == WRITER_BUFFER {
            self.flush_async().await?;
        }
        Ok(n)
    }

    /// [`Write::flush`] as a future.
    pub async fn flush_async(&mut self) -> Result<()> {
        crate::db::in_task("ObjectWriter::flush_async")?;
        if self.buffer.is_empty() {
            return Ok(());
        }
        self.tree.write_at_async(&self.key, self.pos, &self.buffer).await?;
        self.pos += self.buffer.len() as u64;
        self.buffer.clear();
        Ok(())
    }
}

impl Seek for ObjectWriter {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        self.flush()?;
        let len = self.tree.object_len(&self.key).map_err(io::Error::other)?.unwrap_or(0);
        self.pos = seek_to(self.pos, len, to)?;
        Ok(self.pos)
    }
}

impl Drop for ObjectWriter {
    fn drop(&mut self) {
        if let Err(e) = self.flush() {
            log::error!("an object writer's last flush failed: {e}");
        }
    }
}
