//! The decisions rule of `cargo xtask tidy` (issue 24 item 2): no plugin reads a decision by
//! its JSON tag.
//!
//! Every waterfall's decision is a typed value (`events::Typed<T>`, read with `.get()` into a
//! serde enum and matched on variants), so a misspelled variant does not compile. What the
//! compiler cannot see is a plugin that goes back to the JSON and compares
//! `decision.get("kind")` with a string: a typo there compiles and is silently false. This
//! rule fails on `.get("kind")` in the non-test sources of `plugins/` and `tests/plugins/`.
//!
//! Exempt: test code (`*_tests.rs`, `#[cfg(test)]` items) and [`EXEMPT`], the benchmark
//! plugin whose JSON hop is the baseline the typed hop is measured against.

/// Folders of plugin sources the rule reads.
const DECISION_ROOTS: &[&str] = &["plugins/", "tests/plugins/"];

/// Paths read on purpose as JSON: the bench's baseline of the untyped hop.
const EXEMPT: &[&str] = &["tests/plugins/bench-api/"];

/// The read the rule refuses.
const KIND_READ: &str = ".get(\"kind\")";

/// `(path:line, message)` for each `.get("kind")` in the non-test lines of the file `rel`.
pub fn problems(rel: &str, text: &str) -> Vec<(String, String)> {
    let file = rel.rsplit('/').next().unwrap_or("");
    if !DECISION_ROOTS.iter().any(|r| rel.starts_with(r))
        || EXEMPT.iter().any(|e| rel.starts_with(e))
        || file.ends_with("_tests.rs")
    {
        return Vec::new();
    }
    crate::tidy_codes::non_test(text)
        .into_iter()
        .filter(|(_, line)| {
            let code = line.split("//").next().unwrap_or("");
            code.contains(KIND_READ)
        })
        .map(|(n, _)| {
            (
                format!("{rel}:{n}"),
                "reads a decision with `.get(\"kind\")`: decode the event's `Typed<T>` with \
                 `.get()` and match on the enum's variants (issue 24 item 2)"
                    .to_owned(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const READ: &str =
        "//! x\nfn f(d: &Value) -> bool {\n    d.get(\"kind\") == Some(&json!(\"deny\"))\n}\n";

    #[test]
    fn a_kind_read_in_a_plugin_fails_with_its_line() {
        let found = problems("plugins/sandbox/src/escalation.rs", READ);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, "plugins/sandbox/src/escalation.rs:3");
        assert!(found[0].1.contains("Typed"), "{}", found[0].1);
        assert_eq!(problems("tests/plugins/proof-x/src/lib.rs", READ).len(), 1);
    }

    #[test]
    fn tests_comments_the_bench_baseline_and_other_folders_pass() {
        assert!(problems("plugins/tools/src/stages_tests.rs", READ).is_empty());
        assert!(problems("tests/plugins/bench-api/src/lib.rs", READ).is_empty());
        assert!(problems("kernel/src/bus/mod.rs", READ).is_empty());
        let in_test = "//! x\n#[cfg(test)]\nmod tests {\n    fn f() { d.get(\"kind\"); }\n}\n";
        assert!(problems("plugins/a/src/lib.rs", in_test).is_empty());
        let comment = "//! x\n// never `d.get(\"kind\")`\nfn f() {}\n";
        assert!(problems("plugins/a/src/lib.rs", comment).is_empty());
    }
}
