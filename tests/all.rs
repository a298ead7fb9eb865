//! Integration suite root.
