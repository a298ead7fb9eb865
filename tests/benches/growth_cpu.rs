//! CPU of keel's whole process tree for the growth benchmark, in nanoseconds when the machine
//! allows it.
//!
//! Why not `/proc/<pid>/stat` alone: it counts in 10 ms ticks, and the first window (steps
//! 1→10, 9 steps of a few ms each) is then only three or four ticks — a ±30 % error on the
//! denominator of the ratio. A cgroup accounts every task in it to the nanosecond,
//! keel's threads and its shell children alike (a reaped child's time stays counted), so when
//! the bench may create one (root, cgroup v1 `cpuacct` or v2), keel is moved into its own at
//! spawn; otherwise the tick counters are used and the table says so.

use std::path::PathBuf;

/// Where the CPU time comes from.
pub enum CpuMeter {
    /// A cgroup of keel's own: its usage file, and nanoseconds per unit it counts in.
    Cgroup {
        /// The cgroup directory (removed on drop).
        dir: PathBuf,
        /// `cpuacct.usage` (ns) or `cpu.stat` (`usage_usec`).
        usage: PathBuf,
        /// Whether `usage` is v2's `cpu.stat` (µs).
        v2: bool,
    },
    /// utime+stime+cutime+cstime of keel (`/proc/<pid>/stat`), in 10 ms ticks.
    Ticks,
}

impl CpuMeter {
    /// Moves `pid` (keel, before it has spawned anything) into a fresh cgroup, or falls back
    /// to the tick counters.
    pub fn attach(pid: u32) -> CpuMeter {
        let name = format!("keel-growth-{}-{pid}", std::process::id());
        let candidates = [
            (
                PathBuf::from("/sys/fs/cgroup/cpuacct"),
                "cpuacct.usage",
                false,
            ),
            (PathBuf::from("/sys/fs/cgroup"), "cpu.stat", true),
            (PathBuf::from("/sys/fs/cgroup/unified"), "cpu.stat", true),
        ];
        for (root, usage, v2) in candidates {
            let marker = if v2 { "cgroup.controllers" } else { usage };
            if !root.join(marker).exists() {
                continue;
            }
            let dir = root.join(&name);
            if std::fs::create_dir(&dir).is_err() {
                continue;
            }
            if std::fs::write(dir.join("cgroup.procs"), pid.to_string()).is_ok()
                && dir.join(usage).exists()
            {
                return CpuMeter::Cgroup {
                    usage: dir.join(usage),
                    dir,
                    v2,
                };
            }
            let _ = std::fs::remove_dir(&dir);
        }
        CpuMeter::Ticks
    }

    /// CPU so far, in nanoseconds (`ticks` reads the `/proc` fallback).
    pub fn read_ns(&self, ticks: impl FnOnce() -> Option<u64>) -> Option<u64> {
        match self {
            CpuMeter::Ticks => ticks().map(|t| t * 10_000_000),
            CpuMeter::Cgroup { usage, v2, .. } => {
                let text = std::fs::read_to_string(usage).ok()?;
                if *v2 {
                    text.lines()
                        .find_map(|l| l.strip_prefix("usage_usec "))
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(|us| us * 1000)
                } else {
                    text.trim().parse().ok()
                }
            }
        }
    }

    /// What the table calls the source.
    pub fn source(&self) -> &'static str {
        match self {
            CpuMeter::Cgroup { v2: false, .. } => "cgroup v1 cpuacct (ns)",
            CpuMeter::Cgroup { v2: true, .. } => "cgroup v2 cpu.stat (µs)",
            CpuMeter::Ticks => "/proc ticks (10 ms)",
        }
    }
}

impl Drop for CpuMeter {
    fn drop(&mut self) {
        if let CpuMeter::Cgroup { dir, .. } = self {
            // Empty once keel and its children have exited.
            let _ = std::fs::remove_dir(dir);
        }
    }
}
