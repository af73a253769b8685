//! The change buffer: puts into leaves that are not in memory wait here instead of reading
//! their leaf, and go into it in groups later (see `docs/design.md`, "The change buffer").
//! `map.rs` is the mechanism (the entries by tree and key, staged with commits, their
//! snapshot for checkpoints), `policy.rs` the decisions (how much it may hold, when the
//! pool's flex frames are lent to it, which leaf the next drain takes). The drain itself is
//! a commit, made by the database (`db/tree.rs`).

mod map;
mod policy;

pub use map::{entry_cost, is_empty_range, ChangeBuffer};
pub use policy::TRANSACTION_SHARE;
