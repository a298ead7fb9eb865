//! keel's workspace test binary: every suite drives the built `keel` binary with the built
//! plugins (`cargo xtask test` builds them first). One binary, one module per behaviour.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    reason = "tests fail loudly by design"
)]

mod suite;
