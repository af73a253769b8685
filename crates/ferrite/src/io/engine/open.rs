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
/// limits) is an error that says so: there is no silent fallback to another kind.
pub fn open_engine(kind: EngineKind, devices: &Devices, depth: usize) -> Result<Box<dyn IoEngine>> {
    if depth == 0 || depth > MAX_IO_DEPTH {
        return Err(Error::BadOptions {
            reason: format!("I/O depth {depth} is out of range (1 to {MAX_IO_DEPTH})"),
        });
    }
    let files = Arc::clone(devices.files());
    let direct = devices.is_direct();
    Ok(match kind {
        EngineKind::IoUring => Box::new(UringEngine::new(files, direct, depth)?),
        EngineKind::Aio => Box::new(AioEngine::new(files, direct, depth)?),
        EngineKind::Psync => Box::new(PsyncEngine::new(files, direct, depth)),
        EngineKind::Mmap => Box::new(MmapEngine::new(devices.mapping()?, direct, depth)),
    })
}
