//! Where pages live on disk: the common page header, the superblock, the free list, and
//! values too large for a leaf.

pub mod freelist;
pub mod page;
pub mod superblock;
pub mod value;
