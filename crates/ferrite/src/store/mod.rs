//! Where pages live on disk: the common page header, the superblock, the free list and the
//! catalog of named trees.

pub mod page;
