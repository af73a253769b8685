//! Where pages live on disk: the common page header, the superblock, the free list, and
//! values too large for a leaf; and where two versions of a page's bytes differ (`diff`).

pub mod diff;
pub mod freelist;
pub mod page;
pub mod superblock;
pub mod value;

use crate::format::page::PAGE_SIZE;

/// Fuzz body for the page decoders of this module (superblock, free list, value page, common
/// header): any page image must decode or be refused without panicking, and whatever decodes
/// must encode back to the same bytes. Lives here so that unit tests run it on stable.
#[doc(hidden)]
pub fn fuzz_format_page(input: &[u8]) {
    let mut image = vec![0u8; PAGE_SIZE];
    let len = input.len().min(PAGE_SIZE);
    image[..len].copy_from_slice(&input[..len]);
    let page_id = page::page_id_of(&image);
    let _ = page::verify(&image, page_id);
    for copy in superblock::SUPERBLOCK_PAGES {
        if let Ok(sb) = superblock::Superblock::decode(&image, copy) {
            let mut again = vec![0u8; PAGE_SIZE];
            sb.encode(&mut again);
            assert_eq!(superblock::Superblock::decode(&again, copy), Ok(sb));
        }
    }
    if let Ok((next, ids)) = freelist::decode(&image) {
        if ids.len() <= freelist::IDS_PER_PAGE {
            let mut again = vec![0u8; PAGE_SIZE];
            freelist::encode(&mut again, page_id, next, &ids);
            assert_eq!(freelist::decode(&again), Ok((next, ids)));
        }
    }
    let tree_id = page::read_u64(&image, 24);
    if let Ok(value) = value::decode(&image, tree_id) {
        let value = value.to_vec();
        let mut again = vec![0u8; PAGE_SIZE];
        value::encode(&mut again, page_id, tree_id, &value);
        assert_eq!(value::decode(&again, tree_id), Ok(&value[..]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xorshift(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn decoders_survive_garbage_and_mutated_pages() {
        let mut state = 0x2545_F491_4F6C_DD1D;
        let mut valid = Vec::new();
        let mut page = vec![0u8; PAGE_SIZE];
        superblock::Superblock {
            sequence: 3,
            page_count: 10,
            catalog_root: 2,
            free_list_head: 5,
            free_list_len: 2,
            next_tree_id: 4,
            clean: true,
            checkpoint_lsn: crate::format::superblock::NO_CHECKPOINT,
            stripe_chunk_bytes: 0,
            devices: Vec::new(),
        }
        .encode(&mut page);
        valid.push(page.clone());
        freelist::encode(&mut page, 5, 0, &[6, 7]);
        valid.push(page.clone());
        value::encode(&mut page, 8, 4, b"a value");
        page::seal(&mut page);
        valid.push(page.clone());
        for round in 0..3000 {
            let mut input = valid[round % valid.len()].clone();
            match round % 3 {
                0 => {
                    for byte in input.iter_mut() {
                        *byte = xorshift(&mut state) as u8;
                    }
                }
                _ => {
                    for _ in 0..1 + round % 5 {
                        let at = xorshift(&mut state) as usize % PAGE_SIZE;
                        input[at] = xorshift(&mut state) as u8;
                    }
                }
            }
            let cut = xorshift(&mut state) as usize % (PAGE_SIZE + 1);
            fuzz_format_page(&input[..if round % 7 == 0 { cut } else { PAGE_SIZE }]);
        }
        for page in &valid {
            fuzz_format_page(page);
        }
    }
}
