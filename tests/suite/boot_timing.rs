//! Issue 25 item 1: `KEEL_LOG=keel::boot=debug` prints where start-up goes, every line on one
//! clock measured from exec (`+MS` after the timestamp), and the `kernel ready` line's
//! `boot_us` counts from exec, so it covers the digests and loading that come before the rows.

use std::time::Duration;

use keel_tests::model_server::{ModelServer, Reply};

use crate::suite::agent_support::*;

const LIMIT: Duration = Duration::from_secs(60);

/// The `+MS` since exec of a tracing-format line.
fn since_exec(line: &str) -> f64 {
    let ms = line
        .split_whitespace()
        .nth(1)
        .and_then(|w| w.strip_prefix('+'))
        .and_then(|w| w.strip_suffix("ms"))
        .unwrap_or_else(|| panic!("no +MS after the timestamp: {line}"));
    ms.parse().unwrap_or_else(|e| panic!("{ms}: {e}"))
}

/// The value of ` key=N` on a line.
fn field(line: &str, key: &str) -> u64 {
    let at = line
        .find(&format!(" {key}="))
        .unwrap_or_else(|| panic!("no {key}= in {line}"));
    line[at + key.len() + 2..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{key}= is not a number in {line}"))
}

#[test]
fn issue25_item1_boot_lines_place_each_phase_and_row_on_one_clock_from_exec() {
    let server = ModelServer::start(vec![Reply::text("ok")]);
    let env = agent_env(&server, "").var("KEEL_LOG", "keel::boot=debug,keel::kernel=info");
    let run = env.keel_within(&["run", "--profile", "t", "hello"], LIMIT);
    run.expect_code(0);
    let boot: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains(" keel::boot: "))
        .collect();
    // The phases, in this order, on a clock that never goes back.
    let phases = [
        "exec → main",
        "profile resolved",
        "libraries digested",
        "rows activated",
        "driver started",
        "llm-openai: first model request",
    ];
    let mut last = 0.0;
    for phase in phases {
        let line = boot
            .iter()
            .find(|l| l.contains(&format!("keel::boot: {phase}")))
            .unwrap_or_else(|| panic!("no `{phase}` line:\n{}", run.stderr));
        let at = since_exec(line);
        assert!(
            at >= last,
            "`{phase}` at {at} ms, before {last} ms:\n{}",
            run.stderr
        );
        last = at;
    }
    // One `row active` line per active row, each with its own activation time.
    let active: Vec<&str> = boot
        .iter()
        .filter(|l| l.contains("row active"))
        .copied()
        .collect();
    for row in [
        "session",
        "session-store",
        "llm",
        "tools",
        "agent-loop",
        "llm-openai",
        "driver",
    ] {
        assert_eq!(
            active
                .iter()
                .filter(|l| l.contains(&format!(" row={row} ")))
                .count(),
            1,
            "row {row}:\n{}",
            run.stderr
        );
    }
    assert!(active.iter().all(|l| l.contains(" took_us=")));
    // `boot_us` is from exec: it includes the assembly, which `activation_us` does not.
    let ready = run
        .stderr
        .lines()
        .find(|l| l.contains("kernel ready"))
        .unwrap_or_else(|| panic!("no kernel ready line:\n{}", run.stderr));
    let assembled = boot
        .iter()
        .find(|l| l.contains("libraries digested"))
        .map(|l| field(l, "at_us"))
        .unwrap_or_default();
    assert!(field(ready, "boot_us") >= assembled, "{ready}");
    assert!(
        field(ready, "boot_us") > field(ready, "activation_us"),
        "{ready}"
    );
}
