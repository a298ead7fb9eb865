//! `keel config dump`, `keel plugins list`, `keel lock`: commands that assemble and report.

use std::io::Write as _;

use super::ProfileArgs;
use keel_config::{render_dump, render_dump_json};
use keel_kernel::assemble::{LockState, assemble};
use keel_kernel::error::{KernelError, Result};
use keel_kernel::lock;
use keel_kernel::paths::Paths;

fn out(text: &str) -> Result<i32> {
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (e.g. `| head`) is not an error worth a message.
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
    Ok(0)
}

pub(super) fn config_dump(
    paths: &Paths,
    args: &ProfileArgs,
    explain: bool,
    json: bool,
) -> Result<i32> {
    let profile = args.resolve(paths)?;
    if json {
        let v = render_dump_json(&profile, explain);
        out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&v).unwrap_or_default()
        ))
    } else {
        out(&render_dump(&profile, explain))
    }
}

pub(super) fn plugins_list(paths: &Paths, args: &ProfileArgs, json: bool) -> Result<i32> {
    let profile = args.resolve(paths)?;
    let assembly = assemble(paths, profile, true)?;
    let rows: Vec<serde_json::Value> = assembly
        .profile
        .rows
        .iter()
        .filter_map(|r| {
            let lib = assembly.libraries.get(&r.plugin)?;
            Some(serde_json::json!({
                "row": r.id,
                "plugin": r.plugin,
                "version": lib.manifest.version,
                "abi": lib.manifest.abi,
                "layer": assembly.plan.layer_of(&r.id),
                "digest": lib.digest,
                "library": lib.path.display().to_string(),
                "provides": lib.manifest.provides.iter().map(|p| p.name.clone()).collect::<Vec<_>>(),
                "requires": lib.manifest.requires.iter().map(|p| p.name.clone()).collect::<Vec<_>>(),
                "description": lib.manifest.description,
                "idle": assembly.idle.contains(&r.id),
            }))
        })
        .collect();
    let lock_text = match &assembly.lock {
        LockState::Locked(p) => format!("locked ({})", p.display()),
        LockState::Libraries(p) => format!(
            "libraries pinned by {}, graph unlocked: no entry for profile '{}'",
            p.display(),
            assembly.profile.name
        ),
        LockState::Unlocked(why) => format!("unlocked: {why}"),
        LockState::NotChecked => "not checked".to_owned(),
    };
    if json {
        let v = serde_json::json!({
            "profile": assembly.profile.name,
            "lock": lock_text,
            "graph_digest": assembly.plan.digest,
            "layers": assembly.plan.layers,
            "edges": assembly.plan.edges,
            "rows": rows,
        });
        return out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&v).unwrap_or_default()
        ));
    }
    let mut text = format!(
        "profile {} ({} rows, {} layers; {lock_text})\n",
        assembly.profile.name,
        rows.len(),
        assembly.plan.layers.len()
    );
    text.push_str(&format!(
        "{:<20} {:<20} {:<10} {:>5}  {:<20} {}\n",
        "ROW",
        // tidy: not a code (a column heading)
        "PLUGIN",
        "VERSION",
        "LAYER",
        "DIGEST",
        "LIBRARY"
    ));
    for r in &rows {
        let s = |k: &str| {
            r.get(k)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_owned()
        };
        let digest = s("digest");
        let short = digest.get(..19).unwrap_or(&digest).to_owned();
        text.push_str(&format!(
            "{:<20} {:<20} {:<10} {:>5}  {:<20} {}\n",
            s("row"),
            s("plugin"),
            s("version"),
            r.get("layer")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or_default(),
            short,
            s("library"),
        ));
    }
    for e in &assembly.plan.edges {
        text.push_str(&format!("edge {e}\n"));
    }
    // Issue 25 item 3: checked like the others, but not opened or started until it has work.
    for id in &assembly.idle {
        text.push_str(&format!(
            "idle {id}: no work for its config; its library opens when it gets some\n"
        ));
    }
    out(&text)
}

pub(super) fn lock(paths: &Paths, args: &ProfileArgs) -> Result<i32> {
    let profile = args.resolve(paths)?;
    // `default`, or `default --patch anthropic` for a patched profile (issue 23 item 9).
    let name = lock::LockKey::of(&profile).name(false);
    let assembly = assemble(paths, profile, false)?;
    let entry = lock::entry_for(&assembly.plan, &assembly.libraries);
    let n = entry.plugins.len();
    // Every library on the search path, not only this profile's: the lock then covers
    // whichever profile loads them (issue 10 item 10).
    let mut cache = keel_kernel::loader::DigestCache::refresh(&paths.keel_home);
    let table = lock::library_table(paths, &assembly.located, &mut cache)?;
    let pinned = table.len();
    let path = paths.lock_file();
    let previous = lock::write(&path, &name, entry, table.clone()).map_err(|e| match e {
        KernelError::Io { path, reason } => KernelError::Io {
            path,
            reason: format!("cannot write the lock (it lives beside the binary): {reason}"),
        },
        other => other,
    })?;
    let mut text = format!(
        "wrote {} (profile {name}: {n} plugins, graph {}; {pinned} {} on the search path \
         pinned)\n",
        path.display(),
        assembly.plan.digest,
        if pinned == 1 { "library" } else { "libraries" },
    );
    // Re-locking accepts whatever changed on the search path since the last lock: say what.
    if let Some(previous) = previous {
        let drift = lock::Drift::between(&previous, &table);
        for (what, names) in [
            ("changed since the last lock, re-pinned", &drift.changed),
            ("new since the last lock, pinned", &drift.unpinned),
            ("gone since the last lock, dropped", &drift.gone),
        ] {
            if !names.is_empty() {
                text.push_str(&format!("{what}: {}\n", names.join(", ")));
            }
        }
    }
    out(&text)
}
