//! Which rows are idle (issue 25 item 3): rows whose plugin's manifest says, in data
//! ([`IdleWhen`](keel_plugin_api::sdk::IdleWhen)), that their config gives them no work. An idle
//! row is checked like any other — its config against its schema, its requirements and
//! provisions in the facility graph, its guarded keys for project trust — but its library is
//! not opened and it is not activated before the first request; the runtime opens and
//! activates it when a reload gives it work or a service it provides is asked for.
//!
//! A row never stays idle when starting without it could change what the rows that do start
//! see: when a row that starts requires (even optionally) a facility it provides, or when it
//! declares an event no row that starts declares (the bus takes an event's canonical layouts
//! from the libraries of the rows that declare it, and an idle library is not open). That is
//! decided to a fixed point, so a row kept for another idle row that was kept is kept too.

use std::collections::BTreeSet;
use std::path::Path;

use keel_config::Row;
use keel_plugin_api::sdk::Manifest;

/// The ids of `rows` that are idle when keel starts in `dir`; `manifest_of` gives a plugin's
/// manifest.
pub fn idle_rows<'m>(
    rows: &[Row],
    manifest_of: impl Fn(&str) -> Option<&'m Manifest>,
    dir: Option<&Path>,
) -> BTreeSet<String> {
    let Some(dir) = dir else {
        return BTreeSet::new();
    };
    let manifest = |row: &Row| manifest_of(&row.plugin);
    let mut idle: BTreeSet<&str> = rows
        .iter()
        .filter(|r| {
            manifest(r)
                .and_then(|m| m.idle_when.as_ref())
                .is_some_and(|when| when.holds(&r.config, dir))
        })
        .map(|r| r.id.as_str())
        .collect();
    loop {
        let starting: Vec<&Row> = rows
            .iter()
            .filter(|r| !idle.contains(r.id.as_str()))
            .collect();
        let needed = |candidate: &Row| {
            let Some(m) = manifest(candidate) else {
                return true;
            };
            let provided = starting.iter().filter_map(|r| manifest(r)).any(|s| {
                s.requires
                    .iter()
                    .any(|req| m.provides.iter().any(|p| p.name == req.name))
            });
            let declares_alone = m.events.iter().any(|e| {
                !starting
                    .iter()
                    .filter_map(|r| manifest(r))
                    .any(|s| s.events.iter().any(|d| d.name == e.name))
            });
            provided || declares_alone
        };
        let kept: Vec<&str> = rows
            .iter()
            .filter(|r| idle.contains(r.id.as_str()) && needed(r))
            .map(|r| r.id.as_str())
            .collect();
        if kept.is_empty() {
            break;
        }
        for id in kept {
            idle.remove(id);
        }
    }
    idle.into_iter().map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::idle_rows;
    use keel_config::{LayerKind, LayerRef, Row, RowProvenance};
    use keel_plugin_api::sdk::Manifest;
    use serde_json::json;

    fn row(id: &str, plugin: &str, config: serde_json::Value) -> Row {
        Row {
            id: id.to_owned(),
            plugin: plugin.to_owned(),
            config,
            provenance: RowProvenance {
                inserted_by: LayerRef::new(LayerKind::Profile("t".into()), "test"),
                replaced_by: Vec::new(),
                overridden_by: Vec::new(),
                previously_disabled_by: None,
                keys: Vec::new(),
            },
        }
    }

    fn idle(rows: &[Row], manifests: &[Manifest]) -> Vec<String> {
        let dir = tempfile::tempdir().expect("tempdir");
        let of = |p: &str| manifests.iter().find(|m| m.id == p);
        idle_rows(rows, of, Some(dir.path())).into_iter().collect()
    }

    // issue 25 item 3: a row is idle when its config gives it no work, and never when a
    // starting row needs what it provides — required or optional, directly or through another
    // idle row that is kept.
    #[test]
    fn a_row_a_starting_row_needs_is_never_idle() {
        let lazy = Manifest::new("lazy", "1")
            .provides_named("x.lazy", true)
            .idle_when_empty(&["work"]);
        let lazier = Manifest::new("lazier", "1")
            .provides_named("x.lazier", true)
            .requires_named("x.lazy", false)
            .idle_when_empty(&["work"]);
        let eager = Manifest::new("eager", "1");
        let needs_lazier = Manifest::new("needs", "1").requires_named("x.lazier", true);
        let rows = [row("a", "lazy", json!({})), row("b", "eager", json!({}))];
        assert_eq!(idle(&rows, &[lazy.clone(), eager.clone()]), ["a"]);
        let busy = [
            row("a", "lazy", json!({"work": [1]})),
            row("b", "eager", json!({})),
        ];
        assert!(idle(&busy, &[lazy.clone(), eager]).is_empty());
        // `needs` starts and optionally needs `lazier`, which needs `lazy`: none is idle.
        let chain = [
            row("a", "lazy", json!({})),
            row("b", "lazier", json!({})),
            row("c", "needs", json!({})),
        ];
        let all = [lazy.clone(), lazier.clone(), needs_lazier];
        assert!(idle(&chain, &all).is_empty(), "{:?}", idle(&chain, &all));
        // Without `needs`, both are idle (an idle row may need another idle row).
        let both = [row("a", "lazy", json!({})), row("b", "lazier", json!({}))];
        assert_eq!(idle(&both, &[lazy, lazier]), ["a", "b"]);
    }

    // A row that declares an event no starting row declares stays: the bus takes an event's
    // layouts from the declaring libraries, and an idle one is not open.
    #[test]
    fn a_row_declaring_an_event_alone_is_never_idle() {
        let mut lazy = Manifest::new("lazy", "1").idle_when_empty(&["work"]);
        lazy.events.push(keel_plugin_api::sdk::EventDecl {
            name: "x/seen".into(),
            mode: "emit".into(),
        });
        let mut owner = Manifest::new("owner", "1");
        owner.events = lazy.events.clone();
        let alone = [row("a", "lazy", json!({}))];
        assert!(idle(&alone, std::slice::from_ref(&lazy)).is_empty());
        let shared = [row("a", "lazy", json!({})), row("b", "owner", json!({}))];
        assert_eq!(idle(&shared, &[lazy, owner]), ["a"]);
    }
}
