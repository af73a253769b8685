//! The engines' data directory: created if missing, handed to C as a NUL-terminated path.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::PeerError;

/// Creates `dir` (and its parents) if missing and returns it as a C string.
pub(crate) fn prepare(engine: &'static str, dir: &Path) -> Result<CString, PeerError> {
    std::fs::create_dir_all(dir).map_err(|source| PeerError::Io {
        engine,
        context: format!("creating the data directory {}", dir.display()),
        source,
    })?;
    CString::new(dir.as_os_str().as_bytes()).map_err(|_| PeerError::Invalid {
        engine,
        reason: format!("the path {} holds a NUL byte", dir.display()),
    })
}
