//! The header every 4 KiB page starts with, page kinds, and the page checksum.
//!
//! | offset | size | meaning                                                          |
//! |--------|------|------------------------------------------------------------------|
//! | 0      | 4    | CRC-32C of bytes 4..4096, computed with byte 5 (flags) as zero    |
//! | 4      | 1    | page kind ([`PageKind`])                                          |
//! | 5      | 1    | flags, in memory only: bit 0 = dirty. Always 0 on disk.           |
//! | 6      | 2    | reserved, 0                                                       |
//! | 8      | 8    | the page's own id (catches misdirected reads and writes)          |
//!
//! All integers are little-endian. The rest of the page belongs to the kind. Pages whose
//! changes go through the write-ahead log (nodes and Value pages) start their own layout with
//! the *page LSN* at offset 16 ([`OFFSET_LSN`], 8 bytes): the log position of the last
//! record that changed the page. Recovery replays a record into a page only if the page's
//! LSN is older; the log is forced up to a page's LSN before the page is written.

use crate::error::PageId;

/// Bytes in a page. The unit of I/O, of caching and of allocation.
pub const PAGE_SIZE: usize = 4096;
/// Bytes of the common header.
pub const PAGE_HEADER_SIZE: usize = 16;

/// The CRC-32C (see the table above).
pub const OFFSET_CHECKSUM: usize = 0;
/// The page kind.
pub const OFFSET_KIND: usize = 4;
/// The in-memory flags.
pub const OFFSET_FLAGS: usize = 5;
/// The page's own id.
pub const OFFSET_PAGE_ID: usize = 8;
/// Page LSN of logged kinds (`Leaf`, `Inner`, `Value`).
pub const OFFSET_LSN: usize = 16;

/// In-memory flag: the page differs from its copy on disk.
pub const FLAG_DIRTY: u8 = 1;

/// What a page holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum PageKind {
    /// Never written, or zeroed: not valid on disk.
    Zero = 0,
    /// A superblock copy (`format::superblock`).
    Superblock = 1,
    /// A B+tree leaf (`btree::node`).
    Leaf = 2,
    /// A B+tree inner node (`btree::node`).
    Inner = 3,
    /// Holds one value too large to sit in its leaf.
    Value = 4,
    /// Lists free page ids (written at close).
    FreeList = 5,
    /// Free in memory; never written.
    Free = 6,
}

impl PageKind {
    /// The kind a kind byte names, if any.
    pub fn from_u8(byte: u8) -> Option<PageKind> {
        Some(match byte {
            0 => PageKind::Zero,
            1 => PageKind::Superblock,
            2 => PageKind::Leaf,
            3 => PageKind::Inner,
            4 => PageKind::Value,
            5 => PageKind::FreeList,
            6 => PageKind::Free,
            _ => return None,
        })
    }
}

/// The little-endian `u16` at `offset` of `page` (every on-disk integer is little-endian).
pub fn read_u16(page: &[u8], offset: usize) -> u16 {
    u16::from_le_bytes(page[offset..offset + 2].try_into().unwrap())
}
/// The little-endian `u32` at `offset` of `page`.
pub fn read_u32(page: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes(page[offset..offset + 4].try_into().unwrap())
}
/// The little-endian `u64` at `offset` of `page`.
pub fn read_u64(page: &[u8], offset: usize) -> u64 {
    u64::from_le_bytes(page[offset..offset + 8].try_into().unwrap())
}
/// Writes `value` at `offset` of `page`, little-endian.
pub fn write_u16(page: &mut [u8], offset: usize, value: u16) {
    page[offset..offset + 2].copy_from_slice(&value.to_le_bytes());
}
/// Writes `value` at `offset` of `page`, little-endian.
pub fn write_u32(page: &mut [u8], offset: usize, value: u32) {
    page[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
}
/// Writes `value` at `offset` of `page`, little-endian.
pub fn write_u64(page: &mut [u8], offset: usize, value: u64) {
    page[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
}

/// The kind of `page`, if its kind byte names one.
pub fn kind_of(page: &[u8]) -> Option<PageKind> {
    PageKind::from_u8(page[OFFSET_KIND])
}

/// Whether changes to pages of this kind are logged (they carry a page LSN).
pub fn is_logged(kind: Option<PageKind>) -> bool {
    matches!(kind, Some(PageKind::Leaf | PageKind::Inner | PageKind::Value))
}

/// The page LSN of a logged page.
pub fn lsn_of(page: &[u8]) -> u64 {
    read_u64(page, OFFSET_LSN)
}

/// Sets the page LSN of a logged page.
pub fn set_lsn(page: &mut [u8], lsn: u64) {
    write_u64(page, OFFSET_LSN, lsn);
}

/// The page id `page`'s header names.
pub fn page_id_of(page: &[u8]) -> PageId {
    read_u64(page, OFFSET_PAGE_ID)
}

/// Writes the common header; the checksum is set later, by [`seal`].
pub fn init_header(page: &mut [u8], kind: PageKind, page_id: PageId) {
    page[..PAGE_HEADER_SIZE].fill(0);
    page[OFFSET_KIND] = kind as u8;
    write_u64(page, OFFSET_PAGE_ID, page_id);
}

fn checksum(page: &[u8]) -> u32 {
    debug_assert_eq!(page.len(), PAGE_SIZE);
    let crc = crc32c::crc32c(&page[4..OFFSET_FLAGS]);
    let crc = crc32c::crc32c_append(crc, &[0]);
    crc32c::crc32c_append(crc, &page[OFFSET_FLAGS + 1..])
}

/// Prepares a page for writing: clears the in-memory flags and stores the checksum.
pub fn seal(page: &mut [u8]) {
    page[OFFSET_FLAGS] = 0;
    let crc = checksum(page);
    write_u32(page, OFFSET_CHECKSUM, crc);
}

/// Checks a page just read from disk: checksum, then identity. Returns the reason on failure.
pub fn verify(page: &[u8], expected: PageId) -> Result<(), String> {
    let stored = read_u32(page, OFFSET_CHECKSUM);
    let computed = checksum(page);
    if stored != computed {
        if page.iter().all(|&b| b == 0) {
            return Err("page was never written (all zeros)".into());
        }
        return Err(format!("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"));
    }
    let found = page_id_of(page);
    if found != expected {
        return Err(format!("page claims to be page {found}"));
    }
    if page[OFFSET_FLAGS] != 0 {
        return Err(format!("flags byte is {:#04x} on disk", page[OFFSET_FLAGS]));
    }
    match kind_of(page) {
        Some(PageKind::Zero) | Some(PageKind::Free) | None => {
            Err(format!("page kind {} is not valid on disk", page[OFFSET_KIND]))
        }
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_then_verify() {
        let mut page = vec![0u8; PAGE_SIZE];
        init_header(&mut page, PageKind::Leaf, 42);
        page[100] = 7;
        page[OFFSET_FLAGS] = FLAG_DIRTY;
        seal(&mut page);
        assert_eq!(page[OFFSET_FLAGS], 0);
        verify(&page, 42).unwrap();
        assert!(verify(&page, 43).unwrap_err().contains("claims to be page 42"));
        page[200] ^= 1;
        assert!(verify(&page, 42).unwrap_err().contains("checksum mismatch"));
    }

    #[test]
    fn zero_page_is_not_valid() {
        let page = vec![0u8; PAGE_SIZE];
        assert!(verify(&page, 0).unwrap_err().contains("never written"));
    }
}
