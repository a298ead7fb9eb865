//! Helpers shared by the suites that run `proof-driver` scripts: profile writing and reading
//! the driver's JSON outcome lines and the proof trace.

use keel_tests::{Env, Run};
use serde_json::{Value, json};

/// The proof listener plugin, the one most rows use.
pub const LISTENER: &str = "proof-listener";

/// Writes profile `p`: an optional `[kernel]` table body, the driver row, then one row per
/// `(id, plugin, config)`, where `config` is the body of the row's `[insert.config]` table.
pub fn profile(env: &Env, kernel: &str, rows: &[(&str, &str, &str)]) {
    let mut toml = String::new();
    if !kernel.is_empty() {
        toml.push_str(&format!("[kernel]\n{kernel}\n\n"));
    }
    toml.push_str("[[insert]]\nid = \"driver\"\nplugin = \"proof-driver\"\n");
    for (id, plugin, config) in rows {
        toml.push_str(&format!(
            "\n[[insert]]\nid = \"{id}\"\nplugin = \"{plugin}\"\n"
        ));
        if !config.is_empty() {
            toml.push_str(&format!("[insert.config]\n{config}\n"));
        }
    }
    env.profile("p", &toml);
}

/// The value of a step that must have succeeded.
pub fn ok(run: &Run, step: &str) -> Value {
    let s = run.step(step);
    assert_eq!(
        s["ok"], true,
        "step {step} failed: {s}\nstderr:\n{}",
        run.stderr
    );
    s["value"].clone()
}

/// The `(code, message)` of a step that must have failed.
pub fn failed(run: &Run, step: &str) -> (String, String) {
    let s = run.step(step);
    assert_eq!(s["ok"], false, "step {step} should have failed: {s}");
    (
        s["code"].as_str().unwrap_or_default().to_owned(),
        s["message"].as_str().unwrap_or_default().to_owned(),
    )
}

/// One row of the `status` printed by the `index`-th step of the script.
pub fn row_status(run: &Run, index: usize, row: &str) -> Value {
    let steps = run.steps();
    assert_eq!(steps[index]["step"], "status", "step {index} is not status");
    steps[index]["value"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["row"] == row))
        .cloned()
        .unwrap_or_else(|| panic!("no row {row} in {}", steps[index]))
}

/// The trace lines starting with `prefix`, in order.
pub fn only(trace: &[String], prefix: &str) -> Vec<String> {
    trace
        .iter()
        .filter(|l| l.starts_with(prefix))
        .cloned()
        .collect()
}

/// Every index of `line` in the trace.
pub fn positions(trace: &[String], line: &str) -> Vec<usize> {
    trace
        .iter()
        .enumerate()
        .filter(|(_, l)| *l == line)
        .map(|(i, _)| i)
        .collect()
}

/// A `proof/waterfall` or `proof/async-waterfall` result as the driver prints it.
pub fn chain(value: i64, log: &[&str]) -> Value {
    json!({ "value": value, "log": log })
}
