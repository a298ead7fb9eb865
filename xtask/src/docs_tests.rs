//! Unit tests for rendering `docs/events.md`: doc-text cleanup, the purpose column, anchors, and
//! the shape of the document for a small catalog.

use super::Row;
use super::anchor;
use super::doc_text;
use super::purpose;
use super::render;

const DOC: &str = " Fiber state changes and faulted plugins. Emitted by the kernel\n after each transition.\n\n Second paragraph.\n";

#[test]
fn doc_text_drops_the_doc_comment_space() {
    assert_eq!(
        doc_text(DOC),
        "Fiber state changes and faulted plugins. Emitted by the kernel\nafter each transition.\n\nSecond paragraph."
    );
}

#[test]
fn purpose_is_the_first_sentence_on_one_line() {
    assert_eq!(purpose(DOC), "Fiber state changes and faulted plugins.");
    assert_eq!(purpose(" No full stop\n here\n"), "No full stop here");
    assert_eq!(purpose(""), "");
}

#[test]
fn anchors_match_github_slugs() {
    assert_eq!(anchor("kernel/plugin-status"), "kernelplugin-status");
    assert_eq!(anchor("agent/inbox/inserted"), "agentinboxinserted");
}

#[test]
fn render_has_table_and_one_section_per_event() {
    let rows = [
        Row {
            name: "kernel/plugin-status",
            mode: "emit",
            payload: "PluginStatusEvent",
            output: "()",
            doc: DOC,
            fields: vec![("row".to_owned(), "RString".to_owned())],
            owner: "keel",
        },
        Row {
            name: "agent/pre-step",
            mode: "async-waterfall",
            payload: "PreStepRequest",
            output: "PreStepOutcome",
            doc: " Admit or reject | the batch.\n",
            fields: Vec::new(),
            owner: "agent-loop",
        },
    ];
    let md = render(&rows);
    assert!(md.starts_with("# keel events\n"));
    assert!(md.contains("do not edit"));
    assert!(md.contains("| event | mode | payload | output | purpose |\n"));
    assert!(md.contains(
        "| [`kernel/plugin-status`](#kernelplugin-status) | emit | `PluginStatusEvent` | `()` | \
         Fiber state changes and faulted plugins. |\n"
    ));
    assert!(md.contains("| Admit or reject \\| the batch. |"));
    assert!(md.contains("### `kernel/plugin-status`\n\n- mode: **emit**\n"));
    // Issue 13 item 2: each domain names who declares it.
    assert!(md.contains("## `kernel/*`\n\nDeclared by the kernel.\n"));
    assert!(md.contains("## `agent/*`\n\nDeclared by the `agent-loop` plugin.\n"));
    assert!(md.contains("after each transition.\n\nSecond paragraph.\n"));
    assert!(md.contains("| `agent/prompt-submit` | [`agent/pre-step`](#agentpre-step) |"));
    assert!(!md.contains("agent/turn-continuation"));
    assert!(md.ends_with("Admit or reject | the batch.\n"));
    for mode in ["emit", "waterfall", "async-waterfall", "parallel", "serial"] {
        assert!(
            md.contains(&format!("- **{mode}** — ")),
            "mode {mode} explained"
        );
    }
}

#[test]
fn render_is_deterministic_and_handles_an_empty_catalog() {
    let md = render(&[]);
    assert_eq!(md, render(&[]));
    assert!(md.contains("No events are declared yet."));
    assert!(md.ends_with(".\n") && !md.ends_with("\n\n"));
}
