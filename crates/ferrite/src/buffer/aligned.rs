//! A heap page buffer aligned for direct I/O, and the page copies optimistic readers use.

use crate::format::page::PAGE_SIZE;

#[repr(C, align(4096))]
struct Raw([u8; PAGE_SIZE]);

/// One page-aligned page of memory.
pub struct AlignedPage(Box<Raw>);

impl AlignedPage {
    pub fn zeroed() -> Self {
        AlignedPage(Box::new(Raw([0; PAGE_SIZE])))
    }
    pub fn bytes(&self) -> &[u8] {
        &self.0 .0
    }
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.0 .0
    }
}

impl std::fmt::Debug for AlignedPage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AlignedPage")
    }
}

impl Default for AlignedPage {
    fn default() -> Self {
        Self::zeroed()
    }
}
