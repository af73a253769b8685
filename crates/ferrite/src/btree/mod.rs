//! The B+tree: node layout (`node`) and restartable operations over the buffer pool.

pub mod node;
