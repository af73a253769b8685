//! How results are written: the one machine-readable `result` line every benchmark ends with
//! (`result_line`), its JSON form (`json`), the number formats people read (`format`) and the
//! charts of a comparison (`chart`, written out by `svg`).

pub mod chart;
pub mod format;
pub mod json;
pub mod result_line;
mod svg;

pub use format::{bytes, duration, latency, si, thousands};
pub use result_line::ResultLine;
