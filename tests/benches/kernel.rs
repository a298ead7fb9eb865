//! Kernel benchmarks.
fn main() {}
