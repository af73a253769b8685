//! Transactions of the peers, for the workloads that need them (TPC-C): reads, writes and
//! range scans that commit together or not at all. Each engine's guarantee differs, and a
//! benchmark prints it ([`crate::Peer::isolation`]).

use crate::PeerError;

/// One transaction of a peer. Dropped without [`commit`](PeerTxn::commit), it is rolled back.
/// A [`PeerError::Conflict`] from any call means another transaction got in the way: drop
/// this one (nothing it wrote stays) and run it again.
pub trait PeerTxn: Send {
    /// Copies the value of `key` as this transaction sees it (its own writes first) into
    /// `out`, replacing its content; false if there is none. `for_update`: the transaction
    /// means to write the key (optimistic RocksDB then checks at the commit that nobody
    /// changed it since the transaction began; pessimistic RocksDB locks it until the end,
    /// waiting for another holder, and fails if it changed since the transaction began;
    /// WiredTiger's writes meet such changes on their own).
    fn get(&mut self, key: &[u8], out: &mut Vec<u8>, for_update: bool) -> Result<bool, PeerError>;

    /// Sets `key` to `value` when the transaction commits.
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), PeerError>;

    /// Removes `key` (if there) when the transaction commits.
    fn delete(&mut self, key: &[u8]) -> Result<(), PeerError>;

    /// Visits up to `limit` entries with `lower <= key < upper` (no end if `upper` is
    /// `None`), ascending, or descending from the end with `reverse`, as this transaction
    /// sees them; returns how many.
    fn scan(
        &mut self,
        lower: &[u8],
        upper: Option<&[u8]>,
        limit: usize,
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize, PeerError>;

    /// Commits: every write lands, or (an error) none does.
    fn commit(self: Box<Self>) -> Result<(), PeerError>;
}
