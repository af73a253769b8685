//! Opening a submission engine of a given kind on a device list: the one place that knows
//! every engine, so that a worker asks for "an engine of kind K on these devices" and gets a
//! `Box<dyn IoEngine>`.

use std::sync::Arc;

use super::aio::AioEngine;
use super::mmap::MmapEngine;
use super::psync::PsyncEngine;
use super::request::MAX_IO_DEPTH;
use super::uring::UringEngine;
use super::{EngineKind, IoEngine};
use crate::error::{Error, Result};
use crate::io::device::Devices;

/// Opens an engine of kind `kind` on `devices` with room for `depth` requests in flight
/// (1 to [`MAX_IO_DEPTH`]). Direct I/O (and so the alignment checks) follows how `devices`
/// were opened. Each worker opens its own engine; the engine keeps the devices' descriptors
/// open for as long as it lives.
///
/// An engine the kernel refuses (io_uring disabled by a sysctl or a seccomp filter, AIO
/// limits) is an error that says so; [`open_best_engine`] is the one that falls back.
pub fn open_engine(kind: EngineKind, devices: &Devices, depth: usize) -> Result<Box<dyn IoEngine>> {
    open_engine_with(kind, devices, None, depth)
}

/// As [`open_engine`], with `extra` after the devices in the engine's list of files (device
/// index `devices.count()`): a block medium of the second cache tier, read and written
/// through the same ring. The mmap engine, which serves a mapping of the devices, takes
/// none.
pub fn open_engine_with(
    kind: EngineKind,
    devices: &Devices,
    extra: Option<&std::fs::File>,
    depth: usize,
) -> Result<Box<dyn IoEngine>> {
    if depth == 0 || depth > MAX_IO_DEPTH {
        return Err(Error::BadOptions {
            reason: format!("I/O depth {depth} is out of range (1 to {MAX_IO_DEPTH})"),
        });
    }
    let files = match extra {
        None => Arc::clone(devices.files()),
        Some(extra) => {
            let extra = extra
                .try_clone()
                .map_err(|e| Error::io("duplicating the extra file's descriptor", e))?;
            devices
                .files()
                .iter()
                .map(|f| f.try_clone())
                .chain([Ok(extra)])
                .collect::<std::io::Result<Vec<_>>>()
                .map_err(|e| Error::io("duplicating the devices' descriptors", e))?
                .into()
        }
    };
    let direct = devices.is_direct();
    Ok(match kind {
        EngineKind::IoUring => Box::new(UringEngine::new(files, direct, depth)?),
        EngineKind::Aio => Box::new(AioEngine::new(files, direct, depth)?),
        EngineKind::Psync => Box::new(PsyncEngine::new(files, direct, depth)),
        EngineKind::Mmap => Box::new(MmapEngine::new(devices.mapping()?, direct, depth)),
    })
}

/// The engines [`open_best_engine`] tries, best first. mmap is not among them: its reads
/// block the worker in page faults, and it needs the page cache that direct I/O avoids.
pub const PREFERRED_ENGINES: [EngineKind; 3] =
    [EngineKind::IoUring, EngineKind::Aio, EngineKind::Psync];

/// Opens the best engine the kernel allows, in the order of [`PREFERRED_ENGINES`]: io_uring,
/// else Linux AIO, else psync (which the kernel cannot refuse). Choosing anything but
/// io_uring is logged as a warning naming why the better engines were refused and what the
/// chosen one costs, so that a container that blocks io_uring (Docker 25+ and containerd 2.0
/// by default) runs, slower, and says so.
pub fn open_best_engine(
    devices: &Devices,
    extra: Option<&std::fs::File>,
    depth: usize,
) -> Result<Box<dyn IoEngine>> {
    let mut refusals = Vec::new();
    for kind in PREFERRED_ENGINES {
        match open_engine_with(kind, devices, extra, depth) {
            Ok(engine) => {
                if !refusals.is_empty() {
                    log::warn!(
                        "{}; the workers use {} instead: {}. Allow io_uring, or choose an \
                         engine in Options::engine, to silence this.",
                        refusals.join("; "),
                        kind.name(),
                        fallback_cost(kind)
                    );
                }
                return Ok(engine);
            }
            Err(e @ Error::BadOptions { .. }) => return Err(e),
            Err(e) => refusals.push(format!("{} refused ({e})", kind.name())),
        }
    }
    unreachable!("psync opens on any kernel")
}

/// What a fallback engine costs against io_uring, as measured in docs/benchmarks.md.
fn fallback_cost(kind: EngineKind) -> &'static str {
    match kind {
        EngineKind::IoUring => "nothing",
        EngineKind::Aio => {
            "page reads keep about io_uring's rate, but socket calls (a server's) and \
             writes to files not opened for direct I/O block a worker while they run"
        }
        EngineKind::Psync | EngineKind::Mmap => {
            "each worker performs one request at a time, so random reads from tasks reach \
             about a fifth of the device's rate, and socket calls block a worker"
        }
    }
}
