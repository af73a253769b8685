//! The free list on disk, written at a clean close: a chain of pages listing free page ids.
//! The chain's own pages are free too once it has been read back.
//!
//! | offset | size  | meaning                                      |
//! |--------|-------|----------------------------------------------|
//! | 0      | 16    | common page header (kind `FreeList`)          |
//! | 16     | 8     | next page of the chain (0 = last)             |
//! | 24     | 4     | ids listed in this page                       |
//! | 28     | 4     | reserved, 0                                   |
//! | 32     | 8 × n | free page ids                                 |

use crate::error::PageId;
use crate::format::page::{self, read_u32, read_u64, write_u32, write_u64, PageKind, PAGE_SIZE};

/// Ids one free-list page holds.
pub const IDS_PER_PAGE: usize = (PAGE_SIZE - 32) / 8;

/// Splits `free` into the chain's pages and the ids they list: returns `(chain, listed)`,
/// where `chain` are the pages to write (taken from `free`) and every other id is listed.
pub fn plan(mut free: Vec<PageId>) -> (Vec<PageId>, Vec<PageId>) {
    free.sort_unstable();
    let mut chain = Vec::new();
    while chain.len() * IDS_PER_PAGE < free.len() {
        chain.push(free.pop().expect("free list shorter than its chain"));
    }
    (chain, free)
}

/// Encodes chain page `page_id` listing `ids`, pointing at `next`; sealed.
pub fn encode(out: &mut [u8], page_id: PageId, next: PageId, ids: &[PageId]) {
    assert!(ids.len() <= IDS_PER_PAGE);
    out.fill(0);
    page::init_header(out, PageKind::FreeList, page_id);
    write_u64(out, 16, next);
    write_u32(out, 24, ids.len() as u32);
    for (i, &id) in ids.iter().enumerate() {
        write_u64(out, 32 + 8 * i, id);
    }
    page::seal(out);
}

/// Decodes a chain page read from disk (already verified): `(next, ids)`.
pub fn decode(bytes: &[u8]) -> Result<(PageId, Vec<PageId>), String> {
    if page::kind_of(bytes) != Some(PageKind::FreeList) {
        return Err("not a free-list page".into());
    }
    let count = read_u32(bytes, 24) as usize;
    if count > IDS_PER_PAGE {
        return Err(format!("lists {count} ids, at most {IDS_PER_PAGE} fit"));
    }
    let ids = (0..count).map(|i| read_u64(bytes, 32 + 8 * i)).collect();
    Ok((read_u64(bytes, 16), ids))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_covers_every_id_once() {
        for n in [0usize, 1, IDS_PER_PAGE, IDS_PER_PAGE + 1, 3 * IDS_PER_PAGE + 7] {
            let free: Vec<PageId> = (10..10 + n as u64).collect();
            let (chain, listed) = plan(free.clone());
            assert!(chain.len() * IDS_PER_PAGE >= listed.len());
            let mut all: Vec<_> = chain.iter().chain(listed.iter()).copied().collect();
            all.sort_unstable();
            assert_eq!(all, free);
        }
    }

    #[test]
    fn encode_decode() {
        let mut buf = vec![0u8; PAGE_SIZE];
        encode(&mut buf, 9, 12, &[3, 4, 5]);
        page::verify(&buf, 9).unwrap();
        assert_eq!(decode(&buf).unwrap(), (12, vec![3, 4, 5]));
    }
}
