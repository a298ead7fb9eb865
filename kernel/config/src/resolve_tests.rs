//! Unit tests for profile resolution: file lookup, the CFG-02 layer order, and error messages.

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::test_support::{Fixture, shown};

/// A row whose config each layer replaces with `who = <layer>`, so the survivor names the winner.
fn replace_who(who: &str) -> String {
    format!("[[replace]]\nid = \"r\"\nconfig = {{ who = \"{who}\" }}\n")
}

#[test]
fn cfg02_layers_apply_bundle_profile_user_project_patch_cli_in_order() {
    let fx = Fixture::new();
    let base = fx.write(
        "root/bundles/base.toml",
        "[[insert]]\nid = \"r\"\nplugin = \"p\"\nconfig = { who = \"base\" }\n",
    );
    let extra = fx.write("root/bundles/extra.toml", &replace_who("extra"));
    let prof = fx.write(
        "root/profiles/demo.toml",
        &format!(
            "bundles = [\"base\", \"extra\"]\n{}",
            replace_who("profile")
        ),
    );
    let user = fx.write("home/config.toml", &replace_who("user"));
    let project = fx.write("project/.keel/config.toml", &replace_who("project"));
    let p1 = fx.write("p1.toml", &replace_who("patch1"));
    let p2 = fx.write("p2.toml", &replace_who("patch2"));
    let mut sources = fx.sources();
    sources.patches = vec![p1.clone(), p2.clone()];
    sources.overrides = vec!["r.who=cli1".into(), "r.who=\"cli2\"".into()];

    let resolved = resolve_profile("demo", &sources).unwrap();
    assert_eq!(resolved.name, "demo");
    assert_eq!(resolved.path, prof);
    assert_eq!(resolved.bundles, vec!["base", "extra"]);
    let row = resolved.row("r").unwrap();
    assert_eq!(row.config, json!({ "who": "cli2" }));

    let layer = |kind, path: &std::path::Path| LayerRef::new(kind, shown(path));
    let expected_layers = vec![
        layer(LayerKind::Bundle("base".into()), &base),
        layer(LayerKind::Bundle("extra".into()), &extra),
        layer(LayerKind::Profile("demo".into()), &prof),
        layer(LayerKind::User, &user),
        layer(LayerKind::Project, &project),
        layer(LayerKind::Patch, &p1),
        layer(LayerKind::Patch, &p2),
        LayerRef::new(LayerKind::Cli, "-c r.who=cli1"),
        LayerRef::new(LayerKind::Cli, "-c r.who=\"cli2\""),
    ];
    assert_eq!(resolved.layers, expected_layers);
    // CFG-08: the key was set by the last -c and overrode every earlier layer, oldest first.
    let who = row.provenance.key("who").unwrap();
    assert_eq!(who.set_by, expected_layers[8]);
    assert_eq!(who.overrode, expected_layers[..8].to_vec());
    assert_eq!(row.provenance.inserted_by, expected_layers[0]);
    assert_eq!(row.provenance.replaced_by, expected_layers[1..7].to_vec());
    assert!(resolved.warnings.is_empty(), "{:?}", resolved.warnings);
}

#[test]
fn absent_user_and_project_layers_are_skipped() {
    let fx = Fixture::new();
    fx.write(
        "root/profiles/p.toml",
        "description = \"d\"\n[[insert]]\nid = \"a\"\nplugin = \"p\"\n",
    );
    let resolved = resolve_profile("p", &fx.sources()).unwrap();
    assert_eq!(resolved.layers.len(), 1);
    assert_eq!(resolved.description.as_deref(), Some("d"));
    let none = ConfigSources {
        roots: vec![fx.root()],
        ..ConfigSources::default()
    };
    assert_eq!(resolve_profile("p", &none).unwrap().rows.len(), 1);
}

#[test]
fn user_and_project_layer_being_the_same_file_applies_once() {
    let fx = Fixture::new();
    fx.write("root/profiles/p.toml", "");
    fx.write(
        "project/.keel/config.toml",
        "[[insert]]\nid = \"a\"\nplugin = \"p\"\n",
    );
    let mut sources = fx.sources();
    sources.keel_home = Some(fx.path("project/.keel"));
    let resolved = resolve_profile("p", &sources).unwrap();
    assert_eq!(resolved.rows.len(), 1);
    assert_eq!(resolved.layers[1].kind, LayerKind::User);
    assert_eq!(resolved.layers.len(), 2);
}

#[test]
fn cfg03_unmatched_patch_warning_names_the_user_layer_file() {
    let fx = Fixture::new();
    fx.write("root/profiles/p.toml", "");
    let user = fx.write("home/config.toml", "[[replace]]\nid = \"x\"\n");
    let resolved = resolve_profile("p", &fx.sources()).unwrap();
    assert_eq!(
        resolved.warnings,
        vec![format!(
            "warning: user layer {}: replace of row 'x' matches no row",
            shown(&user)
        )]
    );
}

#[test]
fn profile_and_bundle_lookup_takes_the_first_root_that_has_the_file() {
    let fx = Fixture::new();
    fx.write("second/profiles/p.toml", "bundles = [\"b\"]\n");
    fx.write(
        "root/bundles/b.toml",
        "[[insert]]\nid = \"first\"\nplugin = \"p\"\n",
    );
    fx.write(
        "second/bundles/b.toml",
        "[[insert]]\nid = \"second\"\nplugin = \"p\"\n",
    );
    let mut sources = fx.sources();
    sources.roots.push(fx.path("second"));
    let resolved = resolve_profile("p", &sources).unwrap();
    assert_eq!(resolved.path, fx.path("second/profiles/p.toml"));
    assert_eq!(resolved.rows[0].id, "first");
}

#[test]
fn profile_given_as_a_path_is_read_directly() {
    let fx = Fixture::new();
    let path = fx.write(
        "elsewhere/my-profile.toml",
        "[[insert]]\nid = \"a\"\nplugin = \"p\"\n",
    );
    let resolved = resolve_profile(&shown(&path), &fx.sources()).unwrap();
    assert_eq!(resolved.name, "my-profile");
    assert_eq!(
        resolved.layers[0].kind,
        LayerKind::Profile("my-profile".into())
    );
    let missing = fx.path("elsewhere/nope.toml");
    let err = resolve_profile(&shown(&missing), &fx.sources()).unwrap_err();
    assert_eq!(err.code(), "CONFIG_UNKNOWN_PROFILE");
    assert_eq!(
        err.to_string(),
        format!("profile file {} does not exist", shown(&missing))
    );
}

#[test]
fn unknown_profile_lists_the_roots_searched() {
    let fx = Fixture::new();
    let mut sources = fx.sources();
    sources.roots.push(fx.path("second"));
    let err = resolve_profile("nope", &sources).unwrap_err();
    assert_eq!(err.code(), "CONFIG_UNKNOWN_PROFILE");
    assert_eq!(
        err.to_string(),
        format!(
            "unknown profile 'nope' (searched {}, {})",
            shown(&fx.path("root/profiles/nope.toml")),
            shown(&fx.path("second/profiles/nope.toml"))
        )
    );
    let err = resolve_profile("nope", &ConfigSources::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown profile 'nope' (searched no config roots)"
    );
}

#[test]
fn unknown_bundle_names_the_referencing_profile_file() {
    let fx = Fixture::new();
    let prof = fx.write(
        "root/profiles/p.toml",
        "# comment\nbundles = [\"missing\"]\n",
    );
    let err = resolve_profile("p", &fx.sources()).unwrap_err();
    assert_eq!(err.code(), "CONFIG_UNKNOWN_BUNDLE");
    assert_eq!(
        err.to_string(),
        format!(
            "unknown bundle 'missing' referenced by profile {}:2 (searched {})",
            shown(&prof),
            shown(&fx.path("root/bundles/missing.toml"))
        )
    );
}

#[test]
fn bundle_listed_twice_is_an_error() {
    let fx = Fixture::new();
    fx.write("root/bundles/b.toml", "");
    fx.write("root/profiles/p.toml", "bundles = [\"b\", \"b\"]\n");
    let err = resolve_profile("p", &fx.sources()).unwrap_err();
    assert_eq!(err.code(), "CONFIG_DUPLICATE_BUNDLE");
    assert!(
        err.to_string()
            .starts_with("bundle 'b' is listed twice in profile "),
        "{err}"
    );
}

#[test]
fn bundle_may_not_name_bundles() {
    let fx = Fixture::new();
    let b = fx.write("root/bundles/b.toml", "bundles = [\"c\"]\n");
    fx.write("root/profiles/p.toml", "bundles = [\"b\"]\n");
    let err = resolve_profile("p", &fx.sources()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}:1:11: `bundles` is only allowed in a profile, not in a bundle:b layer",
            shown(&b)
        )
    );
}

#[test]
fn duplicate_insert_across_files_names_both_files() {
    let fx = Fixture::new();
    let b = fx.write(
        "root/bundles/base.toml",
        "[[insert]]\nid = \"a\"\nplugin = \"p\"\n",
    );
    let prof = fx.write(
        "root/profiles/p.toml",
        "bundles = [\"base\"]\n\n[[insert]]\nid = \"a\"\nplugin = \"q\"\n",
    );
    let err = resolve_profile("p", &fx.sources()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "duplicate row 'a': inserted by profile:p ({}:3) but already inserted by bundle:base ({})",
            shown(&prof),
            shown(&b)
        )
    );
}

#[test]
fn missing_patch_names_the_file() {
    let fx = Fixture::new();
    fx.write("root/profiles/p.toml", "");
    let mut sources = fx.sources();
    sources.patches = vec![fx.path("nope.toml")];
    let err = resolve_profile("p", &sources).unwrap_err();
    assert_eq!(err.code(), "CONFIG_MISSING_PATCH");
    assert_eq!(
        err.to_string(),
        format!("patch file {} does not exist", shown(&fx.path("nope.toml")))
    );
}

#[test]
fn malformed_project_layer_names_its_file_and_line() {
    let fx = Fixture::new();
    fx.write("root/profiles/p.toml", "");
    let project = fx.write(
        "project/.keel/config.toml",
        "[kernel]\nfault_threshold = 3\n[[insert\n",
    );
    let err = resolve_profile("p", &fx.sources()).unwrap_err();
    assert_eq!(err.code(), "CONFIG_PARSE");
    assert!(
        err.to_string()
            .starts_with(&format!("{}:3:", shown(&project))),
        "{err}"
    );
}

#[test]
fn bad_override_is_reported_before_any_file_is_read() {
    let fx = Fixture::new();
    let mut sources = fx.sources();
    sources.overrides = vec!["r.k=1".into(), "no-equals".into()];
    let err = resolve_profile("does-not-exist", &sources).unwrap_err();
    assert_eq!(
        err.to_string(),
        "bad override '-c no-equals': expected ROW.KEY=VALUE (missing '=')"
    );
}
