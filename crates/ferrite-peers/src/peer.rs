//! The API the three peers share, as a trait, so that callers (the tests, `ferrite bench`)
//! write each use once for all of them.

use std::path::Path;
use std::sync::Arc;

use crate::{
    Lmdb, MemoryUse, PeerConfig, PeerError, PeerStats, PeerTxn, RocksDb, TierUse, WiredTiger,
};

/// One peer engine: the inherent methods of [`RocksDb`], [`WiredTiger`] and [`Lmdb`].
pub trait Peer: Send + Sync {
    fn open(dir: &Path, config: &PeerConfig) -> Result<Self, PeerError>
    where
        Self: Sized;
    fn name(&self) -> &'static str;
    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, PeerError>;
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), PeerError>;
    fn put_batch(&self, entries: &[(&[u8], &[u8])]) -> Result<(), PeerError>;
    fn delete(&self, key: &[u8]) -> Result<bool, PeerError>;
    fn scan(
        &self,
        start: &[u8],
        limit: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize, PeerError>;
    fn flush(&self) -> Result<(), PeerError>;
    /// Background work finished (RocksDB also compacts); by default `flush`.
    fn settle(&self) -> Result<(), PeerError> {
        self.flush()
    }
    fn describe_config(&self) -> String;
    /// What it holds in memory now, where the engine says (RocksDB); `None` where it does not
    /// (WiredTiger's `cache_size` bounds all of its data in memory, dirty pages included;
    /// LMDB's is the OS page cache).
    fn memory(&self) -> Option<MemoryUse> {
        None
    }
    /// What its second cache tier did so far, if it was opened with one (RocksDB).
    fn tier(&self) -> Option<TierUse> {
        None
    }
    /// Its own counters since it opened ([`PeerStats`]: RocksDB's tickers, WiredTiger's cache
    /// statistics), for a benchmark to check the configuration did what it meant to; `None`
    /// where it keeps none (LMDB).
    fn stats(&self) -> Result<Option<PeerStats>, PeerError> {
        Ok(None)
    }
    /// Begins a transaction (RocksDB opened with `PeerConfig::transactions`, WiredTiger),
    /// which keeps the engine open while it lives; LMDB refuses.
    fn begin(self: Arc<Self>) -> Result<Box<dyn PeerTxn>, PeerError> {
        Err(PeerError::Invalid {
            engine: self.name(),
            reason: "transactions are not offered through this API".to_string(),
        })
    }
    /// What its transactions guarantee, in words; `None` where it offers none.
    fn isolation(&self) -> Option<&'static str> {
        None
    }
}

macro_rules! impl_peer {
    ($engine:ty $(, $extra:item)*) => {
        impl Peer for $engine {
            fn open(dir: &Path, config: &PeerConfig) -> Result<Self, PeerError> {
                <$engine>::open(dir, config)
            }
            fn name(&self) -> &'static str {
                <$engine>::name(self)
            }
            fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, PeerError> {
                <$engine>::get(self, key, out)
            }
            fn put(&self, key: &[u8], value: &[u8]) -> Result<(), PeerError> {
                <$engine>::put(self, key, value)
            }
            fn put_batch(&self, entries: &[(&[u8], &[u8])]) -> Result<(), PeerError> {
                <$engine>::put_batch(self, entries)
            }
            fn delete(&self, key: &[u8]) -> Result<bool, PeerError> {
                <$engine>::delete(self, key)
            }
            fn scan(
                &self,
                start: &[u8],
                limit: usize,
                visit: &mut dyn FnMut(&[u8], &[u8]),
            ) -> Result<usize, PeerError> {
                <$engine>::scan(self, start, limit, visit)
            }
            fn flush(&self) -> Result<(), PeerError> {
                <$engine>::flush(self)
            }
            fn describe_config(&self) -> String {
                <$engine>::describe_config(self)
            }
            $($extra)*
        }
    };
}

impl_peer!(
    RocksDb,
    fn settle(&self) -> Result<(), PeerError> {
        RocksDb::settle(self)
    },
    fn memory(&self) -> Option<MemoryUse> {
        RocksDb::memory(self)
    },
    fn tier(&self) -> Option<TierUse> {
        RocksDb::tier(self)
    },
    fn stats(&self) -> Result<Option<PeerStats>, PeerError> {
        RocksDb::stats(self).map(Some)
    },
    fn begin(self: Arc<Self>) -> Result<Box<dyn PeerTxn>, PeerError> {
        Ok(Box::new(RocksDb::begin(&self)?))
    },
    fn isolation(&self) -> Option<&'static str> {
        RocksDb::isolation(self)
    }
);
impl_peer!(
    WiredTiger,
    fn stats(&self) -> Result<Option<PeerStats>, PeerError> {
        WiredTiger::stats(self).map(Some)
    },
    fn begin(self: Arc<Self>) -> Result<Box<dyn PeerTxn>, PeerError> {
        Ok(Box::new(WiredTiger::begin(&self)?))
    },
    fn isolation(&self) -> Option<&'static str> {
        Some(crate::WIREDTIGER_ISOLATION)
    }
);
impl_peer!(Lmdb);
