//! The doctor seam (issue 13 item 2): `keel doctor` checks what the kernel owns and asks every
//! row serving `keel.doctor.<plugin>` for the rest, starting those rows and the rows they
//! require, and nothing else. The kernel holds no sandbox knowledge: the runner probes are the
//! sandbox row's own checks.

use keel_tests::{Env, workspace_root};

fn profile(env: &Env, doctor: &str) {
    env.profile(
        "p",
        &format!(
            "[[insert]]\nid = \"drv\"\nplugin = \"proof-driver\"\n\n\
             [[insert]]\nid = \"prov\"\nplugin = \"proof-provider\"\n\n\
             [[insert]]\nid = \"cons\"\nplugin = \"proof-consumer\"\nconfig = {{ doctor = \"{doctor}\" }}\n\n\
             [[insert]]\nid = \"l\"\nplugin = \"proof-listener\"\n"
        ),
    );
}

// Issue 13 item 2: a row's check is printed as `<row>: <check>` with its status; a failing one
// makes doctor exit 1. The row was started with the provider it requires (its check called it),
// and a row serving no check (the listener) never activated.
#[test]
fn doctor_prints_the_checks_rows_serve_and_starts_only_those_rows_and_their_providers() {
    let env = Env::new();
    profile(&env, "fail");
    let run = env.keel(&["doctor", "--profile", "p"]);
    run.expect_code(1);
    assert!(
        run.stdout
            .lines()
            .any(|l| l == "FAIL  cons: counter: answered by row prov"),
        "{}",
        run.stdout
    );
    let trace = env.trace();
    assert!(
        trace.iter().any(|l| l == "activate cons provider=prov"),
        "{trace:?}"
    );
    assert!(
        trace.iter().any(|l| l == "doctor cons provider=prov"),
        "{trace:?}"
    );
    assert!(!trace.iter().any(|l| l == "activate l"), "{trace:?}");
    // Shut down after the checks: the consumer's disposer still reached its provider.
    assert!(
        trace
            .iter()
            .any(|l| l == "dispose cons service-ok provider=prov"),
        "{trace:?}"
    );

    env.clear_trace();
    profile(&env, "warn");
    let run = env.keel(&["doctor", "--profile", "p"]);
    run.expect_code(0);
    assert!(
        run.stdout
            .lines()
            .any(|l| l == "warn  cons: counter: answered by row prov"),
        "{}",
        run.stdout
    );
}

// Issue 13 item 2: without a sandbox row, doctor says nothing about sandboxes (the kernel knows
// no `keel.sandbox`, no bubblewrap, no Landlock); the kernel's own lines are unchanged.
#[test]
fn without_a_sandbox_row_doctor_has_no_sandbox_line() {
    let env = Env::new();
    env.profile(
        "quiet",
        "[[insert]]\nid = \"drv\"\nplugin = \"proof-driver\"\n",
    );
    let run = env.keel(&["doctor", "--profile", "quiet"]);
    run.expect_code(0);
    assert!(
        run.stdout
            .contains("ok    driver: a row provides keel.driver")
    );
    assert!(
        !run.stdout.to_lowercase().contains("sandbox"),
        "{}",
        run.stdout
    );
}

// Issue 13 item 2: "No bubblewrap or Landlock string remains in `kernel/`."
#[test]
fn no_file_under_kernel_names_bubblewrap_or_landlock() {
    fn walk(dir: &std::path::Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, found);
            } else if let Ok(text) = std::fs::read_to_string(&path) {
                let lower = text.to_lowercase();
                if ["bwrap", "bubblewrap", "landlock"]
                    .iter()
                    .any(|w| lower.contains(w))
                {
                    found.push(path.display().to_string());
                }
            }
        }
    }
    let mut found = Vec::new();
    walk(&workspace_root().join("kernel"), &mut found);
    assert_eq!(found, Vec::<String>::new());
}
