//! Finding the log's segment files in `wal/`, and the chain of them that a recovery reads.
//!
//! Every file named `NNNNNN.log` in the log directory is a segment slot. Its header says what
//! it is (`segment.rs`): a segment (valid header), unused (zeros: prepared ahead of use, or
//! retired by recovery), or damaged. A damaged header is refused, never skipped: the segment
//! could hold acknowledged commits, and treating it as absent would cut the log there.
//!
//! The chain from a redo position is every segment holding log bytes at or after it. Those
//! must cover the log without a gap or an overlap, from the segment holding the redo
//! position on:
//! - segments are made one after the other, each starting where the one before ends, and a
//!   segment wholly before the last checkpoint's redo position is the only kind ever reused;
//!   recovery retires (zeroes the header of) every segment after the one the log continues
//!   in, so no segment of an earlier life of the log can start at or after the redo position;
//! - so a gap is a missing or damaged segment, and two segments holding the same position
//!   are a copy: both are refused with the files named.
//!
//! Whether the last segment of the chain is really the last is for the reader of the stream
//! to judge (`recover.rs`): a stream that runs to the end of a segment always continues in
//! a next one.

use std::path::Path;
use std::sync::Arc;

use super::segment::{
    decode_segment_header, segment_name, slot_of_name, HeaderRead, Segment, LOG_DIR_NAME,
    SEGMENT_HEADER_BYTES,
};
use crate::error::{Error, Result};
use crate::io::{BlockDevice, Storage};

/// The segment files of a log directory.
#[derive(Debug, Default)]
pub struct Discovered {
    /// Files with a valid header, by start.
    pub segments: Vec<Segment>,
    /// Slots whose files hold no header (prepared ahead of use, or retired): reusable.
    pub unused: Vec<(u32, Arc<dyn BlockDevice>)>,
    /// One past the highest slot of a file found.
    pub next_slot: u32,
}

impl Discovered {
    /// Whether any segment file exists (with a header or not).
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty() && self.unused.is_empty()
    }
}

/// The error for log damage in `path` (at file offset `offset` and log position `lsn`,
/// where known).
pub fn damaged(
    path: impl Into<std::path::PathBuf>,
    offset: Option<u64>,
    lsn: Option<u64>,
    reason: impl Into<String>,
) -> Error {
    Error::LogCorrupt { path: path.into(), offset, lsn, reason: reason.into() }
}

/// Opens every segment file of `storage`'s log directory and reads its header.
pub fn discover(storage: &dyn Storage) -> Result<Discovered> {
    let names = storage.list(LOG_DIR_NAME).map_err(|e| {
        Error::io(format!("listing the log directory {}", storage.path(LOG_DIR_NAME).display()), e)
    })?;
    let mut found = Discovered::default();
    for name in names {
        let Some(slot) = name.rsplit('/').next().and_then(slot_of_name) else { continue };
        let name = segment_name(slot);
        let device = storage
            .open(&name, false)
            .map_err(|e| Error::io(format!("opening log segment {name}"), e))?
            .ok_or_else(|| {
                Error::io(
                    format!("opening log segment {name}"),
                    std::io::Error::from(std::io::ErrorKind::NotFound),
                )
            })?;
        found.next_slot = found.next_slot.max(slot + 1);
        let mut header = [0u8; 512];
        let got = device.read_at(&mut header, 0).map_err(|e| {
            Error::io(format!("reading the header of {}", device.path().display()), e)
        })?;
        match decode_segment_header(&header[..got]) {
            HeaderRead::Valid(header) => found.segments.push(Segment::new(slot, header, device)),
            HeaderRead::Unused => found.unused.push((slot, device)),
            HeaderRead::Damaged(reason) => {
                return Err(damaged(
                    device.path(),
                    Some(0),
                    None,
                    format!("its segment header is damaged: {reason}"),
                ));
            }
        }
    }
    found.segments.sort_by_key(|s| (s.start, s.slot));
    Ok(found)
}

/// The segments a recovery from `redo` reads, in log order, checked as the module
/// documentation says: contiguous from the one holding `redo`, not overlapping, each file
/// as long as its header says.
pub fn chain_from(found: &Discovered, redo: u64, log_dir: &Path) -> Result<Vec<Segment>> {
    let chain: Vec<Segment> = found.segments.iter().filter(|s| s.end() > redo).cloned().collect();
    let Some(first) = chain.first() else {
        return Err(damaged(
            log_dir,
            None,
            Some(redo),
            "no segment of the log holds the position recovery starts from (the segment was \
             deleted, or its header retired)",
        ));
    };
    if first.start > redo {
        return Err(damaged(
            first.path(),
            None,
            Some(redo),
            format!(
                "recovery starts at log position {redo}, but the first segment from there \
                 starts at {}: the segment before it is missing",
                first.start
            ),
        ));
    }
    for pair in chain.windows(2) {
        let (before, after) = (&pair[0], &pair[1]);
        if after.start < before.end() {
            return Err(damaged(
                after.path(),
                Some(0),
                Some(after.start),
                format!(
                    "it holds log positions {}..{}, which {} holds too (a copied segment?)",
                    after.start,
                    after.end(),
                    before.path().display()
                ),
            ));
        }
        if after.start > before.end() {
            return Err(damaged(
                after.path(),
                Some(0),
                Some(before.end()),
                format!(
                    "the log has a gap: {} ends at position {}, the next segment starts at {} \
                     (a segment between them is missing)",
                    before.path().display(),
                    before.end(),
                    after.start
                ),
            ));
        }
    }
    for segment in &chain {
        let len = segment
            .device
            .len()
            .map_err(|e| Error::io(format!("sizing {}", segment.path().display()), e))?;
        if len < segment.file_bytes() {
            return Err(damaged(
                segment.path(),
                Some(len),
                None,
                format!(
                    "the file holds {len} bytes, but its header says {} (truncated)",
                    segment.file_bytes()
                ),
            ));
        }
    }
    Ok(chain)
}

/// Zeroes the header of each of `segments` and syncs it: the slot becomes unused (recovery
/// retires the segments after the one the log continues in, so that no segment of this
/// life of the log can be taken for one of the next).
pub fn retire(segments: &[Segment]) -> Result<()> {
    for segment in segments {
        let zeros = vec![0u8; SEGMENT_HEADER_BYTES as usize];
        let path = segment.path().display().to_string();
        segment
            .device
            .write_at(&zeros, 0)
            .and_then(|()| segment.device.sync())
            .map_err(|e| Error::io(format!("retiring log segment {path}"), e))?;
    }
    Ok(())
}
