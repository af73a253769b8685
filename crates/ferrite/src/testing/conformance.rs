//! The conformance suite every submission engine passes, over one file and over a
//! three-device stripe (addressed through `Devices::locate`), with and without direct I/O:
//! data written comes back byte for byte and lands where `locate` says; a batch larger than
//! the depth goes through `Full` / submit / reap; reads stop short at the end of a device and
//! return 0 past it; misaligned direct requests and unknown devices are refused; failed
//! requests complete with their error; `reap(wait)` with nothing in flight returns at once;
//! every tag comes back exactly once.
//!
//! The engine of a page file on a block device (`io::BlockEngine`, one device, never direct)
//! passes the same checks that apply to it, run on a simulated disk's file, plus the disk's
//! faults and crashes.

#![allow(unsafe_code)] // `IoEngine::queue`

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use std::sync::Arc;

use super::SimDisk;
use crate::io::{
    open_engine, AlignedBlock, BlockDevice, BlockEngine, DeviceOptions, Devices, EngineKind,
    IoCompletion, IoEngine, IoKind, IoRequest, QueueError, Storage, IO_ALIGN, MAX_IO_DEPTH,
};
use tempfile::TempDir;

const BLOCK: usize = IO_ALIGN;
/// Stripe chunk of the tests: four blocks, so a few dozen blocks cross many chunks.
const CHUNK: u64 = 4 * BLOCK as u64;

/// A device list in a temporary directory.
struct Setup {
    _dir: TempDir,
    paths: Vec<PathBuf>,
    devices: Devices,
}

fn setup(label: &str, kind: EngineKind, device_count: usize, direct: bool) -> Setup {
    let dir = TempDir::with_prefix(format!("conformance-{label}-{}-{device_count}", kind.name()))
        .unwrap();
    let paths: Vec<PathBuf> =
        (0..device_count).map(|i| dir.path().join(format!("device-{i}"))).collect();
    let options = DeviceOptions {
        direct,
        writable: true,
        create: true,
        chunk_bytes: CHUNK,
        grow_bytes: CHUNK,
    };
    let devices = Devices::open(&paths, &options).unwrap();
    Setup { _dir: dir, paths, devices }
}

/// Every engine, over one device and over three, direct or not.
fn each_engine(direct_modes: &[bool], mut test: impl FnMut(EngineKind, usize, bool)) {
    for kind in EngineKind::ALL {
        for device_count in [1, 3] {
            for &direct in direct_modes {
                test(kind, device_count, direct);
            }
        }
    }
}

fn context(kind: EngineKind, device_count: usize, direct: bool) -> String {
    format!("{} over {device_count} device(s), direct={direct}", kind.name())
}

/// The byte at logical offset `offset` of a test's data, varied by `seed`.
fn pattern(seed: u64, offset: u64) -> u8 {
    let x = (offset / BLOCK as u64).wrapping_mul(0x9E37_79B9) ^ seed.wrapping_mul(0x85EB_CA6B);
    (x as u8).wrapping_add((offset % 251) as u8)
}

/// Runs `requests` to completion, keeping the engine as full as it goes (queue until
/// `Full`, submit, reap with wait); checks that every tag comes back exactly once and that
/// the engine never holds more than its depth. Returns the results by tag.
fn run_all(engine: &mut dyn IoEngine, requests: &[IoRequest]) -> HashMap<u64, io::Result<usize>> {
    let mut results = HashMap::new();
    let mut next = 0;
    let mut out: Vec<IoCompletion> = Vec::new();
    while results.len() < requests.len() {
        while next < requests.len() {
            // SAFETY: every buffer outlives the run and is not touched until it is over.
            match unsafe { engine.queue(requests[next]) } {
                Ok(()) => next += 1,
                Err(QueueError::Full) => {
                    assert_eq!(engine.in_flight(), engine.depth());
                    break;
                }
                Err(e) => panic!("request {next} refused: {e}"),
            }
        }
        assert!(engine.in_flight() <= engine.depth());
        engine.submit().unwrap();
        out.clear();
        let reaped = engine.reap(&mut out, true).unwrap();
        assert_eq!(reaped, out.len());
        assert!(reaped > 0, "reap(wait) returned nothing with requests in flight");
        for completion in out.drain(..) {
            let previous = results.insert(completion.tag, completion.result);
            assert!(previous.is_none(), "tag {} came back twice", completion.tag);
        }
    }
    assert_eq!(engine.in_flight(), 0);
    out.clear();
    assert_eq!(engine.reap(&mut out, false).unwrap(), 0, "nothing comes back twice");
    results
}

/// Requests covering logical bytes `0..total` of `devices` in pieces of 1, 2 and 4 blocks
/// (never across a chunk), into or out of `buf` at the same logical offsets.
fn cover(
    devices: &Devices,
    kind: IoKind,
    buf: &mut AlignedBlock,
    first_tag: u64,
) -> Vec<IoRequest> {
    let total = buf.len() as u64;
    let mut requests = Vec::new();
    let mut offset = 0u64;
    let sizes = [BLOCK as u64, 2 * BLOCK as u64, 4 * BLOCK as u64];
    while offset < total {
        let to_chunk_end = CHUNK - offset % CHUNK;
        let len = sizes[requests.len() % 3].min(to_chunk_end).min(total - offset);
        let (device, device_offset) = devices.locate_range(offset, len).unwrap();
        requests.push(IoRequest {
            kind,
            device,
            offset: device_offset,
            buf: buf.as_mut_ptr().wrapping_add(offset as usize),
            len: len as usize,
            tag: first_tag + requests.len() as u64,
        });
        offset += len;
    }
    requests
}

#[test]
fn written_data_reads_back_and_lands_where_locate_says() {
    each_engine(&[true, false], |kind, device_count, direct| {
        let what = context(kind, device_count, direct);
        let s = setup("data", kind, device_count, direct);
        let total = 24 * BLOCK;
        s.devices.ensure_capacity(total as u64).unwrap();
        let seed = kind as u64 * 10 + device_count as u64 + u64::from(direct);
        let mut data = AlignedBlock::zeroed(total);
        for (i, byte) in data.as_mut_slice().iter_mut().enumerate() {
            *byte = pattern(seed, i as u64);
        }
        let mut engine = open_engine(kind, &s.devices, 5).unwrap();
        assert_eq!((engine.kind(), engine.depth(), engine.in_flight()), (kind, 5, 0));
        let writes = cover(&s.devices, IoKind::Write, &mut data, 0);
        for (tag, result) in run_all(engine.as_mut(), &writes) {
            assert_eq!(result.unwrap(), writes[tag as usize].len, "{what}: write {tag}");
        }
        // Read back in a different cut: whole chunks, last to first.
        let mut back = AlignedBlock::zeroed(total);
        let reads: Vec<IoRequest> = (0..(total as u64 / CHUNK))
            .rev()
            .map(|chunk| {
                let offset = chunk * CHUNK;
                let (device, device_offset) = s.devices.locate_range(offset, CHUNK).unwrap();
                IoRequest {
                    kind: IoKind::Read,
                    device,
                    offset: device_offset,
                    buf: back.as_mut_ptr().wrapping_add(offset as usize),
                    len: CHUNK as usize,
                    tag: 1000 + chunk,
                }
            })
            .collect();
        for (tag, result) in run_all(engine.as_mut(), &reads) {
            assert_eq!(result.unwrap(), CHUNK as usize, "{what}: read {tag}");
        }
        assert!(back.as_slice() == data.as_slice(), "{what}: data read back differs");
        drop(engine);
        // The bytes sit where `locate` says, as the device files show.
        let files: Vec<Vec<u8>> = s.paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
        for offset in (0..total as u64).step_by(1000) {
            let (device, device_offset) = s.devices.locate(offset);
            assert_eq!(
                files[device][device_offset as usize],
                pattern(seed, offset),
                "{what}: logical byte {offset}"
            );
        }
    });
}

#[test]
fn a_batch_larger_than_the_depth_goes_through_full_submit_and_reap() {
    each_engine(&[true], |kind, device_count, direct| {
        let what = context(kind, device_count, direct);
        let s = setup("batch", kind, device_count, direct);
        let blocks = 64;
        s.devices.ensure_capacity((blocks * BLOCK) as u64).unwrap();
        let mut engine = open_engine(kind, &s.devices, 4).unwrap();
        let mut buf = AlignedBlock::zeroed(blocks * BLOCK);
        // 64 reads of one block each, in a scrambled order, tags not in order either.
        let requests: Vec<IoRequest> = (0..blocks as u64)
            .map(|i| {
                let block = i * 37 % blocks as u64;
                let (device, offset) = s.devices.locate(block * BLOCK as u64);
                IoRequest {
                    kind: IoKind::Read,
                    device,
                    offset,
                    buf: buf.as_mut_ptr().wrapping_add((block as usize) * BLOCK),
                    len: BLOCK,
                    tag: 5_000 + block * 3,
                }
            })
            .collect();
        let results = run_all(engine.as_mut(), &requests);
        assert_eq!(results.len(), blocks, "{what}");
        for request in &requests {
            assert_eq!(results[&request.tag].as_ref().unwrap(), &BLOCK, "{what}");
        }
    });
}

#[test]
fn reads_stop_short_at_the_end_and_return_nothing_past_it() {
    each_engine(&[true, false], |kind, device_count, direct| {
        let what = context(kind, device_count, direct);
        let s = setup("short", kind, device_count, direct);
        // The last device holds 2 blocks and 1000 bytes (not a multiple of anything).
        let last = device_count - 1;
        let len = 2 * BLOCK + 1000;
        let content: Vec<u8> = (0..len as u64).map(|i| pattern(7, i)).collect();
        std::fs::write(&s.paths[last], &content).unwrap();
        let mut engine = open_engine(kind, &s.devices, 4).unwrap();
        let mut bufs: Vec<AlignedBlock> = (0..4).map(|_| AlignedBlock::zeroed(2 * BLOCK)).collect();
        let cases =
            [(BLOCK, 2 * BLOCK, BLOCK + 1000), (2 * BLOCK, BLOCK, 1000), (3 * BLOCK, BLOCK, 0)];
        let requests: Vec<IoRequest> = cases
            .iter()
            .zip(bufs.iter_mut())
            .enumerate()
            .map(|(i, (&(offset, len, _), buf))| IoRequest {
                kind: IoKind::Read,
                device: last,
                offset: offset as u64,
                buf: buf.as_mut_ptr(),
                len,
                tag: i as u64,
            })
            .collect();
        let results = run_all(engine.as_mut(), &requests);
        for (i, &(offset, _, expected)) in cases.iter().enumerate() {
            let got = *results[&(i as u64)].as_ref().unwrap();
            assert_eq!(got, expected, "{what}: read {i}");
            if got > 0 {
                assert_eq!(bufs[i].as_slice()[..got], content[offset..offset + got], "{what}");
            }
        }
    });
}

#[test]
fn misaligned_direct_requests_and_unknown_devices_are_refused() {
    each_engine(&[true], |kind, device_count, direct| {
        let what = context(kind, device_count, direct);
        let s = setup("refuse", kind, device_count, direct);
        s.devices.ensure_capacity(CHUNK * device_count as u64).unwrap();
        let mut engine = open_engine(kind, &s.devices, 2).unwrap();
        let mut buf = AlignedBlock::zeroed(2 * BLOCK);
        let good = IoRequest {
            kind: IoKind::Read,
            device: device_count - 1,
            offset: BLOCK as u64,
            buf: buf.as_mut_ptr(),
            len: BLOCK,
            tag: 1,
        };
        for bad in [
            IoRequest { buf: good.buf.wrapping_add(512), ..good },
            IoRequest { offset: 100, ..good },
            IoRequest { len: 512, ..good },
            IoRequest { kind: IoKind::Write, offset: BLOCK as u64 + 1, ..good },
        ] {
            // SAFETY: refused requests are never performed.
            let refused = unsafe { engine.queue(bad) };
            assert!(matches!(refused, Err(QueueError::Misaligned)), "{what}: {bad:?}");
        }
        // SAFETY: as above.
        let refused = unsafe { engine.queue(IoRequest { device: device_count, ..good }) };
        assert!(matches!(refused, Err(QueueError::NoSuchDevice)), "{what}");
        assert_eq!(engine.in_flight(), 0, "{what}: refused requests are not in flight");
        let results = run_all(engine.as_mut(), &[good]);
        assert_eq!(*results[&1].as_ref().unwrap(), BLOCK, "{what}");
    });
}

#[test]
fn buffered_engines_take_unaligned_requests() {
    each_engine(&[false], |kind, device_count, direct| {
        let what = context(kind, device_count, direct);
        let s = setup("unaligned", kind, device_count, direct);
        s.devices.ensure_capacity(CHUNK * device_count as u64).unwrap();
        let mut engine = open_engine(kind, &s.devices, 2).unwrap();
        let mut out = AlignedBlock::zeroed(BLOCK);
        let message = b"neither the buffer, the offset nor the length is aligned";
        out.as_mut_slice()[3..3 + message.len()].copy_from_slice(message);
        let mut back = AlignedBlock::zeroed(BLOCK);
        let at = |kind, buf: *mut u8| IoRequest {
            kind,
            device: 0,
            offset: 4097,
            buf: buf.wrapping_add(3),
            len: message.len(),
            tag: kind as u64,
        };
        let write = at(IoKind::Write, out.as_mut_ptr());
        assert_eq!(
            *run_all(engine.as_mut(), &[write])[&write.tag].as_ref().unwrap(),
            message.len()
        );
        let read = at(IoKind::Read, back.as_mut_ptr());
        assert_eq!(*run_all(engine.as_mut(), &[read])[&read.tag].as_ref().unwrap(), message.len());
        assert_eq!(&back.as_slice()[3..3 + message.len()], message, "{what}");
    });
}

#[test]
fn failed_requests_complete_with_their_error() {
    each_engine(&[true], |kind, device_count, direct| {
        let what = context(kind, device_count, direct);
        let s = setup("errors", kind, device_count, direct);
        s.devices.ensure_capacity(CHUNK * device_count as u64).unwrap();
        let options = DeviceOptions {
            direct,
            writable: false,
            create: false,
            chunk_bytes: CHUNK,
            grow_bytes: CHUNK,
        };
        let read_only = Devices::open(&s.paths, &options).unwrap();
        let mut engine = open_engine(kind, &read_only, 4).unwrap();
        let mut buf = AlignedBlock::zeroed(BLOCK);
        let write = IoRequest {
            kind: IoKind::Write,
            device: 0,
            offset: 0,
            buf: buf.as_mut_ptr(),
            len: BLOCK,
            tag: 9,
        };
        let read = IoRequest { kind: IoKind::Read, tag: 10, ..write };
        let results = run_all(engine.as_mut(), &[write, read]);
        let error = results[&9].as_ref().unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::EBADF), "{what}: {error}");
        assert_eq!(*results[&10].as_ref().unwrap(), BLOCK, "{what}");
    });
}

#[test]
fn reap_with_nothing_in_flight_returns_at_once_and_queued_requests_are_not_lost() {
    each_engine(&[true], |kind, device_count, direct| {
        let what = context(kind, device_count, direct);
        let s = setup("idle", kind, device_count, direct);
        s.devices.ensure_capacity(CHUNK * device_count as u64).unwrap();
        let mut engine = open_engine(kind, &s.devices, 3).unwrap();
        let mut out = Vec::new();
        let start = Instant::now();
        assert_eq!(engine.reap(&mut out, true).unwrap(), 0, "{what}");
        assert_eq!(engine.reap(&mut out, false).unwrap(), 0, "{what}");
        assert!(out.is_empty());
        assert!(start.elapsed() < Duration::from_secs(1), "{what}: reap waited");
        assert_eq!(engine.submit().unwrap(), 0, "{what}: nothing to submit");
        // Queued and never submitted: a waiting reap submits it rather than wait forever.
        let mut buf = AlignedBlock::zeroed(BLOCK);
        let read = IoRequest {
            kind: IoKind::Read,
            device: 0,
            offset: 0,
            buf: buf.as_mut_ptr(),
            len: BLOCK,
            tag: 77,
        };
        // SAFETY: `buf` outlives the request, which is reaped below.
        unsafe { engine.queue(read) }.unwrap();
        assert_eq!(engine.in_flight(), 1);
        while out.is_empty() {
            engine.reap(&mut out, true).unwrap();
        }
        assert_eq!((out.len(), out[0].tag), (1, 77), "{what}");
        assert_eq!(*out[0].result.as_ref().unwrap(), BLOCK, "{what}");
        assert_eq!(engine.in_flight(), 0);
        // An empty request moves nothing and still completes once.
        let empty = IoRequest { len: 0, tag: 78, ..read };
        let results = run_all(engine.as_mut(), &[empty]);
        assert_eq!(*results[&78].as_ref().unwrap(), 0, "{what}");
    });
}

#[test]
fn dropping_an_engine_waits_for_its_requests() {
    each_engine(&[true], |kind, device_count, direct| {
        let s = setup("drop", kind, device_count, direct);
        let blocks = 16;
        s.devices.ensure_capacity((blocks * BLOCK) as u64).unwrap();
        let mut engine = open_engine(kind, &s.devices, blocks).unwrap();
        let mut buf = AlignedBlock::zeroed(blocks * BLOCK);
        for block in 0..blocks {
            let (device, offset) = s.devices.locate((block * BLOCK) as u64);
            let request = IoRequest {
                kind: IoKind::Read,
                device,
                offset,
                buf: buf.as_mut_ptr().wrapping_add(block * BLOCK),
                len: BLOCK,
                tag: block as u64,
            };
            // SAFETY: the engine is dropped (and waits for the reads) before `buf`.
            unsafe { engine.queue(request) }.unwrap();
        }
        engine.submit().unwrap();
        drop(engine);
        drop(buf);
    });
}

#[test]
fn open_engine_checks_the_depth() {
    let s = setup("depth", EngineKind::Psync, 1, false);
    for depth in [0, MAX_IO_DEPTH + 1] {
        let Err(error) = open_engine(EngineKind::IoUring, &s.devices, depth) else {
            panic!("depth {depth} accepted");
        };
        assert!(error.to_string().contains("out of range"), "{error}");
    }
    // The file must stay usable by others while engines hold it.
    let _other = OpenOptions::new().read(true).open(&s.paths[0]).unwrap();
}

/// A simulated disk, one file on it, and an engine of `depth` on that file.
fn sim_setup(seed: u64, depth: usize) -> (Arc<SimDisk>, Arc<dyn BlockDevice>, BlockEngine) {
    let disk = SimDisk::new(seed);
    let device = disk.open("pages", true).unwrap().unwrap();
    let engine = BlockEngine::new(Arc::clone(&device), depth).unwrap();
    (disk, device, engine)
}

/// One request on device 0 of `len` bytes at `offset` of the file and of `buf`.
fn sim_request(
    kind: IoKind,
    buf: &mut AlignedBlock,
    offset: usize,
    len: usize,
    tag: u64,
) -> IoRequest {
    IoRequest {
        kind,
        device: 0,
        offset: offset as u64,
        buf: buf.as_mut_ptr().wrapping_add(offset),
        len,
        tag,
    }
}

#[test]
fn the_block_engine_writes_reads_back_and_takes_batches_larger_than_its_depth() {
    let (_disk, device, mut engine) = sim_setup(1, 3);
    assert_eq!((engine.kind(), engine.depth(), engine.in_flight()), (EngineKind::Psync, 3, 0));
    let total = 24 * BLOCK;
    let mut data = AlignedBlock::zeroed(total);
    for (i, byte) in data.as_mut_slice().iter_mut().enumerate() {
        *byte = pattern(11, i as u64);
    }
    // Pieces of 1, 2 and 4 blocks, and unaligned ones: nothing is direct.
    let cuts = [BLOCK, 2 * BLOCK, 4 * BLOCK, 1000, 3 * BLOCK + 96];
    let mut writes = Vec::new();
    let mut offset = 0;
    while offset < total {
        let len = cuts[writes.len() % cuts.len()].min(total - offset);
        writes.push(sim_request(IoKind::Write, &mut data, offset, len, writes.len() as u64));
        offset += len;
    }
    for (tag, result) in run_all(&mut engine, &writes) {
        assert_eq!(result.unwrap(), writes[tag as usize].len, "write {tag}");
    }
    let mut on_disk = vec![0u8; total];
    assert_eq!(device.read_at(&mut on_disk, 0).unwrap(), total);
    assert!(on_disk == data.as_slice(), "the bytes are on the device where asked");
    let mut back = AlignedBlock::zeroed(total);
    let reads: Vec<IoRequest> = (0..total / BLOCK)
        .rev()
        .map(|block| sim_request(IoKind::Read, &mut back, block * BLOCK, BLOCK, block as u64))
        .collect();
    for (tag, result) in run_all(&mut engine, &reads) {
        assert_eq!(result.unwrap(), BLOCK, "read {tag}");
    }
    assert!(back.as_slice() == data.as_slice(), "data read back differs");
}

#[test]
fn the_block_engine_stops_reads_short_at_the_end_and_refuses_other_devices() {
    let (_disk, device, mut engine) = sim_setup(2, 4);
    let len = 2 * BLOCK + 1000;
    let content: Vec<u8> = (0..len as u64).map(|i| pattern(7, i)).collect();
    device.write_at(&content, 0).unwrap();
    let mut buf = AlignedBlock::zeroed(4 * BLOCK);
    let cases = [(BLOCK, 2 * BLOCK, BLOCK + 1000), (2 * BLOCK, BLOCK, 1000), (3 * BLOCK, BLOCK, 0)];
    let requests: Vec<IoRequest> = cases
        .iter()
        .enumerate()
        .map(|(i, &(offset, len, _))| IoRequest {
            kind: IoKind::Read,
            device: 0,
            offset: offset as u64,
            buf: buf.as_mut_ptr().wrapping_add(i * BLOCK),
            len,
            tag: i as u64,
        })
        .collect();
    let results = run_all(&mut engine, &requests);
    for (i, &(_, _, expected)) in cases.iter().enumerate() {
        assert_eq!(*results[&(i as u64)].as_ref().unwrap(), expected, "read {i}");
    }
    assert_eq!(buf.as_slice()[..BLOCK + 1000], content[BLOCK..]);
    let refused = IoRequest { device: 1, ..requests[0] };
    // SAFETY: refused requests are never performed.
    assert!(matches!(unsafe { engine.queue(refused) }, Err(QueueError::NoSuchDevice)));
    assert_eq!(engine.in_flight(), 0);
    assert!(BlockEngine::new(Arc::clone(&device), 0).is_err());
}

#[test]
fn the_block_engine_completes_failed_requests_with_their_error() {
    let (disk, _device, mut engine) = sim_setup(3, 4);
    let mut buf = AlignedBlock::zeroed(2 * BLOCK);
    let write = sim_request(IoKind::Write, &mut buf, 0, BLOCK, 1);
    let read = IoRequest { kind: IoKind::Read, tag: 2, ..write };
    disk.fail_next_write();
    let results = run_all(&mut engine, &[write, read]);
    assert_eq!(results[&1].as_ref().unwrap_err().raw_os_error(), Some(libc::EIO));
    assert!(results[&2].is_ok());
    // An idle reap returns at once; a queued request is submitted by a waiting reap.
    let mut out = Vec::new();
    assert_eq!(engine.reap(&mut out, true).unwrap(), 0);
    // SAFETY: `buf` outlives the request, which is reaped below.
    unsafe { engine.queue(IoRequest { len: 0, tag: 3, ..read }) }.unwrap();
    assert_eq!(engine.reap(&mut out, true).unwrap(), 1);
    assert_eq!((out[0].tag, out[0].result.as_ref().unwrap()), (3, &0));
    // After a crash, the engine's device is dead.
    disk.crash();
    let results = run_all(&mut engine, &[read]);
    let error = results[&2].as_ref().unwrap_err();
    assert_eq!(error.to_string(), "the simulated disk crashed");
}
