//! Test support (filled in below).
