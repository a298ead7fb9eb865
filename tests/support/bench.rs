//! Shared plumbing of the benchmark harnesses (`tests/benches/*.rs`): sample statistics and the
//! machine description every report records. Benchmarks report numbers; nothing here asserts.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{Value, json};

/// The `main` of a harness that takes only `--quick`: outside `cargo bench` (no `--bench`) it
/// says so and succeeds; otherwise it runs `run(quick)` and turns an error into one stderr line
/// and a failing exit.
pub fn harness_main(what: &str, run: impl FnOnce(bool) -> Result<(), String>) -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--bench") {
        println!("{what}: nothing to do outside `cargo bench`; run `cargo xtask bench`");
        return ExitCode::SUCCESS;
    }
    match run(args.iter().any(|a| a == "--quick")) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{what} failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Order statistics of a set of samples (0 for an empty set).
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    /// Median.
    pub median: f64,
    /// Nearest-rank 90th percentile.
    pub p90: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Number of samples.
    pub n: usize,
}

/// Summarises `samples`.
pub fn summarize(mut samples: Vec<f64>) -> Summary {
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    if n == 0 {
        return Summary {
            median: 0.0,
            p90: 0.0,
            min: 0.0,
            max: 0.0,
            n,
        };
    }
    let median = if n % 2 == 1 {
        samples[n / 2]
    } else {
        (samples[n / 2 - 1] + samples[n / 2]) / 2.0
    };
    let rank = ((0.9 * n as f64).ceil() as usize).clamp(1, n);
    Summary {
        median,
        p90: samples[rank - 1],
        min: samples[0],
        max: samples[n - 1],
        n,
    }
}

/// CPU, core count, OS, architecture, rustc and time of the run.
pub fn machine() -> Value {
    let rustc =
        std::process::Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
            .arg("-V")
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_default();
    json!({
        "cpu": cpu,
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
        "rustc": rustc,
        "unix_time": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    })
}

/// The release directory holding `keel` and the plugins: this bench executable lives in
/// `<target>/release/deps/`, so its grandparent is right whatever `CARGO_TARGET_DIR` says.
/// `KEEL_BENCH_RELEASE_DIR` names another build's release directory first, so one bench
/// binary can measure an older build in the same hour as today's (issue 25's before/after
/// table is "same machine and hour"); when set, it is the only candidate.
pub fn release_dir() -> Result<PathBuf, String> {
    let mut candidates = Vec::new();
    if let Some(dir) = std::env::var_os("KEEL_BENCH_RELEASE_DIR") {
        let dir = PathBuf::from(dir);
        return if dir.join("keel").is_file() {
            Ok(dir)
        } else {
            Err(format!(
                "KEEL_BENCH_RELEASE_DIR={}: no `keel` binary there",
                dir.display()
            ))
        };
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent()?.parent().map(Path::to_path_buf))
    {
        candidates.push(dir);
    }
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        candidates.push(PathBuf::from(dir).join("release"));
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    candidates.push(workspace.join("target").join("release"));
    candidates
        .iter()
        .find(|d| d.join("keel").is_file())
        .cloned()
        .ok_or_else(|| {
            format!(
                "the release `keel` binary is missing (looked in {}): run `cargo xtask bench`",
                candidates
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

/// Writes a bench's results as `<target>/bench/NAME.json` (next to the release directory
/// `release`), pretty-printed, and says where on stderr.
///
/// # Errors
/// The directory or the file cannot be written.
pub fn write_results(release: &Path, name: &str, json: &Value) -> Result<PathBuf, String> {
    let out_dir = release
        .parent()
        .map(|t| t.join("bench"))
        .unwrap_or_else(|| PathBuf::from("bench"));
    std::fs::create_dir_all(&out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let path = out_dir.join(format!("{name}.json"));
    std::fs::write(&path, format!("{json:#}\n")).map_err(|e| format!("{}: {e}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(path)
}

/// The markdown rows `| what | median | p90 | min | runs |` of summaries given as JSON
/// (`summary_json` / `stats` shapes: `median`, `p90`, `min`, `n`), under their header.
pub fn stats_table(rows: &[(&str, &Value)]) -> String {
    use std::fmt::Write as _;
    let ms = |v: &Value, k: &str| v[k].as_f64().unwrap_or_default();
    let mut out = String::from("| measure | median | p90 | min | runs |\n|---|---|---|---|---|\n");
    for (what, v) in rows {
        let _ = writeln!(
            out,
            "| {what} | {:.2} ms | {:.2} ms | {:.2} ms | {} |",
            ms(v, "median"),
            ms(v, "p90"),
            ms(v, "min"),
            v["n"]
        );
    }
    out
}
