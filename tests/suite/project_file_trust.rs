//! Project-file trust is declared, not known (issue 24 item 4): the kernel names no product's
//! files; a plugin declares the project files it wants trusted (`trusts_project_files`), `keel
//! trust` records those the profile's plugins declare, and the kernel answers a row only for
//! the files its own plugin declared. A row that declares nothing cannot get a file trusted:
//! not by `keel trust`'s record and not by `--trust-project`.

use keel_tests::Env;

use super::proof::{failed, profile};

/// The hooks row declares Claude Code's settings, so `keel trust` records them (naming the
/// plugin); the proof driver declares none, so its question about the same recorded file is
/// refused with `UNDECLARED_TRUST_FILE`, naming its row and the path, even under
/// `--trust-project`.
#[test]
fn issue24_item4_a_row_that_does_not_declare_a_file_cannot_get_it_trusted() {
    let env = Env::new();
    profile(&env, "", &[]);
    let settings = env.file("work/.claude/settings.json", "{}\n");
    let work = env.work().display().to_string();
    let trusted = env.keel(&["trust", &work]);
    trusted.expect_code(0);
    assert!(
        trusted.stdout.contains(".claude/settings.json")
            && trusted.stdout.contains("declared by plugin hooks"),
        "{}",
        trusted.stdout
    );

    let script = format!("file-trust:{}", settings.display());
    for extra in [&[][..], &["--trust-project"][..]] {
        let mut args = vec!["run", "--profile", "p"];
        args.extend_from_slice(extra);
        args.push(&script);
        let run = env.keel(&args);
        run.expect_code(0);
        let (code, message) = failed(&run, &script);
        assert_eq!(code, "UNDECLARED_TRUST_FILE", "{message}");
        assert!(
            message.contains("row 'driver'") && message.contains(".claude/settings.json"),
            "{message}"
        );
        assert!(message.contains("declares: none"), "{message}");
    }
}
