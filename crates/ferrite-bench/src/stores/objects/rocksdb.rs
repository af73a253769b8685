//! RocksDB as a store of objects for `bench objects` (feature `peers`): an object is a run of
//! 4 KiB chunks, each the value of key `obj/<object>/<chunk>` (`obj/000001/0000000000`, the
//! numbers zero-padded so that a chunk's key sorts after the one before it). RocksDB is
//! opened as every other comparison opens it (`ferrite_peers::RocksDb::open`: 4 KiB blocks,
//! a block cache of `--cache-mib`, partitioned index and bloom filters, direct reads, flushes
//! and compactions), its WAL on and synced per write with `--sync`, off otherwise, as the
//! other workloads run it.
//!
//! `rocksdb-blob` is the same with RocksDB's integrated BlobDB on (its setting for large
//! values): chunk values go to blob files, the LSM tree keeps their keys and blob indexes,
//! blob garbage collection reclaims overwritten ones.
//!
//! A write of whole chunks is one `WriteBatch` of them; a write that covers part of a chunk
//! (2 KiB blocks) reads the chunk and writes it back whole (read-modify-write), in the same
//! batch. A read of one chunk is a `get`; of more, an iterator from the first.

use std::path::Path;

use ferrite_peers::{PeerConfig, RocksDb};

use super::{object_name, ObjectSession, ObjectStore, ObjectStoreOptions};
use crate::error::BenchError;
use crate::stores::StoreError;

/// Bytes per chunk value.
pub const CHUNK_BYTES: u64 = 4096;

/// The key of chunk `chunk` of object `object`.
pub fn chunk_key(object: u32, chunk: u64) -> String {
    format!("obj/{:06}/{chunk:010}", u64::from(object) + 1)
}

/// A RocksDB database of chunks.
#[derive(Debug)]
pub struct RocksObjects {
    db: RocksDb,
    blob: bool,
}

impl RocksObjects {
    /// Opens the chunk store; `blob`: chunk values in blob files (BlobDB).
    pub fn open(dir: &Path, options: &ObjectStoreOptions, blob: bool) -> Result<Self, BenchError> {
        let config = PeerConfig {
            cache_bytes: options.cache_bytes,
            direct_io: true,
            log: options.sync,
            sync: options.sync,
            blob_min_bytes: blob.then_some(CHUNK_BYTES),
            ..PeerConfig::default()
        };
        let db = RocksDb::open(dir, &config).map_err(|e| BenchError::Store(Box::new(e)))?;
        Ok(RocksObjects { db, blob })
    }
}

impl ObjectStore for RocksObjects {
    fn name(&self) -> &'static str {
        match self.blob {
            true => "rocksdb-blob",
            false => "rocksdb",
        }
    }

    fn direct_io(&self) -> bool {
        true
    }

    fn describe(&self) -> String {
        format!(
            "{}; objects as 4 KiB chunk values under keys obj/<object>/<chunk>, a write one \
             WriteBatch of whole chunks (a part of a chunk read and rewritten whole), a read a \
             get of one chunk or an iterator over several",
            self.db.describe_config()
        )
    }

    fn create(&self, _object: u32) -> Result<(), StoreError> {
        // The chunks are the object: the setup writes them all.
        Ok(())
    }

    fn session(&self) -> Result<Box<dyn ObjectSession + '_>, StoreError> {
        Ok(Box::new(RocksSession { db: &self.db, chunks: Vec::new() }))
    }

    fn settle(&self) -> Result<(), StoreError> {
        Ok(self.db.settle()?)
    }
}

struct RocksSession<'a> {
    db: &'a RocksDb,
    /// The chunks of the write under way, reused from write to write.
    chunks: Vec<(String, Vec<u8>)>,
}

/// The chunks `len` bytes at `offset` cover: the first and one past the last.
fn chunk_range(offset: u64, len: usize) -> (u64, u64) {
    (offset / CHUNK_BYTES, (offset + len as u64).div_ceil(CHUNK_BYTES))
}

impl ObjectSession for RocksSession<'_> {
    fn write_at(&mut self, object: u32, offset: u64, bytes: &[u8]) -> Result<(), StoreError> {
        let (first, end) = chunk_range(offset, bytes.len());
        self.chunks.clear();
        for chunk in first..end {
            let start = chunk * CHUNK_BYTES;
            // The part of the chunk the write covers, in chunk and in `bytes` coordinates.
            let from = offset.max(start);
            let to = (offset + bytes.len() as u64).min(start + CHUNK_BYTES);
            let part = &bytes[(from - offset) as usize..(to - offset) as usize];
            let key = chunk_key(object, chunk);
            let value = if part.len() as u64 == CHUNK_BYTES {
                part.to_vec()
            } else {
                let mut value = Vec::with_capacity(CHUNK_BYTES as usize);
                if !self.db.get(key.as_bytes(), &mut value)? || value.len() as u64 != CHUNK_BYTES {
                    return Err(format!("{key}: chunk missing or not {CHUNK_BYTES} bytes").into());
                }
                let at = (from - start) as usize;
                value[at..at + part.len()].copy_from_slice(part);
                value
            };
            self.chunks.push((key, value));
        }
        let entries: Vec<(&[u8], &[u8])> =
            self.chunks.iter().map(|(k, v)| (k.as_bytes(), v.as_slice())).collect();
        Ok(self.db.put_batch(&entries)?)
    }

    fn read_at(&mut self, object: u32, offset: u64, buf: &mut [u8]) -> Result<(), StoreError> {
        let (first, end) = chunk_range(offset, buf.len());
        let len = buf.len() as u64;
        let mut copy = |chunk: u64, value: &[u8]| -> Result<(), String> {
            if value.len() as u64 != CHUNK_BYTES {
                return Err(format!("{}: {} bytes", chunk_key(object, chunk), value.len()));
            }
            let start = chunk * CHUNK_BYTES;
            let from = offset.max(start);
            let to = (offset + len).min(start + CHUNK_BYTES);
            buf[(from - offset) as usize..(to - offset) as usize]
                .copy_from_slice(&value[(from - start) as usize..(to - start) as usize]);
            Ok(())
        };
        if end - first == 1 {
            let key = chunk_key(object, first);
            let mut value = Vec::with_capacity(CHUNK_BYTES as usize);
            if !self.db.get(key.as_bytes(), &mut value)? {
                return Err(format!("{key} is missing ({})", object_name(object)).into());
            }
            return Ok(copy(first, &value)?);
        }
        let mut next = first;
        let mut failure = None;
        self.db.scan(
            chunk_key(object, first).as_bytes(),
            (end - first) as usize,
            &mut |k, v| {
                if failure.is_some() {
                    return;
                }
                let want = chunk_key(object, next);
                if k != want.as_bytes() {
                    failure =
                        Some(format!("{want} is missing (found {})", String::from_utf8_lossy(k)));
                    return;
                }
                if let Err(e) = copy(next, v) {
                    failure = Some(e);
                }
                next += 1;
            },
        )?;
        match failure {
            Some(reason) => Err(reason.into()),
            None if next != end => Err(format!("{} is missing", chunk_key(object, next)).into()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempfile::TempDir;

    /// Whole chunks, half chunks (read-modify-write) and reads across chunks all land where
    /// they should, with chunk values in the LSM tree and in blob files.
    #[test]
    fn chunks_are_written_whole_or_read_modified_and_read_back() {
        for blob in [false, true] {
            chunks_round_trip(blob);
        }
    }

    fn chunks_round_trip(blob: bool) {
        let dir = TempDir::new().unwrap();
        let options = ObjectStoreOptions {
            objects: 2,
            object_bytes: 64 << 10,
            block_bytes: 2048,
            sync: false,
            cache_bytes: 8 << 20,
            tasks: false,
        };
        let store = RocksObjects::open(dir.path(), &options, blob).unwrap();
        assert_eq!(
            store.describe().contains("enable_blob_files=true"),
            blob,
            "{}",
            store.describe()
        );
        assert!(store.describe().contains("use_direct_reads=true"), "{}", store.describe());
        assert!(chunk_key(0, 12) < chunk_key(0, 100) && chunk_key(0, 3) < chunk_key(1, 0));
        let mut s = store.session().unwrap();
        let whole: Vec<u8> = (0..64 << 10).map(|i: u32| (i % 251) as u8).collect();
        s.write_at(1, 0, &whole).unwrap();
        s.write_at(1, 6144, &[9u8; 2048]).unwrap();
        let mut expected = whole.clone();
        expected[6144..8192].fill(9);
        let mut buf = vec![0u8; 16384];
        s.read_at(1, 4096, &mut buf).unwrap();
        assert_eq!(buf, expected[4096..20480]);
        let mut half = vec![0u8; 2048];
        s.read_at(1, 6144, &mut half).unwrap();
        assert_eq!(half, vec![9u8; 2048]);
        assert!(s.read_at(0, 0, &mut half).is_err(), "object 0 was never written");
        assert!(s.write_at(0, 2048, &[1u8; 2048]).is_err(), "nothing to read-modify-write");
        assert!(s.read_at(1, 60 << 10, &mut buf).is_err(), "past the end of the object");
    }
}
