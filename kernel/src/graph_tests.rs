//! Unit tests for the facility graph (KRN-01, KRN-03, KRN-07).

use keel_plugin_api::sdk::Manifest;

use super::*;

fn m(id: &str, provides: &[&str], requires: &[&str]) -> Manifest {
    let mut m = Manifest::new(id, "0.1.0");
    for p in provides {
        m = m.provides_named(p, true);
    }
    for r in requires {
        m = m.requires_named(r, false);
    }
    m
}

fn rows<'a>(ms: &'a [(&'a str, Manifest)]) -> Vec<GraphRow<'a>> {
    ms.iter()
        .map(|(id, m)| GraphRow {
            id,
            plugin: &m.id,
            manifest: m,
        })
        .collect()
}

#[test]
fn krn03_layers_follow_requirements_not_row_order() {
    let ms = [
        ("c", m("c", &[], &["b"])),
        ("b", m("b", &["b"], &["a"])),
        ("a", m("a", &["a"], &[])),
        ("z", m("z", &[], &[])),
    ];
    let plan = plan(&rows(&ms)).unwrap();
    assert_eq!(plan.layers, vec![vec!["a", "z"], vec!["b"], vec!["c"]]);
    assert_eq!(plan.edges.len(), 2);
}

#[test]
fn krn01_missing_provider_names_the_row() {
    let ms = [("c", m("c", &[], &["nope"]))];
    let err = plan(&rows(&ms)).unwrap_err().to_string();
    assert!(err.contains("row 'c'") && err.contains("'nope'"), "{err}");
}

#[test]
fn duplicate_exclusive_provider_names_both_rows() {
    let ms = [("p1", m("p", &["svc"], &[])), ("p2", m("p", &["svc"], &[]))];
    let err = plan(&rows(&ms)).unwrap_err().to_string();
    assert!(
        err.contains("'p1'") && err.contains("'p2'") && err.contains("'svc'"),
        "{err}"
    );
}

#[test]
fn non_exclusive_facility_allows_several_providers() {
    let a = Manifest::new("a", "0").provides_named("tools", false);
    let b = Manifest::new("b", "0").provides_named("tools", false);
    let ms = [("a", a), ("b", b), ("c", m("c", &[], &["tools"]))];
    let plan = plan(&rows(&ms)).unwrap();
    assert_eq!(plan.layers, vec![vec!["a", "b"], vec!["c"]]);
}

#[test]
fn cycle_names_every_row_on_it() {
    let ms = [("a", m("a", &["x"], &["y"])), ("b", m("b", &["y"], &["x"]))];
    let err = plan(&rows(&ms)).unwrap_err().to_string();
    assert!(
        err.contains("row 'a'") && err.contains("row 'b'") && err.contains("cycle"),
        "{err}"
    );
}

#[test]
fn optional_requirement_without_provider_is_fine_and_orders_when_present() {
    let c = Manifest::new("c", "0").requires_named("opt", true);
    let ms = [("c", c.clone())];
    assert_eq!(plan(&rows(&ms)).unwrap().layers, vec![vec!["c"]]);
    let ms = [("c", c), ("p", m("p", &["opt"], &[]))];
    assert_eq!(plan(&rows(&ms)).unwrap().layers, vec![vec!["p"], vec!["c"]]);
}

#[test]
fn digest_changes_with_an_edge() {
    let ms1 = [("a", m("a", &["x"], &[])), ("b", m("b", &[], &[]))];
    let ms2 = [("a", m("a", &["x"], &[])), ("b", m("b", &[], &["x"]))];
    assert_ne!(
        plan(&rows(&ms1)).unwrap().digest,
        plan(&rows(&ms2)).unwrap().digest
    );
}
