//! `cargo xtask new-plugin NAME [--dir DIR]`: writes a new out-of-tree plugin crate from the
//! template in `xtask/templates/plugin/` (issue 12 item 4): a tool provider with a typed config,
//! one listener, unit and in-process tests, and the profile row that inserts it.
//!
//! The template files are compiled into xtask (`include_str!`) and filled by plain
//! `{{placeholder}}` substitution; the crate depends on this checkout's `plugin-api` and
//! `plugin-test` by absolute path. `tests/suite/new_plugin.rs` generates one, builds it and runs
//! `keel` with it, so the template cannot rot.

use std::fs;
use std::path::{Path, PathBuf};

use crate::shell::{Failure, Result};

/// `(path in the new crate, template text)`.
const FILES: &[(&str, &str)] = &[
    (
        "Cargo.toml",
        include_str!("../templates/plugin/Cargo.toml.tmpl"),
    ),
    ("README.md", include_str!("../templates/plugin/README.md")),
    (
        "profile.toml",
        include_str!("../templates/plugin/profile.toml"),
    ),
    ("src/lib.rs", include_str!("../templates/plugin/src/lib.rs")),
    (
        "src/greet.rs",
        include_str!("../templates/plugin/src/greet.rs"),
    ),
    (
        "src/tool.rs",
        include_str!("../templates/plugin/src/tool.rs"),
    ),
    (
        "src/fake.rs",
        include_str!("../templates/plugin/src/fake.rs"),
    ),
    (".gitignore", "/target\n"),
];

/// Plugin ids keel reserves besides its own plugins' (the test harness's own row).
const RESERVED: &[&str] = &["test-probe"];

/// Entry point for `cargo xtask new-plugin`.
pub fn run(args: &[String]) -> Result {
    let mut name = None;
    let mut dir = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--dir" => {
                let value = rest
                    .next()
                    .ok_or_else(|| Failure::usage("`--dir` needs a directory"))?;
                dir = Some(PathBuf::from(value));
            }
            flag if flag.starts_with('-') => {
                return Err(Failure::usage(format!(
                    "new-plugin: unknown option `{flag}`"
                )));
            }
            value if name.is_none() => name = Some(value.to_owned()),
            extra => {
                return Err(Failure::usage(format!(
                    "new-plugin: one NAME only (got a second one, `{extra}`)"
                )));
            }
        }
    }
    let name = name.ok_or_else(|| Failure::usage("new-plugin: NAME is missing"))?;
    let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
    let root = crate::shell::root();
    let written = generate(&name, &dir, &root)?;
    println!(
        "created plugin `{name}` in {} ({} files)",
        dir.display(),
        written.len()
    );
    println!(
        "next: cd {} && cargo test && cargo build, then add profile.toml's row to a profile \
         and run keel with KEEL_PLUGIN_PATH={}/target/debug",
        dir.display(),
        dir.display()
    );
    Ok(())
}

/// Checks `name`: a plugin id, which is also a row id and (as `keel-plugin-NAME`) a crate name.
///
/// # Errors
/// One line saying what is wrong with it.
pub fn validate_name(name: &str, root: &Path) -> Result<()> {
    let bad = |why: &str| {
        Err(Failure::new(format!(
            "new-plugin: invalid NAME `{name}`: {why}"
        )))
    };
    if name.is_empty() || name.len() > 40 {
        return bad("it must be 1 to 40 characters");
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return bad("it must start with a lowercase letter");
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return bad(&format!(
            "`{c}` is not allowed (lowercase letters, digits and single `-` between words)"
        ));
    }
    if name.ends_with('-') || name.contains("--") {
        return bad("`-` may only separate words");
    }
    if RESERVED.contains(&name) || root.join("plugins").join(name).is_dir() {
        return bad("keel already has a plugin of that name");
    }
    Ok(())
}

/// `my-tool` → `MyTool`.
fn camel(name: &str) -> String {
    name.split('-')
        .map(|word| {
            let mut chars = word.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// Fills one template.
fn render(template: &str, name: &str, root: &Path) -> String {
    template
        .replace("{{name}}", name)
        .replace("{{snake}}", &name.replace('-', "_"))
        .replace("{{camel}}", &camel(name))
        .replace(
            "{{api_path}}",
            &root.join("plugin-api").display().to_string(),
        )
        .replace(
            "{{harness_path}}",
            &root.join("plugin-test").display().to_string(),
        )
}

/// Writes the crate for plugin `name` into `dir` (created; it may exist only if empty), with
/// dependencies by path into the keel checkout at `root`. Returns the files written.
///
/// # Errors
/// An invalid name, a non-empty `dir`, or an I/O error naming the path.
pub fn generate(name: &str, dir: &Path, root: &Path) -> Result<Vec<PathBuf>> {
    validate_name(name, root)?;
    let root = fs::canonicalize(root)
        .map_err(|e| Failure::new(format!("new-plugin: {}: {e}", root.display())))?;
    if dir.exists() {
        let mut entries = fs::read_dir(dir).map_err(|e| {
            Failure::new(format!(
                "new-plugin: {} exists and is not a readable directory: {e}",
                dir.display()
            ))
        })?;
        if entries.next().is_some() {
            return Err(Failure::new(format!(
                "new-plugin: {} exists and is not empty; choose another --dir",
                dir.display()
            )));
        }
    }
    let mut written = Vec::new();
    for (rel, template) in FILES {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)
                .map_err(|e| Failure::new(format!("new-plugin: {}: {e}", parent.display())))?;
        }
        fs::write(&path, render(template, name, &root))
            .map_err(|e| Failure::new(format!("new-plugin: {}: {e}", path.display())))?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plugin_ids() {
        let root = crate::shell::root();
        for good in ["greeter", "my-tool", "a1-b2"] {
            assert!(validate_name(good, &root).is_ok(), "{good}");
        }
        for (bad, why) in [
            ("", "1 to 40"),
            ("My-tool", "start with a lowercase"),
            ("my_tool", "`_` is not allowed"),
            ("my--tool", "separate words"),
            ("tool-", "separate words"),
            ("1tool", "start with a lowercase"),
            ("tools", "already has a plugin"),
            ("test-probe", "already has a plugin"),
        ] {
            let err = validate_name(bad, &root).unwrap_err();
            assert!(err.message.contains(why), "{bad}: {}", err.message);
            assert!(err.message.contains(&format!("`{bad}`")), "{}", err.message);
        }
    }

    #[test]
    fn generate_fills_every_placeholder_and_refuses_a_non_empty_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("my-tool");
        let files = generate("my-tool", &dir, &crate::shell::root()).unwrap();
        assert_eq!(files.len(), FILES.len());
        for file in &files {
            let text = fs::read_to_string(file).unwrap();
            assert!(!text.contains("{{"), "{}: {text}", file.display());
        }
        let lib = fs::read_to_string(dir.join("src/lib.rs")).unwrap();
        assert!(lib.contains("pub struct MyToolPlugin;"), "{lib}");
        let manifest = fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        assert!(
            manifest.contains("name = \"keel-plugin-my-tool\""),
            "{manifest}"
        );
        let err = generate("my-tool", &dir, &crate::shell::root()).unwrap_err();
        assert!(err.message.contains("is not empty"), "{}", err.message);
    }
}
