//! Log segment files: their header, the sectors that frame the log's bytes inside them, and
//! reading the log stream back from a chain of segments.
//!
//! The log is one stream of bytes (a byte's position in it is its LSN) laid over segment files
//! `wal/NNNNNN.log` (NNNNNN: the file's slot number; slots are reused once a checkpoint no
//! longer needs them). A segment holds the stream's bytes `start..start + capacity`.
//!
//! | offset | size | meaning                                                                 |
//! |--------|------|-------------------------------------------------------------------------|
//! | 0      | 4    | CRC-32C of bytes 4..32                                                   |
//! | 4      | 8    | magic `FERRLOG\0`                                                        |
//! | 12     | 4    | format version: 2 (1, unframed, was an earlier development version's)   |
//! | 16     | 8    | start LSN: the stream position of the segment's first byte               |
//! | 24     | 8    | capacity: stream bytes the segment holds (whole blocks of sectors)       |
//! | 32     | 4064 | zero                                                                    |
//! | 4096   | ...  | sectors of 512 bytes; sector `i` holds the stream's bytes                |
//! |        |      | `start + 496 i .. start + 496 (i + 1)`                                  |
//!
//! A sector:
//!
//! | offset | size | meaning                                                                 |
//! |--------|------|-------------------------------------------------------------------------|
//! | 0      | 4    | CRC-32C of bytes 4..512                                                  |
//! | 4      | 2    | payload bytes used, 1..=496 (the stream ends inside a partly used one)   |
//! | 6      | 2    | reserved, 0                                                             |
//! | 8      | 8    | LSN of the payload's first byte (the sector's place in the stream)       |
//! | 16     | 496  | payload; bytes past the used ones are zero                               |
//!
//! **Why sectors.** A power cut can tear a log write, but only at sector boundaries: each
//! 512-byte sector of the write holds either its new bytes or what was there before. What was
//! there before is always recognisable: zeros (segment files are zero-filled before first use,
//! and recovery zeroes what it cuts), a valid sector of the slot's earlier life (whose LSN
//! names another place), or, for the first block of a write, the same sector with fewer
//! payload bytes (a write starts by rewriting the block the previous one ended in). So every
//! sector read back is *written* (checksum holds, its LSN is its place, 1..=496 bytes used),
//! *unwritten* (all zero, or a valid sector of another place), or *damaged* (anything else),
//! and a damaged sector is never the work of a crash: recovery refuses it, where an unframed
//! log cannot tell a torn last write from a damaged last record and would cut acknowledged
//! commits silently. It costs 16 bytes in 512 of the log (3 %).
//!
//! A segment's header is written and synced before any of its sectors, and a new segment is
//! made as soon as a write reaches the end of the one before (even exactly): so a stream that
//! runs to the end of a segment always has a next segment, and its absence is damage
//! (`recover.rs`).

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::page::{read_u16, read_u32, read_u64, write_u16, write_u32, write_u64};
use crate::io::{AlignedBlock, BlockDevice};

/// The bytes that mark a segment file's header.
pub const SEGMENT_MAGIC: &[u8; 8] = b"FERRLOG\0";
/// The framed format.
pub const SEGMENT_VERSION: u32 = 2;
/// The unframed format of an earlier development version (the stream's bytes laid directly
/// after the header, no sectors): recognised only to say so.
const UNFRAMED_VERSION: u32 = 1;
/// Bytes before a segment's first sector (one whole block, for `O_DIRECT`).
pub const SEGMENT_HEADER_BYTES: u64 = 4096;
/// Header bytes that mean something (the rest of the first block is zero).
const HEADER_USED: usize = 32;

/// The unit a crash tears writes at, and the unit of framing.
pub const SECTOR_BYTES: usize = 512;
/// Framing bytes at the start of each sector.
pub const SECTOR_HEADER_BYTES: usize = 16;
/// Stream bytes a sector holds.
pub const SECTOR_PAYLOAD: usize = SECTOR_BYTES - SECTOR_HEADER_BYTES;
/// Log writes are whole blocks at block offsets (`O_DIRECT`).
pub const BLOCK_BYTES: usize = crate::io::IO_ALIGN;
/// Sectors in a block.
pub const BLOCK_SECTORS: usize = BLOCK_BYTES / SECTOR_BYTES;
/// Stream bytes a block of sectors holds.
pub const BLOCK_PAYLOAD: u64 = (BLOCK_SECTORS * SECTOR_PAYLOAD) as u64;
const _: () = assert!(BLOCK_BYTES % SECTOR_BYTES == 0 && SECTOR_HEADER_BYTES == 16);
const _: () = assert!(SEGMENT_HEADER_BYTES as usize % BLOCK_BYTES == 0);

/// The directory of the log segments, inside the data directory.
pub const LOG_DIR_NAME: &str = "wal";

/// The name of segment slot `slot`.
pub fn segment_name(slot: u32) -> String {
    format!("{LOG_DIR_NAME}/{slot:06}.log")
}

/// The slot of a file name in the log directory (`000012.log` → 12), if it is a segment's.
pub fn slot_of_name(file_name: &str) -> Option<u32> {
    let digits = file_name.strip_suffix(".log")?;
    if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// A segment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// The stream position of the segment's first byte.
    pub start: u64,
    /// Stream bytes the segment holds (a whole number of blocks' payloads).
    pub capacity: u64,
}

/// What the first bytes of a segment file say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderRead {
    /// A valid header.
    Valid(SegmentHeader),
    /// Zeros, or a file too short to hold a header: a file prepared but never used (or
    /// retired by recovery).
    Unused,
    /// Anything else: what is wrong.
    Damaged(String),
}

/// The capacity (stream bytes) of a framed segment whose sectors take `body_bytes` of its
/// file: whole blocks only.
pub fn capacity_of_body(body_bytes: u64) -> u64 {
    body_bytes / BLOCK_BYTES as u64 * BLOCK_PAYLOAD
}

/// File bytes of a framed segment of `capacity` stream bytes, header included.
pub fn file_bytes(capacity: u64) -> u64 {
    SEGMENT_HEADER_BYTES + capacity / SECTOR_PAYLOAD as u64 * SECTOR_BYTES as u64
}

/// The header block of a segment of `capacity` stream bytes from stream position `start`.
pub fn encode_segment_header(start: u64, capacity: u64) -> Vec<u8> {
    debug_assert_eq!(capacity % BLOCK_PAYLOAD, 0);
    let mut header = vec![0u8; SEGMENT_HEADER_BYTES as usize];
    header[4..12].copy_from_slice(SEGMENT_MAGIC);
    write_u32(&mut header, 12, SEGMENT_VERSION);
    write_u64(&mut header, 16, start);
    write_u64(&mut header, 24, capacity);
    let crc = crc32c::crc32c(&header[4..HEADER_USED]);
    write_u32(&mut header, 0, crc);
    header
}

/// Decodes the first bytes of a segment file (at least `HEADER_USED` of them, else unused).
pub fn decode_segment_header(bytes: &[u8]) -> HeaderRead {
    if bytes.len() < HEADER_USED || bytes[..HEADER_USED].iter().all(|&b| b == 0) {
        return HeaderRead::Unused;
    }
    if &bytes[4..12] != SEGMENT_MAGIC {
        return HeaderRead::Damaged("no segment magic".into());
    }
    let (stored, computed) = (read_u32(bytes, 0), crc32c::crc32c(&bytes[4..HEADER_USED]));
    if stored != computed {
        return HeaderRead::Damaged(format!(
            "header checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
        ));
    }
    let (start, capacity) = (read_u64(bytes, 16), read_u64(bytes, 24));
    match read_u32(bytes, 12) {
        SEGMENT_VERSION => {}
        UNFRAMED_VERSION => {
            return HeaderRead::Damaged(
                "it is in log format 1, written by an earlier development version of Ferrite, \
                 which this version does not read"
                    .into(),
            )
        }
        other => return HeaderRead::Damaged(format!("unknown log format version {other}")),
    }
    if capacity == 0 || capacity % BLOCK_PAYLOAD != 0 {
        return HeaderRead::Damaged(format!("a capacity of {capacity} bytes (not whole blocks)"));
    }
    if start.checked_add(capacity).is_none() {
        return HeaderRead::Damaged(format!("start {start} + capacity {capacity} overflows"));
    }
    HeaderRead::Valid(SegmentHeader { start, capacity })
}

/// One segment file.
#[derive(Debug, Clone)]
pub struct Segment {
    /// Its slot: the number in its file name.
    pub slot: u32,
    /// As its [`SegmentHeader`] says.
    pub start: u64,
    /// As its [`SegmentHeader`] says.
    pub capacity: u64,
    /// The file.
    pub device: Arc<dyn BlockDevice>,
    /// A second descriptor of the file, `O_DIRECT | O_DSYNC`, that flushes write through
    /// (opened at the segment's first flush; `None` for simulated disks, buffered logs, and
    /// file systems that refuse `O_DIRECT`).
    pub writer: Option<Arc<crate::io::FileDevice>>,
}

impl Segment {
    /// The segment of slot `slot`, with header `header`, in file `device`.
    pub fn new(slot: u32, header: SegmentHeader, device: Arc<dyn BlockDevice>) -> Segment {
        let SegmentHeader { start, capacity } = header;
        Segment { slot, start, capacity, device, writer: None }
    }

    /// The stream position just past the segment.
    pub fn end(&self) -> u64 {
        self.start + self.capacity
    }

    /// Whether stream position `lsn` falls in the segment.
    pub fn holds(&self, lsn: u64) -> bool {
        self.start <= lsn && lsn < self.end()
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        self.device.path()
    }

    /// The sector holding stream position `lsn`.
    pub fn sector_of(&self, lsn: u64) -> u64 {
        (lsn - self.start) / SECTOR_PAYLOAD as u64
    }

    /// The stream position of sector `sector`'s first payload byte.
    pub fn sector_lsn(&self, sector: u64) -> u64 {
        self.start + sector * SECTOR_PAYLOAD as u64
    }

    /// The file offset of sector `sector`.
    pub fn sector_offset(sector: u64) -> u64 {
        SEGMENT_HEADER_BYTES + sector * SECTOR_BYTES as u64
    }

    /// The stream position where the block holding `lsn` begins.
    pub fn block_lsn(&self, lsn: u64) -> u64 {
        self.start + (lsn - self.start) / BLOCK_PAYLOAD * BLOCK_PAYLOAD
    }

    /// File bytes a segment of this capacity must have.
    pub fn file_bytes(&self) -> u64 {
        file_bytes(self.capacity)
    }
}

/// Frames `bytes`, the stream from `block_lsn` (where a block of `segment` begins) on, into
/// whole blocks of sectors: each sector holds its part of `bytes`, and sectors past the end
/// of `bytes` stay zero. Returns the file offset to write them at.
pub fn frame(segment: &Segment, block_lsn: u64, bytes: &[u8]) -> (u64, AlignedBlock) {
    let mut out = AlignedBlock::zeroed(framed_len(bytes.len()));
    let offset = frame_into(segment, block_lsn, [bytes, &[]], out.as_mut_slice());
    (offset, out)
}

/// The bytes the framing of `len` stream bytes takes: whole blocks, at least one.
pub fn framed_len(len: usize) -> usize {
    (len as u64).div_ceil(BLOCK_PAYLOAD).max(1) as usize * BLOCK_BYTES
}

/// [`frame`] of the stream `parts[0]` then `parts[1]` (the start of the first block, written
/// before, and the bytes appended since: framed where they are, not joined first), into `out`,
/// exactly `framed_len` of their lengths: every byte of it is written (a buffer of an earlier
/// flush may be reused). Returns the file offset to write `out` at.
pub fn frame_into(segment: &Segment, block_lsn: u64, parts: [&[u8]; 2], out: &mut [u8]) -> u64 {
    debug_assert_eq!(segment.block_lsn(block_lsn), block_lsn);
    let total = parts[0].len() + parts[1].len();
    debug_assert!(block_lsn + total as u64 <= segment.end());
    debug_assert_eq!(out.len(), framed_len(total));
    let mut straddling = [0u8; SECTOR_PAYLOAD];
    for (index, sector) in out.chunks_exact_mut(SECTOR_BYTES).enumerate() {
        let from = index * SECTOR_PAYLOAD;
        if from >= total {
            sector.fill(0);
            continue;
        }
        let to = (from + SECTOR_PAYLOAD).min(total);
        let payload = joined(parts, from, to, &mut straddling);
        encode_sector(sector, block_lsn + from as u64, payload);
    }
    Segment::sector_offset(segment.sector_of(block_lsn))
}

/// Bytes `from..to` (at most a sector's payload) of `parts[0]` then `parts[1]`: a slice of
/// one of them, or, across the two, copied into `straddling`.
fn joined<'a>(
    parts: [&'a [u8]; 2],
    from: usize,
    to: usize,
    straddling: &'a mut [u8; SECTOR_PAYLOAD],
) -> &'a [u8] {
    let [head, body] = parts;
    if to <= head.len() {
        return &head[from..to];
    }
    if from >= head.len() {
        return &body[from - head.len()..to - head.len()];
    }
    let first = head.len() - from;
    straddling[..first].copy_from_slice(&head[from..]);
    straddling[first..to - from].copy_from_slice(&body[..to - head.len()]);
    &straddling[..to - from]
}

/// Writes one sector holding `payload` (1..=496 bytes) at stream position `lsn` into
/// `sector` (512 bytes, zero past the payload).
pub fn encode_sector(sector: &mut [u8], lsn: u64, payload: &[u8]) {
    debug_assert!(!payload.is_empty() && payload.len() <= SECTOR_PAYLOAD);
    write_u16(sector, 4, payload.len() as u16);
    write_u16(sector, 6, 0);
    write_u64(sector, 8, lsn);
    sector[SECTOR_HEADER_BYTES..SECTOR_HEADER_BYTES + payload.len()].copy_from_slice(payload);
    sector[SECTOR_HEADER_BYTES + payload.len()..].fill(0);
    let crc = crc32c::crc32c(&sector[4..]);
    write_u32(sector, 0, crc);
}

/// What a sector read back holds (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SectorRead<'a> {
    /// Written at this place: its payload (1..=496 bytes).
    Written(&'a [u8]),
    /// Never written here (zeros), or a valid sector of another place.
    Unwritten,
    /// Neither: what is wrong.
    Damaged(String),
}

/// Classifies `sector` (512 bytes) read where stream position `lsn` belongs.
pub fn read_sector(sector: &[u8], lsn: u64) -> SectorRead<'_> {
    if sector.iter().all(|&b| b == 0) {
        return SectorRead::Unwritten;
    }
    let (stored, computed) = (read_u32(sector, 0), crc32c::crc32c(&sector[4..]));
    if stored != computed {
        return SectorRead::Damaged(format!(
            "sector checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
        ));
    }
    let used = read_u16(sector, 4) as usize;
    if used == 0 || used > SECTOR_PAYLOAD || read_u16(sector, 6) != 0 {
        return SectorRead::Damaged(format!("a sector claiming {used} payload bytes"));
    }
    if read_u64(sector, 8) != lsn {
        return SectorRead::Unwritten;
    }
    let payload = &sector[SECTOR_HEADER_BYTES..];
    if payload[used..].iter().any(|&b| b != 0) {
        return SectorRead::Damaged("bytes past the sector's payload are not zero".into());
    }
    SectorRead::Written(&payload[..used])
}

/// Where and why a stream read from a chain of segments stops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The next sector is unwritten, or the last one read was partly used: the stream's
    /// written bytes end here (the normal end of a log, or a write torn by a crash).
    Unwritten,
    /// The chain of segments ends here.
    ChainEnd,
    /// A damaged sector: file and offset, and what is wrong.
    Damaged {
        /// The segment file.
        path: std::path::PathBuf,
        /// The sector's byte offset in it.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
}

/// Sectors read from a file at a time.
const READ_SECTORS: usize = 256;

/// Reads the stream from a chain of contiguous segments, in order, sector by sector:
/// the written bytes from a position on, then where they stop and why.
#[derive(Debug)]
pub struct StreamReader<'a> {
    chain: &'a [Segment],
    /// The next sector to read: segment index in `chain`, sector index in it.
    segment: usize,
    sector: u64,
    /// Written stream bytes read and not yet consumed: `window_lsn..window_lsn + len`.
    window: Vec<u8>,
    window_lsn: u64,
    /// Sectors read from the file, not yet classified (`sector` is the first of them).
    raw: Vec<u8>,
    raw_at: usize,
    stop: Option<(u64, Stop)>,
}

impl<'a> StreamReader<'a> {
    /// A reader of the stream from `lsn` (which a segment of `chain` holds).
    pub fn new(chain: &'a [Segment], lsn: u64) -> StreamReader<'a> {
        let segment = chain.iter().position(|s| s.holds(lsn)).unwrap_or(chain.len());
        let (sector, window_lsn) = match chain.get(segment) {
            Some(s) => (s.sector_of(lsn), s.sector_lsn(s.sector_of(lsn))),
            None => (0, lsn),
        };
        let mut reader = StreamReader {
            chain,
            segment,
            sector,
            window: Vec::new(),
            window_lsn,
            raw: Vec::new(),
            raw_at: 0,
            stop: None,
        };
        if segment == chain.len() {
            reader.stop = Some((lsn, Stop::ChainEnd));
        }
        reader.consume_to(lsn);
        reader
    }

    /// Where the written stream stops, and why, once the reader got there (`None` before).
    pub fn stop(&self) -> Option<&(u64, Stop)> {
        self.stop.as_ref()
    }

    /// The stream's bytes `lsn..lsn + len` (`lsn` not before the last consumed position),
    /// reading sectors as needed; `None` if the written stream stops before their end.
    pub fn bytes(&mut self, lsn: u64, len: usize) -> Result<Option<&[u8]>> {
        debug_assert!(lsn >= self.window_lsn);
        let end = lsn + len as u64;
        while self.window_end() < end {
            if self.stop.is_some() {
                return Ok(None);
            }
            self.read_sector()?;
        }
        let from = (lsn - self.window_lsn) as usize;
        Ok(Some(&self.window[from..from + len]))
    }

    /// Drops the window's bytes before `lsn` (read and done with).
    pub fn consume_to(&mut self, lsn: u64) {
        let drop = (lsn.saturating_sub(self.window_lsn) as usize).min(self.window.len());
        if drop > 0 {
            self.window.drain(..drop);
            self.window_lsn += drop as u64;
        }
    }

    /// Moves to the next sector of the chain and reads it (with the sectors after it, a
    /// chunk at a time into `raw`): where it is and where its bytes are in `raw`; `None`
    /// past the chain's end.
    fn next_raw(&mut self) -> Result<Option<RawSector>> {
        loop {
            let Some(segment) = self.chain.get(self.segment) else { return Ok(None) };
            let sectors = segment.capacity / SECTOR_PAYLOAD as u64;
            if self.sector == sectors {
                self.segment += 1;
                self.sector = 0;
                self.raw.clear();
                self.raw_at = 0;
                continue;
            }
            if self.raw_at == self.raw.len() {
                let count = (sectors - self.sector).min(READ_SECTORS as u64) as usize;
                self.raw.resize(count * SECTOR_BYTES, 0);
                self.raw_at = 0;
                read_exact(segment, &mut self.raw, Segment::sector_offset(self.sector))?;
            }
            let raw = RawSector {
                segment: self.segment,
                lsn: segment.sector_lsn(self.sector),
                offset: Segment::sector_offset(self.sector),
                at: self.raw_at,
            };
            self.raw_at += SECTOR_BYTES;
            self.sector += 1;
            return Ok(Some(raw));
        }
    }

    /// Reads and classifies the next sector (or sets `stop`).
    fn read_sector(&mut self) -> Result<()> {
        let Some(raw) = self.next_raw()? else {
            self.stop = Some((self.window_end(), Stop::ChainEnd));
            return Ok(());
        };
        debug_assert_eq!(raw.lsn, self.window_end());
        match read_sector(&self.raw[raw.at..raw.at + SECTOR_BYTES], raw.lsn) {
            SectorRead::Written(payload) => {
                self.window.extend_from_slice(payload);
                if payload.len() < SECTOR_PAYLOAD {
                    let end = self.window_lsn + self.window.len() as u64;
                    self.stop = Some((end, Stop::Unwritten));
                }
            }
            SectorRead::Unwritten => self.stop = Some((raw.lsn, Stop::Unwritten)),
            SectorRead::Damaged(reason) => {
                let path = self.chain[raw.segment].path().to_owned();
                self.stop = Some((raw.lsn, Stop::Damaged { path, offset: raw.offset, reason }));
            }
        }
        Ok(())
    }

    fn window_end(&self) -> u64 {
        self.window_lsn + self.window.len() as u64
    }

    /// After the stream stopped: the rest of the chain, sector by sector, from the sector
    /// after the one the stream stopped in. Returns the written sectors found there as runs
    /// of contiguous stream bytes `(lsn, bytes, path, file offset of the first)`, or the first
    /// damaged sector as an error.
    pub fn rest(mut self) -> Result<Rest> {
        debug_assert!(self.stop.is_some(), "the stream has not stopped yet");
        let mut rest = Rest::default();
        while let Some(raw) = self.next_raw()? {
            match read_sector(&self.raw[raw.at..raw.at + SECTOR_BYTES], raw.lsn) {
                SectorRead::Written(payload) => {
                    let (lsn, segment, offset) = (raw.lsn, raw.segment, raw.offset);
                    rest.written.push(WrittenSector { lsn, segment, offset });
                    match rest.runs.last_mut() {
                        Some(run) if run.0 + run.1.len() as u64 == lsn => {
                            run.1.extend_from_slice(payload)
                        }
                        _ => rest.runs.push((lsn, payload.to_vec())),
                    }
                }
                SectorRead::Unwritten => {}
                SectorRead::Damaged(reason) => {
                    let path = self.chain[raw.segment].path().to_owned();
                    let damage = Stop::Damaged { path, offset: raw.offset, reason };
                    rest.damaged = Some((raw.lsn, damage));
                    break;
                }
            }
        }
        Ok(rest)
    }
}

/// A sector `StreamReader::next_raw` read: its segment (index in the chain), place in the
/// stream, file offset, and where its bytes are in the reader's `raw`.
#[derive(Debug, Clone, Copy)]
struct RawSector {
    segment: usize,
    lsn: u64,
    offset: u64,
    at: usize,
}

/// What lies in a chain after its written stream stopped (see [`StreamReader::rest`]).
#[derive(Debug, Default)]
pub struct Rest {
    /// Contiguous runs of written sectors' payloads: `(lsn, bytes)`.
    pub runs: Vec<(u64, Vec<u8>)>,
    /// Every written sector: where it is (to erase it).
    pub written: Vec<WrittenSector>,
    /// The first damaged sector, if any (the scan stops there).
    pub damaged: Option<(u64, Stop)>,
}

/// A written sector found after the end of the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrittenSector {
    /// The stream position its header names.
    pub lsn: u64,
    /// Index of its segment in the chain.
    pub segment: usize,
    /// Its byte offset in that segment's file.
    pub offset: u64,
}

/// Reads `buf.len()` bytes of `segment`'s file at `offset`; a file that ends before is
/// damage (segment files are made at their full size before use).
fn read_exact(segment: &Segment, buf: &mut [u8], offset: u64) -> Result<()> {
    let path = segment.path();
    let got = segment
        .device
        .read_at(buf, offset)
        .map_err(|e| Error::io(format!("reading {} at byte {offset}", path.display()), e))?;
    if got < buf.len() {
        return Err(Error::LogCorrupt {
            path: path.to_owned(),
            offset: Some(offset + got as u64),
            lsn: None,
            reason: format!(
                "the file ends at byte {}, but its header says it holds {} bytes (truncated)",
                offset + got as u64,
                segment.file_bytes()
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::Storage;
    use crate::testing::SimDisk;

    fn segment(disk: &SimDisk, slot: u32, start: u64, capacity: u64) -> Segment {
        let device = disk.open(&segment_name(slot), true).unwrap().unwrap();
        device.write_at(&encode_segment_header(start, capacity), 0).unwrap();
        device.allocate(file_bytes(capacity)).unwrap();
        Segment::new(slot, SegmentHeader { start, capacity }, device)
    }

    fn write(segment: &Segment, block_lsn: u64, bytes: &[u8]) {
        let (offset, buf) = frame(segment, block_lsn, bytes);
        segment.device.write_at(buf.as_slice(), offset).unwrap();
    }

    /// A flush frames the start of its first block (written before) and the bytes appended
    /// since where they lie, without joining them, into a buffer an earlier flush left
    /// garbage in: the sectors are exactly those of the joined bytes framed into zeros.
    #[test]
    fn framing_two_parts_into_a_used_buffer_is_framing_them_joined() {
        let disk = SimDisk::new(1);
        let segment = segment(&disk, 0, 3 * BLOCK_PAYLOAD, 64 * BLOCK_PAYLOAD);
        let mut rng = crate::testing::Rng::new(11);
        let block_lsn = 5 * BLOCK_PAYLOAD;
        for len in [0, 1, 495, 496, 497, 3000, BLOCK_PAYLOAD as usize + 7, 20_000] {
            let bytes: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
            let (offset, joined) = frame(&segment, block_lsn, &bytes);
            let cuts = [0, 1, 495, 496, 497, len / 2, len.saturating_sub(1), len];
            for cut in cuts.into_iter().filter(|&cut| cut <= len) {
                let mut used = vec![0xA5u8; framed_len(len) + BLOCK_BYTES];
                let out = &mut used[..framed_len(len)];
                let parts = [&bytes[..cut], &bytes[cut..]];
                assert_eq!(frame_into(&segment, block_lsn, parts, out), offset);
                assert!(out == joined.as_slice(), "{len} bytes cut at {cut}");
            }
        }
    }

    #[test]
    fn headers_round_trip_and_refuse_damage() {
        let header = encode_segment_header(7 * BLOCK_PAYLOAD, 4 * BLOCK_PAYLOAD);
        let valid = SegmentHeader { start: 7 * BLOCK_PAYLOAD, capacity: 4 * BLOCK_PAYLOAD };
        assert_eq!(decode_segment_header(&header), HeaderRead::Valid(valid));
        assert_eq!(decode_segment_header(&[0u8; 4096]), HeaderRead::Unused);
        assert_eq!(decode_segment_header(&[1u8; 8]), HeaderRead::Unused);
        let mut old = header.clone();
        write_u32(&mut old, 12, UNFRAMED_VERSION);
        let crc = crc32c::crc32c(&old[4..HEADER_USED]);
        write_u32(&mut old, 0, crc);
        let HeaderRead::Damaged(reason) = decode_segment_header(&old) else { panic!() };
        assert!(reason.contains("log format 1"), "{reason}");
        for byte in 0..HEADER_USED {
            let mut bad = header.clone();
            bad[byte] ^= 0x10;
            let read = decode_segment_header(&bad);
            assert!(matches!(read, HeaderRead::Damaged(_)), "byte {byte}: {read:?}");
        }
        assert_eq!(slot_of_name("000012.log"), Some(12));
        assert_eq!(slot_of_name("1234567.log"), Some(1_234_567));
        assert_eq!(slot_of_name("12.log"), None);
        assert_eq!(slot_of_name("00001a.log"), None);
        assert_eq!(slot_of_name("000001.log.tmp"), None);
    }

    #[test]
    fn sectors_frame_the_stream_and_read_back_across_segments() {
        let disk = SimDisk::new(1);
        let capacity = 2 * BLOCK_PAYLOAD;
        let chain = [segment(&disk, 0, 0, capacity), segment(&disk, 1, capacity, capacity)];
        let stream: Vec<u8> = (0..capacity + 1000).map(|i| (i * 7 + 1) as u8).collect();
        // The stream written in pieces, each rewriting the block the previous ended in.
        let mut written = 0u64;
        for piece in [700u64, 3000, 4400, 300, 1000] {
            let to = (written + piece).min(stream.len() as u64);
            let mut from = written;
            while from < to {
                let segment = chain.iter().find(|s| s.holds(from)).unwrap();
                let upto = to.min(segment.end());
                let block = segment.block_lsn(from);
                write(segment, block, &stream[block as usize..upto as usize]);
                from = upto;
            }
            written = to;
        }
        let mut reader = StreamReader::new(&chain, 100);
        let got = reader.bytes(100, (written - 100) as usize).unwrap().unwrap().to_vec();
        assert!(got == stream[100..written as usize]);
        assert!(reader.bytes(written, 1).unwrap().is_none());
        assert_eq!(reader.stop(), Some(&(written, Stop::Unwritten)));
        let rest = reader.rest().unwrap();
        assert!(rest.runs.is_empty() && rest.damaged.is_none(), "{rest:?}");
    }

    #[test]
    fn torn_sectors_read_as_unwritten_and_damage_is_named() {
        let disk = SimDisk::new(2);
        let chain = [segment(&disk, 0, 0, 4 * BLOCK_PAYLOAD)];
        let stream: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8 + 1).collect();
        write(&chain[0], 0, &stream);
        // Sector 2 never landed: the stream stops there, sectors after it are a torn rest.
        let device = &chain[0].device;
        device.write_at(&[0u8; SECTOR_BYTES], Segment::sector_offset(2)).unwrap();
        let mut reader = StreamReader::new(&chain, 0);
        assert!(reader.bytes(0, 2000).unwrap().is_none());
        assert_eq!(reader.stop(), Some(&(2 * SECTOR_PAYLOAD as u64, Stop::Unwritten)));
        let rest = reader.rest().unwrap();
        assert_eq!(rest.runs.len(), 1);
        assert_eq!(rest.runs[0].0, 3 * SECTOR_PAYLOAD as u64);
        assert!(rest.runs[0].1 == stream[3 * SECTOR_PAYLOAD..]);
        // One flipped byte in sector 4: damaged, with its file offset.
        let mut byte = [0u8; 1];
        let at = Segment::sector_offset(4) + 100;
        device.read_at(&mut byte, at).unwrap();
        device.write_at(&[byte[0] ^ 1], at).unwrap();
        let mut reader = StreamReader::new(&chain, 0);
        let _ = reader.bytes(0, 2000).unwrap();
        let rest = reader.rest().unwrap();
        let Some((lsn, Stop::Damaged { offset, .. })) = rest.damaged else {
            panic!("no damage found: {rest:?}")
        };
        assert_eq!((lsn, offset), (4 * SECTOR_PAYLOAD as u64, Segment::sector_offset(4)));
        // A stale sector (valid, of another place) is unwritten, not damage.
        let mut stale = vec![0u8; SECTOR_BYTES];
        encode_sector(&mut stale, 999_999, b"old");
        assert_eq!(read_sector(&stale, 0), SectorRead::Unwritten);
        assert_eq!(read_sector(&stale, 999_999), SectorRead::Written(b"old"));
    }
}
