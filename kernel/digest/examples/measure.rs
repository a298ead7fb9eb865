//! What the digest cache saves at a start: hashing the given libraries (no cache) against the
//! warm path (load the cache, open and `fstat` each file, look it up), medians of a few runs.
//!
//! `cargo run --release -p keel-digest --example measure -- LIB...` (issue 25 item 2; the
//! numbers are in the report of that work, not in a bench: `cargo xtask bench` times whole
//! starts).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use keel_digest::{Cache, open_all};

const RUNS: usize = 15;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn main() -> Result<(), String> {
    let files: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if files.is_empty() {
        return Err("usage: measure LIB...".to_owned());
    }
    let bytes: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or_default())
        .sum();
    let home = std::env::temp_dir().join(format!("keel-digest-measure-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(&home).map_err(|e| e.to_string())?;

    // Page cache warm for both: what a start right after another sees.
    let mut off = Cache::off();
    open_all(&files, &mut off);
    let cold: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            let out = open_all(&files, &mut Cache::off());
            let took = started.elapsed();
            assert!(out.iter().all(Result::is_ok), "a library failed");
            took
        })
        .collect();

    // Record once: a library changed within the racy margin (~40 s) is hashed again each time,
    // and the line says so (fewer hits than libraries).
    open_all(&files, &mut Cache::open(&home));
    let mut hits = 0;
    let warm: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            let mut cache = Cache::open(&home);
            let out = open_all(&files, &mut cache);
            let took = started.elapsed();
            hits = cache.hits();
            drop(out);
            took
        })
        .collect();
    let _ = std::fs::remove_dir_all(&home);

    #[expect(clippy::cast_precision_loss, reason = "a size for display")]
    let mb = bytes as f64 / 1e6;
    let cold = median(cold);
    let warm = median(warm);
    println!(
        "{} libraries, {mb:.1} MB: hashing {:.2} ms ({:.0} MB/s); warm cache {} µs ({hits}/{} from the cache); {:.0}× less",
        files.len(),
        cold.as_secs_f64() * 1e3,
        mb / cold.as_secs_f64(),
        warm.as_micros(),
        files.len(),
        cold.as_secs_f64() / warm.as_secs_f64().max(1e-9),
    );
    Ok(())
}
