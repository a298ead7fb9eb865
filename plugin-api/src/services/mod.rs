//! Service interfaces the kernel itself hands control to.
//!
//! Feature services (session, llm, tools, …) are declared by the issue that builds them; the
//! kernel only knows the driver seam (ARCHITECTURE §4.6).

pub mod driver;
