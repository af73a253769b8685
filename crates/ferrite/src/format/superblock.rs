//! The superblock: the root of everything on disk. Two copies, in pages 0 and 1; each write
//! goes to the copy the previous write did not use (`sequence % 2`), so one torn write never
//! loses both. Open reads both and trusts the valid one with the higher sequence number.
//!
//! | offset | size | meaning                                                          |
//! |--------|------|------------------------------------------------------------------|
//! | 0      | 16   | common page header (kind `Superblock`, page id 0 or 1)            |
//! | 16     | 8    | magic: the bytes `FERRITE\0`                                      |
//! | 24     | 4    | format version (2)                                                |
//! | 28     | 4    | page size in bytes (4096)                                         |
//! | 32     | 8    | sequence number, + 1 on every write                               |
//! | 40     | 8    | page count: ids below it are in use or free                       |
//! | 48     | 8    | catalog root page id                                              |
//! | 56     | 8    | first free-list page id (0 = none)                                |
//! | 64     | 8    | free page ids listed in the free-list chain                       |
//! | 72     | 8    | next tree id                                                      |
//! | 80     | 1    | 1 = closed cleanly: every page was written back and the free      |
//! |        |      | list is exact; 0 while open                                       |
//! | 81     | 7    | reserved, 0                                                       |
//! | 88     | 8    | LSN of the last checkpoint record in the log (`u64::MAX`: none)    |
//! | 96     | 8    | stripe chunk in bytes (0 with a single device)                    |
//! | 104    | 2    | number of devices n (0 = the single `pages.ferrite` of the directory) |
//! | 106    | ...  | n device paths, each a u16 length and that many bytes (UTF-8)     |
//!
//! The rest of the page is zero. A data directory must be reopened on the devices it was
//! created on, in the same order: the list here is compared at open.

use crate::error::PageId;
use crate::format::page::{self, read_u32, read_u64, write_u32, write_u64, PageKind, PAGE_SIZE};

/// The bytes a superblock starts its own part with.
pub const MAGIC: &[u8; 8] = b"FERRITE\0";
/// The on-disk format this build reads and writes; any other is refused at open.
pub const FORMAT_VERSION: u32 = 2;
/// Page ids of the two superblock copies.
pub const SUPERBLOCK_PAGES: [PageId; 2] = [0, 1];
/// The catalog tree's root page: always this one (a root page never changes).
pub const CATALOG_ROOT: PageId = 2;

/// Bytes the device list may take.
pub const MAX_DEVICE_LIST_BYTES: usize = PAGE_SIZE - 106;
/// `checkpoint_lsn` of a directory whose log holds no checkpoint yet.
pub const NO_CHECKPOINT: u64 = u64::MAX;

/// The decoded superblock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superblock {
    /// + 1 on every write: the copy with the higher one is the newer.
    pub sequence: u64,
    /// Page ids below this are in use or free.
    pub page_count: u64,
    /// The catalog's root page.
    pub catalog_root: PageId,
    /// The first page of the free-list chain (0: none).
    pub free_list_head: PageId,
    /// Free page ids the chain lists.
    pub free_list_len: u64,
    /// The id the next tree created gets.
    pub next_tree_id: u64,
    /// Whether the directory was closed cleanly: every page written back, the free list
    /// exact (false while it is open).
    pub clean: bool,
    /// Where recovery starts: the log position of the last checkpoint record.
    pub checkpoint_lsn: u64,
    /// Stripe chunk in bytes; 0 with a single device.
    pub stripe_chunk_bytes: u64,
    /// The devices the pages are striped over, in order; empty for the directory's own
    /// `pages.ferrite`.
    pub devices: Vec<String>,
}

/// Bytes `devices` take in the superblock.
pub fn device_list_bytes(devices: &[String]) -> usize {
    devices.iter().map(|d| 2 + d.len()).sum()
}

impl Superblock {
    /// The page this version is written to.
    pub fn page_id(&self) -> PageId {
        SUPERBLOCK_PAGES[(self.sequence % 2) as usize]
    }

    /// Encodes into `out` (one page), sealed and ready to write.
    pub fn encode(&self, out: &mut [u8]) {
        out.fill(0);
        page::init_header(out, PageKind::Superblock, self.page_id());
        out[16..24].copy_from_slice(MAGIC);
        write_u32(out, 24, FORMAT_VERSION);
        write_u32(out, 28, PAGE_SIZE as u32);
        write_u64(out, 32, self.sequence);
        write_u64(out, 40, self.page_count);
        write_u64(out, 48, self.catalog_root);
        write_u64(out, 56, self.free_list_head);
        write_u64(out, 64, self.free_list_len);
        write_u64(out, 72, self.next_tree_id);
        out[80] = self.clean as u8;
        write_u64(out, 88, self.checkpoint_lsn);
        write_u64(out, 96, self.stripe_chunk_bytes);
        assert!(device_list_bytes(&self.devices) <= MAX_DEVICE_LIST_BYTES);
        crate::format::page::write_u16(out, 104, self.devices.len() as u16);
        let mut at = 106;
        for device in &self.devices {
            crate::format::page::write_u16(out, at, device.len() as u16);
            out[at + 2..at + 2 + device.len()].copy_from_slice(device.as_bytes());
            at += 2 + device.len();
        }
        page::seal(out);
    }

    /// Decodes copy `page_id`, checking checksum, identity, magic, version and page size.
    pub fn decode(bytes: &[u8], page_id: PageId) -> Result<Superblock, String> {
        page::verify(bytes, page_id)?;
        if page::kind_of(bytes) != Some(PageKind::Superblock) {
            return Err("not a superblock page".into());
        }
        if &bytes[16..24] != MAGIC {
            return Err("bad magic".into());
        }
        let version = read_u32(bytes, 24);
        if version != FORMAT_VERSION {
            return Err(format!("format version {version}, this build reads {FORMAT_VERSION}"));
        }
        let page_size = read_u32(bytes, 28);
        if page_size as usize != PAGE_SIZE {
            return Err(format!("page size {page_size}, this build uses {PAGE_SIZE}"));
        }
        let sb = Superblock {
            sequence: read_u64(bytes, 32),
            page_count: read_u64(bytes, 40),
            catalog_root: read_u64(bytes, 48),
            free_list_head: read_u64(bytes, 56),
            free_list_len: read_u64(bytes, 64),
            next_tree_id: read_u64(bytes, 72),
            clean: bytes[80] == 1,
            checkpoint_lsn: read_u64(bytes, 88),
            stripe_chunk_bytes: read_u64(bytes, 96),
            devices: decode_devices(bytes)?,
        };
        if sb.page_id() != page_id {
            return Err(format!("sequence {} belongs in the other copy", sb.sequence));
        }
        if sb.catalog_root >= sb.page_count || sb.free_list_head >= sb.page_count {
            return Err(format!("root or free list beyond the page count {}", sb.page_count));
        }
        if sb.catalog_root != CATALOG_ROOT {
            return Err(format!("catalog root {}, always {CATALOG_ROOT}", sb.catalog_root));
        }
        if sb.next_tree_id == 0 || bytes[80] > 1 {
            return Err("next tree id 0, or a clean flag other than 0 or 1".into());
        }
        Ok(sb)
    }
}

fn decode_devices(bytes: &[u8]) -> Result<Vec<String>, String> {
    let count = crate::format::page::read_u16(bytes, 104) as usize;
    let mut devices = Vec::with_capacity(count);
    let mut at = 106;
    for i in 0..count {
        if at + 2 > PAGE_SIZE {
            return Err(format!("device list runs off the page at device {i}"));
        }
        let len = crate::format::page::read_u16(bytes, at) as usize;
        let path = bytes.get(at + 2..at + 2 + len).ok_or("device list runs off the page")?;
        let path = std::str::from_utf8(path).map_err(|_| format!("device {i} is not UTF-8"))?;
        devices.push(path.to_owned());
        at += 2 + len;
    }
    Ok(devices)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_copies() {
        let mut sb = Superblock {
            sequence: 5,
            page_count: 100,
            catalog_root: 2,
            free_list_head: 50,
            free_list_len: 7,
            next_tree_id: 3,
            clean: true,
            checkpoint_lsn: crate::format::superblock::NO_CHECKPOINT,
            stripe_chunk_bytes: 65536,
            devices: vec!["/dev/nvme0n1".into(), "/mnt/b/pages".into()],
        };
        let mut buf = vec![0u8; PAGE_SIZE];
        sb.encode(&mut buf);
        assert_eq!(Superblock::decode(&buf, 1).unwrap(), sb);
        assert!(Superblock::decode(&buf, 0).is_err());
        sb.sequence = 6;
        sb.encode(&mut buf);
        assert_eq!(Superblock::decode(&buf, 0).unwrap().sequence, 6);
        buf[17] ^= 1;
        assert!(Superblock::decode(&buf, 0).unwrap_err().contains("checksum"));
    }
}
