//! The bash fill's scanner, checked by text and by real bash: each rewritten command runs
//! with the variable set to a hostile value and must print exactly what it means.

use std::process::Command;

use super::*;

/// A value that breaks or runs as text in every quoting context.
const HOSTILE: &str = "a'b\"c`d $(touch pwned) ;e\\f\n${HOME} $'x' !g";

fn known(name: &str) -> bool {
    matches!(name, "TOKEN" | "B")
}

fn rw(command: &str) -> String {
    rewrite(command, known)
        .unwrap()
        .unwrap_or_else(|| panic!("nothing rewritten in {command:?}"))
        .command
}

/// Runs `command` rewritten, with `sec_TOKEN` and `sec_B` set, in a fresh directory; its
/// stdout, and whether anything was created there.
fn run(command: &str) -> (String, bool) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .args(["-c", &rw(command)])
        .current_dir(dir.path())
        .env("sec_TOKEN", HOSTILE)
        .env("sec_B", "bee")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{command:?} → {:?}: {}",
        rw(command),
        String::from_utf8_lossy(&out.stderr)
    );
    let created = std::fs::read_dir(dir.path()).unwrap().next().is_some();
    (String::from_utf8(out.stdout).unwrap(), created)
}

#[test]
fn sec02_each_quoting_context_gets_its_expansion() {
    assert_eq!(rw("echo sec_TOKEN"), r#"echo "${sec_TOKEN}""#);
    assert_eq!(rw(r#"echo "x sec_TOKEN y""#), r#"echo "x ${sec_TOKEN} y""#);
    assert_eq!(rw("echo 'x sec_TOKEN y'"), r#"echo 'x '"${sec_TOKEN}"' y'"#);
    assert_eq!(
        rw(r"echo $'x sec_TOKEN\n'"),
        r#"echo $'x '"${sec_TOKEN}"$'\n'"#
    );
    assert_eq!(
        rw(r#"echo "$(printf %s sec_TOKEN)""#),
        r#"echo "$(printf %s "${sec_TOKEN}")""#
    );
    assert_eq!(rw("echo `echo sec_B`"), r#"echo `echo "${sec_B}"`"#);
    assert_eq!(rw("cat <<EOF\nsec_B\nEOF\n"), "cat <<EOF\n${sec_B}\nEOF\n");
    assert_eq!(rw("x=sec_B; y=_sec_B"), r#"x="${sec_B}"; y=_"${sec_B}""#);
}

#[test]
fn sec02_expansions_aliases_unknown_names_and_comments_are_left_alone() {
    let none = |c: &str| rewrite(c, known).unwrap();
    assert_eq!(none("echo $sec_TOKEN ${sec_TOKEN} \"${sec_B}\""), None);
    assert_eq!(none("echo sec_OTHER xsec_TOKEN sec_ sec_TOKENS"), None);
    assert_eq!(none("ls # sec_TOKEN"), None);
    assert_eq!(none("no aliases at all"), None);
    let r = rewrite("a sec_B; b 'sec_TOKEN' sec_B # sec_B", known)
        .unwrap()
        .unwrap();
    assert_eq!(r.names, ["B", "TOKEN"]);
    assert!(r.command.ends_with("# sec_B"), "{}", r.command);
    // Idempotent: a rewritten command has nothing left to rewrite.
    assert_eq!(none(&rw("echo sec_TOKEN 'sec_B' \"sec_B\"")), None);
}

#[test]
fn sec02_a_quoted_heredoc_body_is_refused_an_unquoted_one_expands() {
    for op in ["<<'EOF'", "<<\"EOF\"", "<<\\EOF", "<<-'EOF'", "<< E\"O\"F"] {
        let e = rewrite(&format!("cat {op}\nhello sec_TOKEN\nEOF\n"), known).unwrap_err();
        assert_eq!(
            e,
            Refusal::QuotedHeredoc {
                alias: "sec_TOKEN".into(),
                delimiter: "EOF".into()
            },
            "{op}"
        );
        assert!(e.to_string().contains("quoted heredoc"));
    }
    // After the body, the command goes on unquoted; a here-string is a word; a shift in
    // arithmetic is not a heredoc.
    assert_eq!(
        rw("cat <<'EOF'\nliteral\nEOF\necho sec_B <<<sec_B $((1<<2))"),
        "cat <<'EOF'\nliteral\nEOF\necho \"${sec_B}\" <<<\"${sec_B}\" $((1<<2))"
    );
    assert_eq!(
        rw("cat <<-EOF\n\tsec_B\n\tEOF\necho sec_B"),
        "cat <<-EOF\n\t${sec_B}\n\tEOF\necho \"${sec_B}\""
    );
}

/// What bash does with the rewrite: the program receives the exact bytes, in every context,
/// and nothing in the value runs.
#[test]
fn sec02_bash_receives_the_exact_value_and_runs_none_of_it() {
    let cases: [(&str, String); 9] = [
        ("printf '%s' sec_TOKEN", HOSTILE.to_owned()),
        ("printf '%s' \"<sec_TOKEN>\"", format!("<{HOSTILE}>")),
        ("printf '%s' '<sec_TOKEN>'", format!("<{HOSTILE}>")),
        ("printf '%s' $'<sec_TOKEN>\\t'", format!("<{HOSTILE}>\t")),
        (
            "printf '%s' \"$(printf '%s' sec_TOKEN)\"",
            HOSTILE.to_owned(),
        ),
        ("printf '%s' `printf '%s' sec_B`", "bee".to_owned()),
        ("cat <<EOF\n<sec_TOKEN>\nEOF", format!("<{HOSTILE}>\n")),
        ("v=sec_TOKEN; printf '%s' \"$v\"", HOSTILE.to_owned()),
        (
            "printf '%s|' sec_B 'q sec_B' \"d sec_B\" # sec_B",
            "bee|q bee|d bee|".to_owned(),
        ),
    ];
    for (command, want) in cases {
        let (got, created) = run(command);
        assert_eq!(got, want, "{command:?} → {:?}", rw(command));
        assert!(!created, "{command:?}: the value ran");
    }
}
