//! The facility graph: who provides what, who requires what, and the activation layers.
//!
//! Computed from manifests at every start (KRN-02 adapted to dynamic plugins: the graph is
//! derived, never hand-ordered, and `keel.lock` pins its digest). Missing providers, duplicate
//! exclusive providers and cycles are assembly errors that name the rows (KRN-01, KRN-07).
//! Layers come from Kahn's algorithm; rows in one layer have no edges between them and are
//! activated concurrently (KRN-03).

use std::collections::{BTreeMap, BTreeSet};

use keel_plugin_api::sdk::Manifest;
use serde::Serialize;

use crate::error::{KernelError, Result};

/// One row as the graph sees it.
#[derive(Debug, Clone)]
pub struct GraphRow<'a> {
    /// Row id.
    pub id: &'a str,
    /// Plugin name.
    pub plugin: &'a str,
    /// The plugin's manifest.
    pub manifest: &'a Manifest,
}

/// A dependency edge: `consumer` requires `facility` from `provider`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Edge {
    /// Requiring row.
    pub consumer: String,
    /// Providing row.
    pub provider: String,
    /// Facility name.
    pub facility: String,
    /// Whether the requirement is optional.
    pub optional: bool,
}

impl std::fmt::Display for Edge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let opt = if self.optional { ", optional" } else { "" };
        write!(
            f,
            "{} -> {} ({}{opt})",
            self.consumer, self.provider, self.facility
        )
    }
}

/// The computed assembly.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// Row ids per layer, in activation order.
    pub layers: Vec<Vec<String>>,
    /// All edges, sorted.
    pub edges: Vec<Edge>,
    /// `blake3:<hex>` over rows (id, plugin) and edges.
    pub digest: String,
}

impl Plan {
    /// The layer index of a row.
    pub fn layer_of(&self, row: &str) -> Option<usize> {
        self.layers.iter().position(|l| l.iter().any(|r| r == row))
    }
}

/// Builds the plan.
///
/// # Errors
/// [`KernelError::MissingProvider`], [`KernelError::DuplicateProvider`], [`KernelError::Cycle`].
pub fn plan(rows: &[GraphRow<'_>]) -> Result<Plan> {
    // facility -> providing rows (exclusive flag)
    let mut providers: BTreeMap<&str, Vec<(&str, bool)>> = BTreeMap::new();
    for row in rows {
        for p in &row.manifest.provides {
            providers
                .entry(p.name.as_str())
                .or_default()
                .push((row.id, p.exclusive));
        }
    }
    for (facility, list) in &providers {
        if list.len() > 1 && list.iter().any(|(_, exclusive)| *exclusive) {
            return Err(KernelError::DuplicateProvider {
                facility: (*facility).to_owned(),
                first: list[0].0.to_owned(),
                second: list[1].0.to_owned(),
            });
        }
    }
    let mut edges = Vec::new();
    for row in rows {
        for req in &row.manifest.requires {
            match providers.get(req.name.as_str()) {
                Some(list) => {
                    for (provider, _) in list {
                        if *provider != row.id {
                            edges.push(Edge {
                                consumer: row.id.to_owned(),
                                provider: (*provider).to_owned(),
                                facility: req.name.clone(),
                                optional: req.optional,
                            });
                        }
                    }
                }
                None if req.optional => {}
                None => {
                    return Err(KernelError::MissingProvider {
                        row: row.id.to_owned(),
                        plugin: row.plugin.to_owned(),
                        facility: req.name.clone(),
                    });
                }
            }
        }
    }
    edges.sort();
    edges.dedup();
    let layers = kahn(rows, &edges)?;
    let digest = digest(rows, &edges);
    Ok(Plan {
        layers,
        edges,
        digest,
    })
}

fn kahn(rows: &[GraphRow<'_>], edges: &[Edge]) -> Result<Vec<Vec<String>>> {
    let order: Vec<&str> = rows.iter().map(|r| r.id).collect();
    let mut remaining: BTreeSet<&str> = order.iter().copied().collect();
    let mut layers = Vec::new();
    while !remaining.is_empty() {
        let ready: Vec<&str> = order
            .iter()
            .copied()
            .filter(|r| remaining.contains(r))
            .filter(|r| {
                edges
                    .iter()
                    .filter(|e| e.consumer == *r)
                    .all(|e| !remaining.contains(e.provider.as_str()))
            })
            .collect();
        if ready.is_empty() {
            return Err(KernelError::Cycle {
                path: find_cycle(&remaining, edges),
            });
        }
        for r in &ready {
            remaining.remove(r);
        }
        layers.push(ready.into_iter().map(str::to_owned).collect());
    }
    Ok(layers)
}

/// Walks requirement edges from the first stuck row until a row repeats.
fn find_cycle(stuck: &BTreeSet<&str>, edges: &[Edge]) -> String {
    let Some(start) = stuck.iter().next() else {
        return String::from("(unknown)");
    };
    let mut path: Vec<(String, String)> = Vec::new(); // (row, facility it requires next)
    let mut current = (*start).to_owned();
    loop {
        if let Some(pos) = path.iter().position(|(r, _)| *r == current) {
            let cycle = &path[pos..];
            let mut text = String::new();
            for (row, facility) in cycle {
                text.push_str(&format!("row '{row}' requires '{facility}' from "));
            }
            text.push_str(&format!("row '{current}'"));
            return text;
        }
        let Some(edge) = edges
            .iter()
            .find(|e| e.consumer == current && stuck.contains(e.provider.as_str()))
        else {
            return format!("row '{current}' (stuck)");
        };
        path.push((current.clone(), edge.facility.clone()));
        current = edge.provider.clone();
    }
}

fn digest(rows: &[GraphRow<'_>], edges: &[Edge]) -> String {
    let mut h = blake3::Hasher::new();
    for r in rows {
        h.update(format!("row {} {}\n", r.id, r.plugin).as_bytes());
    }
    for e in edges {
        h.update(format!("edge {e}\n").as_bytes());
    }
    format!("blake3:{}", h.finalize().to_hex())
}

#[cfg(test)]
#[path = "graph_tests.rs"]
mod tests;
