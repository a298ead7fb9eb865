//! Kernel benchmarks (ARCHITECTURE §12): event dispatch across the ABI against the same chain
//! in-process, and kernel boot-to-ready. Run with `cargo xtask bench [--quick]`.
//!
//! This harness builds nothing: `cargo xtask bench` builds the release workspace first, and the
//! harness drives the release `keel` binary with the release plugin libraries beside it (found
//! from this executable's own location, so `CARGO_TARGET_DIR` is honoured).
//!
//! 1. **Dispatch.** Two runs of `keel run` with a profile of two rows — `bench-driver` (the
//!    driver) and one `bench-listener` row with `count = 1`, then `count = 10` (so the
//!    10-listener chain is one row of one library). The driver times six modes (the four
//!    dispatch modes and the two decision waterfalls of issue 24 item 2) across the ABI and
//!    in-process and prints one JSON line per case (see `tests/plugins/bench-driver`).
//! 2. **Boot-to-ready.** A profile of 12 rows over every benchmark and proof plugin library
//!    present, started N times with `KEEL_LOG=keel::kernel=info`; the kernel's own
//!    `kernel ready … boot_us=M` line gives boot-to-ready, from exec (issue 25 item 1: exec,
//!    profile resolution, digests, dlopen and layout checks, manifests, schema validation,
//!    activation), and the harness also times the
//!    whole process (exec to exit, including shutdown). A one-row profile gives the floor.
//!
//! Prints tables and writes `target/bench/kernel.json`. Options: `--quick` (fewer iterations and
//! runs, for a smoke check). Under `cargo test --benches` (no `--bench` flag) it does nothing.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use keel_tests::bench::{Summary, machine, release_dir, summarize};
use keel_tests::plugin_file;
use serde_json::{Value, json};

/// Plugin libraries the benchmark cannot run without.
const REQUIRED: [&str; 2] = ["bench-driver", "bench-listener"];
/// Further libraries the boot profile uses when they were built.
const OPTIONAL: [&str; 4] = [
    "proof-listener",
    "proof-provider",
    "proof-consumer",
    "proof-graph",
];
/// Rows in the boot profile.
const BOOT_ROWS: usize = 12;

type Failure = String;

struct Settings {
    quick: bool,
    events: u64,
    reps: usize,
    boot_runs: usize,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--bench") {
        println!("kernel benchmarks: nothing to do outside `cargo bench`; run `cargo xtask bench`");
        return ExitCode::SUCCESS;
    }
    let mut quick = false;
    for arg in &args {
        match arg.as_str() {
            "--bench" => {}
            "--quick" => quick = true,
            other => {
                eprintln!("kernel bench: unknown argument `{other}` (only `--quick`)");
                return ExitCode::from(2);
            }
        }
    }
    let settings = if quick {
        Settings {
            quick,
            events: 100_000,
            reps: 3,
            boot_runs: 5,
        }
    } else {
        Settings {
            quick,
            events: 1_000_000,
            reps: 7,
            boot_runs: 30,
        }
    };
    match run(&settings) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kernel bench: {e}");
            ExitCode::FAILURE
        }
    }
}

// ---- locating the build ----------------------------------------------------------------------

// ---- running keel ----------------------------------------------------------------------------

struct Sandbox {
    dir: tempfile::TempDir,
    keel: PathBuf,
}

struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
    wall: Duration,
}

impl Sandbox {
    fn new(keel: PathBuf) -> Result<Sandbox, Failure> {
        let dir = tempfile::Builder::new()
            .prefix("keel-bench-")
            .tempdir()
            .map_err(|e| format!("cannot create a temp dir: {e}"))?;
        for sub in ["home", "config", "work"] {
            std::fs::create_dir_all(dir.path().join(sub))
                .map_err(|e| format!("cannot create {sub}: {e}"))?;
        }
        Ok(Sandbox { dir, keel })
    }

    fn profile(&self, name: &str, toml: &str) -> Result<PathBuf, Failure> {
        let path = self.dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, toml).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(path)
    }

    fn run(&self, profile: &Path, prompt: &str, log: Option<&str>) -> Result<Outcome, Failure> {
        let mut cmd = Command::new(&self.keel);
        cmd.arg("run")
            .arg("--profile")
            .arg(profile)
            .arg(prompt)
            .current_dir(self.dir.path().join("work"))
            .env_remove("KEEL_PLUGIN_PATH")
            .env_remove("KEEL_LOG")
            .env_remove("KEEL_PROOF_TRACE")
            .env("KEEL_HOME", self.dir.path().join("home"))
            .env("KEEL_CONFIG_PATH", self.dir.path().join("config"))
            .stdin(Stdio::null());
        if let Some(filter) = log {
            cmd.env("KEEL_LOG", filter);
        }
        let started = Instant::now();
        let out = cmd
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.keel.display()))?;
        let wall = started.elapsed();
        let outcome = Outcome {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            wall,
        };
        if outcome.code != 0 {
            return Err(format!(
                "`keel run --profile {} {prompt:?}` exited {}\n--- stdout\n{}\n--- stderr\n{}",
                profile.display(),
                outcome.code,
                outcome.stdout,
                outcome.stderr
            ));
        }
        Ok(outcome)
    }
}

// ---- statistics ------------------------------------------------------------------------------

fn summary_json(s: Summary) -> Value {
    json!({"median": round(s.median), "p90": round(s.p90), "min": round(s.min), "max": round(s.max)})
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

// ---- 1. dispatch -----------------------------------------------------------------------------

fn dispatch_profile(listeners: usize) -> String {
    format!(
        "description = \"dispatch benchmark, {listeners} listener(s) in one row\"\n\n\
         [[insert]]\nid = \"driver\"\nplugin = \"bench-driver\"\n\n\
         [[insert]]\nid = \"listeners\"\nplugin = \"bench-listener\"\nconfig = {{ count = {listeners} }}\n"
    )
}

fn dispatch(sandbox: &Sandbox, settings: &Settings) -> Result<Vec<Value>, Failure> {
    let mut cases = Vec::new();
    for listeners in [1usize, 10] {
        let profile = sandbox.profile(
            &format!("dispatch-{listeners}"),
            &dispatch_profile(listeners),
        )?;
        let prompt = format!("dispatch:{}:{listeners}:{}", settings.events, settings.reps);
        eprintln!("dispatch: {listeners} listener(s), {prompt} …");
        let out = sandbox.run(&profile, &prompt, None)?;
        for line in out.stdout.lines().filter(|l| l.starts_with('{')) {
            let case: Value = serde_json::from_str(line)
                .map_err(|e| format!("bad JSON line from bench-driver {line:?}: {e}"))?;
            if let Some(e) = case.get("error") {
                return Err(format!("bench-driver failed: {e}"));
            }
            cases.push(case);
        }
    }
    if cases.len() != 12 {
        return Err(format!(
            "expected 12 dispatch cases (6 modes × 1 and 10 listeners), got {}",
            cases.len()
        ));
    }
    Ok(cases)
}

fn num(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

fn find<'a>(cases: &'a [Value], case: &str, listeners: u64) -> Option<&'a Value> {
    cases
        .iter()
        .find(|c| c["case"] == case && c["listeners"].as_u64() == Some(listeners))
}

/// Per mode: the marginal cost of one more listener, `(ns(10) - ns(1)) / 9`, on both paths.
fn marginal(cases: &[Value]) -> Vec<Value> {
    [
        "sync-waterfall",
        "async-waterfall",
        "emit",
        "parallel",
        "decision-json",
        "decision-typed",
    ]
    .iter()
    .filter_map(|&case| {
        let one = find(cases, case, 1)?;
        let ten = find(cases, case, 10)?;
        let abi = (num(ten, "abi_ns_per_event") - num(one, "abi_ns_per_event")) / 9.0;
        let inproc = (num(ten, "inproc_ns_per_event") - num(one, "inproc_ns_per_event")) / 9.0;
        Some(json!({
            "case": case,
            "abi_ns_per_hop": round(abi),
            "inproc_ns_per_hop": round(inproc),
            "ratio": round(abi / inproc),
            "abi_fixed_ns": round(num(one, "abi_ns_per_event") - abi),
            "inproc_fixed_ns": round(num(one, "inproc_ns_per_event") - inproc),
        }))
    })
    .collect()
}

fn dispatch_table(cases: &[Value], marginal: &[Value]) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "\n## Dispatch: across the ABI vs in-process (median ns; [min–max] over repetitions)\n"
    );
    let _ = writeln!(
        t,
        "| case | listeners | ABI ns/event | in-process ns/event | ABI ns/hop | in-process ns/hop | ratio |"
    );
    let _ = writeln!(t, "|---|---:|---:|---:|---:|---:|---:|");
    for c in cases {
        let _ = writeln!(
            t,
            "| {} | {} | {:.1} [{:.1}–{:.1}] | {:.1} [{:.1}–{:.1}] | {:.1} | {:.1} | {:.2}× |",
            c["case"].as_str().unwrap_or("?"),
            c["listeners"],
            num(c, "abi_ns_per_event"),
            num(c, "abi_min"),
            num(c, "abi_max"),
            num(c, "inproc_ns_per_event"),
            num(c, "inproc_min"),
            num(c, "inproc_max"),
            num(c, "abi_ns_per_hop"),
            num(c, "inproc_ns_per_hop"),
            num(c, "abi_ns_per_event") / num(c, "inproc_ns_per_event"),
        );
    }
    let _ = writeln!(
        t,
        "\nMarginal cost of one more listener, (ns(10) − ns(1)) / 9, and the fixed cost per event:\n"
    );
    let _ = writeln!(
        t,
        "| case | ABI ns/hop | in-process ns/hop | ratio | ABI fixed ns | in-process fixed ns |"
    );
    let _ = writeln!(t, "|---|---:|---:|---:|---:|---:|");
    for m in marginal {
        let _ = writeln!(
            t,
            "| {} | {:.1} | {:.1} | {:.2}× | {:.1} | {:.1} |",
            m["case"].as_str().unwrap_or("?"),
            num(m, "abi_ns_per_hop"),
            num(m, "inproc_ns_per_hop"),
            num(m, "ratio"),
            num(m, "abi_fixed_ns"),
            num(m, "inproc_fixed_ns"),
        );
    }
    t
}

// ---- 2. boot-to-ready ------------------------------------------------------------------------

/// The boot profile: the driver plus rows over every available library, padded with
/// `bench-listener` rows to [`BOOT_ROWS`]. Returns the TOML and the libraries used.
fn boot_profile(available: &[&str]) -> (String, Vec<String>) {
    let has = |p: &str| available.contains(&p);
    let mut rows: Vec<(String, &str, Option<String>)> =
        vec![("driver".into(), "bench-driver", None)];
    for (i, count) in [10, 10, 1].iter().enumerate() {
        rows.push((
            format!("listeners-{i}"),
            "bench-listener",
            Some(format!("{{ count = {count} }}")),
        ));
    }
    if has("proof-listener") {
        for i in 0..2 {
            rows.push((
                format!("proof-listener-{i}"),
                "proof-listener",
                Some(format!(
                    "{{ listeners = [{{ event = \"proof/emit\", tag = \"e{i}\" }}, \
                     {{ event = \"proof/waterfall\", tag = \"w{i}\" }}], effects = [\"fx{i}\"] }}"
                )),
            ));
        }
    }
    if has("proof-provider") {
        rows.push(("counter".into(), "proof-provider", None));
        if has("proof-consumer") {
            for i in 0..3 {
                rows.push((format!("consumer-{i}"), "proof-consumer", None));
            }
        }
    }
    if has("proof-graph") {
        rows.push(("ring".into(), "proof-graph", None));
    }
    let mut pad = 0;
    while rows.len() < BOOT_ROWS {
        rows.push((
            format!("listeners-pad-{pad}"),
            "bench-listener",
            Some("{ count = 1 }".into()),
        ));
        pad += 1;
    }
    let mut toml = format!(
        "description = \"boot-to-ready benchmark, {} rows\"\n",
        rows.len()
    );
    let mut libs: Vec<String> = Vec::new();
    for (id, plugin, config) in &rows {
        let _ = write!(toml, "\n[[insert]]\nid = \"{id}\"\nplugin = \"{plugin}\"\n");
        if let Some(c) = config {
            let _ = writeln!(toml, "config = {c}");
        }
        if !libs.iter().any(|l| l == plugin) {
            libs.push((*plugin).to_owned());
        }
    }
    (toml, libs)
}

/// `boot_us=N` from the kernel's `kernel ready` line.
fn boot_us(stderr: &str) -> Option<(u64, u64)> {
    let line = stderr.lines().find(|l| l.contains("kernel ready"))?;
    let field = |key: &str| -> Option<u64> {
        let rest = &line[line.find(key)? + key.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    Some((field("rows=")?, field("boot_us=")?))
}

struct Boot {
    rows: u64,
    boot_ms: Summary,
    wall_ms: Summary,
}

fn boot(sandbox: &Sandbox, profile: &Path, runs: usize) -> Result<Boot, Failure> {
    let filter = Some("keel::kernel=info");
    // Warm the page cache and the dynamic loader's caches; not counted.
    for _ in 0..2 {
        sandbox.run(profile, "ready", filter)?;
    }
    let mut boots = Vec::with_capacity(runs);
    let mut walls = Vec::with_capacity(runs);
    let mut rows = 0;
    for _ in 0..runs {
        let out = sandbox.run(profile, "ready", filter)?;
        let (r, us) = boot_us(&out.stderr).ok_or_else(|| {
            format!(
                "no `kernel ready … boot_us=` line on stderr (KEEL_LOG=keel::kernel=info):\n{}",
                out.stderr
            )
        })?;
        rows = r;
        boots.push(us as f64 / 1000.0);
        walls.push(out.wall.as_secs_f64() * 1000.0);
    }
    Ok(Boot {
        rows,
        boot_ms: summarize(boots),
        wall_ms: summarize(walls),
    })
}

fn boot_table(rows: &[(&str, &Boot)]) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "\n## Boot-to-ready (ms)\n");
    let _ = writeln!(
        t,
        "| profile | rows | boot-to-ready median | p90 | min | max | process wall median | p90 | min |"
    );
    let _ = writeln!(t, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (name, b) in rows {
        let _ = writeln!(
            t,
            "| {name} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            b.rows,
            b.boot_ms.median,
            b.boot_ms.p90,
            b.boot_ms.min,
            b.boot_ms.max,
            b.wall_ms.median,
            b.wall_ms.p90,
            b.wall_ms.min,
        );
    }
    t
}

fn boot_json(b: &Boot) -> Value {
    json!({"rows": b.rows, "boot_to_ready_ms": summary_json(b.boot_ms), "process_wall_ms": summary_json(b.wall_ms)})
}

// ---- the whole run ---------------------------------------------------------------------------

fn run(settings: &Settings) -> Result<(), Failure> {
    let release = release_dir()?;
    let missing: Vec<String> = REQUIRED
        .iter()
        .map(|p| release.join(plugin_file(p)))
        .filter(|p| !p.is_file())
        .map(|p| p.display().to_string())
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "plugin libraries missing: {}: run `cargo xtask bench` (it builds the release workspace)",
            missing.join(", ")
        ));
    }
    let available: Vec<&str> = REQUIRED
        .iter()
        .chain(OPTIONAL.iter())
        .copied()
        .filter(|p| release.join(plugin_file(p)).is_file())
        .collect();
    let sandbox = Sandbox::new(release.join("keel"))?;
    eprintln!(
        "kernel bench: {} ({}), binary {}",
        if settings.quick { "quick" } else { "full" },
        format_args!(
            "{} events per sync case, {} reps",
            settings.events, settings.reps
        ),
        sandbox.keel.display()
    );

    let cases = dispatch(&sandbox, settings)?;
    let marginal = marginal(&cases);

    let (toml, libs) = boot_profile(&available);
    let boot_path = sandbox.profile("boot", &toml)?;
    eprintln!(
        "boot: {} runs of a {BOOT_ROWS}-row profile over {} …",
        settings.boot_runs,
        libs.join(", ")
    );
    let full = boot(&sandbox, &boot_path, settings.boot_runs)?;
    let floor_path = sandbox.profile(
        "boot-1",
        "description = \"one row\"\n\n[[insert]]\nid = \"driver\"\nplugin = \"bench-driver\"\n",
    )?;
    let floor = boot(&sandbox, &floor_path, settings.boot_runs)?;

    let mut report = dispatch_table(&cases, &marginal);
    let sync10 = find(&cases, "sync-waterfall", 10);
    let sync_marginal = marginal.iter().find(|m| m["case"] == "sync-waterfall");
    let _ = writeln!(report, "\n## Targets\n");
    if let (Some(s), Some(m)) = (sync10, sync_marginal) {
        let ratio = num(s, "abi_ns_per_hop") / num(s, "inproc_ns_per_hop");
        let _ = writeln!(
            report,
            "- typed sync waterfall hop across the ABI ≤ 3× in-process: {:.2}× per hop at 10 listeners \
             ({:.1} vs {:.1} ns), {:.2}× marginal ({:.1} vs {:.1} ns)",
            ratio,
            num(s, "abi_ns_per_hop"),
            num(s, "inproc_ns_per_hop"),
            num(m, "ratio"),
            num(m, "abi_ns_per_hop"),
            num(m, "inproc_ns_per_hop"),
        );
    }
    let _ = writeln!(
        report,
        "- boot-to-ready ≤ 50 ms for ≥ 10 plugin rows: median {:.2} ms, p90 {:.2} ms ({} rows)",
        full.boot_ms.median, full.boot_ms.p90, full.rows
    );
    report.push_str(&boot_table(&[
        (
            &format!("{BOOT_ROWS} rows, {} libraries", libs.len()),
            &full,
        ),
        ("1 row (driver only)", &floor),
    ]));
    let _ = writeln!(report, "\nBoot profile libraries: {}", libs.join(", "));
    println!("{report}");

    let out_dir = release
        .parent()
        .map(|t| t.join("bench"))
        .unwrap_or_else(|| PathBuf::from("bench"));
    std::fs::create_dir_all(&out_dir)
        .map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
    let out = out_dir.join("kernel.json");
    let doc = json!({
        "quick": settings.quick,
        "machine": machine(),
        "dispatch": {
            "events_per_sync_case": settings.events,
            "events_per_async_case": (settings.events / 10).max(1_000),
            "reps": settings.reps,
            "cases": cases,
            "marginal": marginal,
        },
        "boot": {
            "runs": settings.boot_runs,
            "libraries": libs,
            "profile": toml,
            "full": boot_json(&full),
            "one_row": boot_json(&floor),
        },
    });
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    std::fs::write(&out, text + "\n")
        .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    println!("wrote {}", out.display());
    Ok(())
}
