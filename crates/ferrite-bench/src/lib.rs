//! Workloads and measurement behind `ferrite bench`.
