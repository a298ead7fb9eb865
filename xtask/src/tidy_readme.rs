//! The README rules of `cargo xtask tidy` (issue 24 item 6): the indexes a newcomer reads first
//! say what the tree holds, no more and no less.
//!
//! - **Plugins**: every folder under `plugins/` is named in the first cell of a table row of
//!   `plugins/README.md` (plugins and support libraries alike), and every name there is a folder.
//! - **Bundles**: every `bundles/*.toml` is named in the first cell of a table row of
//!   `bundles/README.md`, and every name there is a bundle file.
//! - **Docs**: every `docs/*.md` is linked from the root `README.md`'s list (`- [docs/X.md](…)`
//!   lines), and every doc that list links exists.
//!
//! Decision: the rules read Markdown as lines (table rows, list items with a link) rather than
//! parsing it; the READMEs are ours and their shapes are few, and a row that does not match is
//! simply not counted, so a check can only miss a name, never invent one.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use crate::shell::{Failure, Result};
use crate::tidy::Problem;

/// All three checks over the tree at `root`.
///
/// # Errors
/// A README or a folder that cannot be read.
pub fn check(root: &Path) -> Result<Vec<Problem>> {
    let mut problems = Vec::new();
    let plugins = entries(&root.join("plugins"), |p| p.is_dir())?;
    let readme = read(&root.join("plugins/README.md"))?;
    problems.extend(index(
        "plugins/README.md",
        "plugin folder",
        &plugins,
        &table_names(&readme),
    ));
    let bundles: BTreeSet<String> = entries(&root.join("bundles"), |p| {
        p.extension().is_some_and(|e| e == "toml")
    })?
    .into_iter()
    .filter_map(|f| f.strip_suffix(".toml").map(str::to_owned))
    .collect();
    let readme = read(&root.join("bundles/README.md"))?;
    problems.extend(index(
        "bundles/README.md",
        "bundle",
        &bundles,
        &table_names(&readme),
    ));
    let docs = entries(&root.join("docs"), |p| {
        p.extension().is_some_and(|e| e == "md")
    })?;
    let readme = read(&root.join("README.md"))?;
    problems.extend(index("README.md", "doc", &docs, &doc_links(&readme)));
    Ok(problems)
}

/// The problems of one index: each of `present` the README does not name, and each name it
/// gives that is not present.
pub fn index(
    readme: &str,
    what: &str,
    present: &BTreeSet<String>,
    named: &BTreeSet<String>,
) -> Vec<Problem> {
    let missing = present.difference(named).map(|name| Problem {
        path: readme.to_owned(),
        message: format!("does not name the {what} `{name}`: add it to the list"),
    });
    let stale = named.difference(present).map(|name| Problem {
        path: readme.to_owned(),
        message: format!("names the {what} `{name}`, which does not exist: remove it"),
    });
    missing.chain(stale).collect()
}

/// The backticked names in the first cell of each table row (`| `a`, `b` | … |`), header and
/// separator rows left out.
pub fn table_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(row) = line.trim().strip_prefix('|') else {
            continue;
        };
        let first = row.split('|').next().unwrap_or_default();
        names.extend(backticked(first));
    }
    names
}

/// The file names linked from the list items that start with a link into `docs/`
/// (`- [docs/x.md](docs/x.md): …` gives `x.md`).
pub fn doc_links(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|line| line.trim_start().strip_prefix("- [docs/"))
        .filter_map(|rest| rest.split_once("](docs/"))
        .filter_map(|(_, target)| target.split_once(')'))
        .map(|(file, _)| file.to_owned())
        .collect()
}

fn backticked(cell: &str) -> impl Iterator<Item = String> + '_ {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
}

fn entries(dir: &Path, keep: impl Fn(&Path) -> bool) -> Result<BTreeSet<String>> {
    let list = fs::read_dir(dir).map_err(|e| Failure::new(format!("{}: {e}", dir.display())))?;
    let mut out = BTreeSet::new();
    for entry in list {
        let entry = entry.map_err(|e| Failure::new(format!("{}: {e}", dir.display())))?;
        let path = entry.path();
        if keep(&path) {
            out.insert(entry.file_name().to_string_lossy().into_owned());
        }
    }
    Ok(out)
}

fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(|e| Failure::new(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn table_rows_name_their_first_cell_only() {
        let text = "| plugin | job |\n|---|---|\n| `session-jsonl`, `session-sqlite` | storage, `keel.x` |\n| `hooks` | runs `sh` |\nnot a row `x`\n";
        assert_eq!(
            table_names(text),
            set(&["session-jsonl", "session-sqlite", "hooks"])
        );
    }

    #[test]
    fn doc_links_are_the_list_items_into_docs() {
        let text = "- [docs/a.md](docs/a.md): one\n  - [docs/b.md](docs/b.md)\nsee [docs/c.md](docs/c.md)\n- [other](x.md)\n";
        assert_eq!(doc_links(text), set(&["a.md", "b.md"]));
    }

    #[test]
    fn a_missing_and_a_stale_name_are_each_one_problem_naming_it() {
        let problems = index(
            "plugins/README.md",
            "plugin folder",
            &set(&["hooks", "subagent"]),
            &set(&["hooks", "ghost"]),
        );
        let messages: Vec<&str> = problems.iter().map(|p| p.message.as_str()).collect();
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(messages[0].contains("does not name the plugin folder `subagent`"));
        assert!(messages[1].contains("`ghost`, which does not exist"));
        assert!(problems.iter().all(|p| p.path == "plugins/README.md"));
        assert!(index("r", "doc", &set(&["a"]), &set(&["a"])).is_empty());
    }

    // The committed tree passes: its READMEs name exactly what it holds.
    #[test]
    fn the_workspace_readmes_name_what_the_tree_holds() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap_or(Path::new("."));
        let problems = check(root).unwrap_or_default();
        assert!(problems.is_empty(), "{problems:?}");
    }
}
