//! Fuzzes the B+tree node decoder: any page image, whatever its bytes, must decode without
//! panicking, and one that passes `Node::validate` (what every node read from disk must
//! pass) must be safe for the read paths and search, compact, split and merge correctly.
//! The body lives in the library so that unit tests run it on stable too.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ferrite::btree::node::fuzz_node_image(data));
