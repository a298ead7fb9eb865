//! The system prompt as plain data (LOOP-14): merging sections by id, ordering them, the one
//! `complete` section rule, `{{variable}}` interpolation and the built-in variables. No SDK
//! types here, so every rule is unit-tested without a kernel; `lib.rs` only feeds it the row
//! config and the `system-prompt/assemble` waterfall's result.

use std::collections::BTreeMap;

use keel_plugin_api::services::prompt::{PromptCode, PromptSection};

/// `{{name}}` → value.
pub type Variables = BTreeMap<String, String>;

/// Why assembly failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptError {
    /// More than one effective section is `complete` (their ids, in order).
    Conflict(Vec<String>),
}

impl PromptError {
    /// The wire code.
    pub fn code(&self) -> PromptCode {
        match self {
            PromptError::Conflict(_) => PromptCode::Conflict,
        }
    }

    /// The message.
    pub fn message(&self) -> String {
        match self {
            PromptError::Conflict(ids) => format!(
                "more than one complete system-prompt section: {} (at most one may be complete)",
                ids.join(", ")
            ),
        }
    }
}

/// The default prompt when the row config has no `sections`: one base section.
pub fn default_sections() -> Vec<PromptSection> {
    vec![PromptSection {
        id: "base".to_owned(),
        order: 0,
        text: "You are keel, a careful coding agent working in {{cwd}}.\n\n\
               Use the tools available to you ({{tools}}) to inspect the project, change files \
               and run commands. Read before you edit, make the smallest change that does the \
               job, and check your work.\n\n\
               When you are done, finish with a short summary of what you did."
            .to_owned(),
        complete: false,
    }]
}

/// The built-in variables: `cwd`, `date` (UTC `YYYY-MM-DD` of `now_secs`, seconds since the
/// Unix epoch), `os`, `tools` (comma-separated, `none` when empty).
pub fn builtins(cwd: &str, tools: &[String], now_secs: i64) -> Variables {
    let tools = if tools.is_empty() {
        "none".to_owned()
    } else {
        tools.join(", ")
    };
    Variables::from([
        ("cwd".to_owned(), cwd.to_owned()),
        ("date".to_owned(), utc_date(now_secs)),
        ("os".to_owned(), std::env::consts::OS.to_owned()),
        ("tools".to_owned(), tools),
    ])
}

/// `YYYY-MM-DD` (proleptic Gregorian, UTC) of a Unix time in seconds.
pub fn utc_date(secs: i64) -> String {
    keel_plugin_api::civil_time::utc_date(secs)
}

/// The effective sections: a later section with an id seen before replaces the earlier one
/// (taking its place in the list), then a stable sort by `order`.
pub fn effective(sections: Vec<PromptSection>) -> Vec<PromptSection> {
    let mut merged: Vec<PromptSection> = Vec::with_capacity(sections.len());
    let mut at: BTreeMap<String, usize> = BTreeMap::new();
    for s in sections {
        match at.get(&s.id) {
            Some(&i) => merged[i] = s,
            None => {
                at.insert(s.id.clone(), merged.len());
                merged.push(s);
            }
        }
    }
    merged.sort_by_key(|s| s.order);
    merged
}

/// Assembles the prompt text: effective sections, the `complete` rule, interpolation. Sections
/// are joined by a blank line; sections whose text is blank are left out.
///
/// # Errors
/// [`PromptError::Conflict`] when more than one effective section is `complete`.
pub fn assemble(sections: Vec<PromptSection>, vars: &Variables) -> Result<String, PromptError> {
    let sections = effective(sections);
    let complete: Vec<&PromptSection> = sections.iter().filter(|s| s.complete).collect();
    let chosen: Vec<&PromptSection> = match complete.as_slice() {
        [] => sections.iter().collect(),
        [one] => vec![*one],
        many => {
            return Err(PromptError::Conflict(
                many.iter().map(|s| s.id.clone()).collect(),
            ));
        }
    };
    let parts: Vec<String> = chosen
        .iter()
        .map(|s| interpolate(s.text.trim(), vars))
        .filter(|t| !t.trim().is_empty())
        .collect();
    Ok(parts.join("\n\n"))
}

fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// Replaces every `{{name}}` (spaces inside the braces allowed) whose name is in `vars`, in one
/// pass: values are not interpolated again, and unknown names stay as written.
pub fn interpolate(text: &str, vars: &Variables) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let value = after.find("}}").and_then(|close| {
            let name = after[..close].trim();
            is_name(name)
                .then(|| vars.get(name))
                .flatten()
                .map(|v| (v, close))
        });
        match value {
            Some((v, close)) => {
                out.push_str(v);
                rest = &after[close + 2..];
            }
            None => {
                // Not a known placeholder: keep one brace and rescan from the next one.
                out.push('{');
                rest = &rest[open + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn section(id: &str, order: i64, text: &str) -> PromptSection {
        PromptSection {
            id: id.to_owned(),
            order,
            text: text.to_owned(),
            complete: false,
        }
    }

    fn complete(id: &str, order: i64, text: &str) -> PromptSection {
        PromptSection {
            complete: true,
            ..section(id, order, text)
        }
    }

    fn vars(pairs: &[(&str, &str)]) -> Variables {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn loop14_sections_are_ordered_by_number_stably() {
        let text = assemble(
            vec![
                section("c", 20, "third"),
                section("a", -5, "first"),
                section("b1", 10, "second (b1)"),
                section("b2", 10, "second (b2)"),
            ],
            &Variables::new(),
        );
        assert_eq!(
            text,
            Ok("first\n\nsecond (b1)\n\nsecond (b2)\n\nthird".to_owned())
        );
    }

    #[test]
    fn loop14_a_later_section_with_the_same_id_replaces_the_earlier() {
        let text = assemble(
            vec![
                section("base", 0, "old base"),
                section("tail", 5, "tail"),
                section("base", 1, "new base"),
            ],
            &Variables::new(),
        );
        assert_eq!(text, Ok("new base\n\ntail".to_owned()));
        let ids: Vec<String> = effective(vec![
            section("x", 0, "1"),
            section("y", 0, "2"),
            section("x", 0, "3"),
        ])
        .into_iter()
        .map(|s| format!("{}={}", s.id, s.text))
        .collect();
        assert_eq!(ids, vec!["x=3", "y=2"], "the replacement keeps the slot");
    }

    #[test]
    fn loop14_two_complete_sections_conflict() {
        let err = assemble(
            vec![
                complete("one", 0, "a"),
                section("plain", 1, "b"),
                complete("two", 2, "c"),
            ],
            &Variables::new(),
        )
        .unwrap_err();
        assert_eq!(err.code().code(), "PROMPT_CONFLICT");
        assert_eq!(err, PromptError::Conflict(vec!["one".into(), "two".into()]));
        assert!(err.message().contains("one, two"));
    }

    #[test]
    fn loop14_a_replaced_complete_section_no_longer_counts() {
        let text = assemble(
            vec![
                complete("one", 0, "a"),
                complete("two", 2, "c"),
                section("two", 2, "c, not complete any more"),
            ],
            &Variables::new(),
        );
        assert_eq!(text, Ok("a".to_owned()));
    }

    #[test]
    fn loop14_one_complete_section_is_the_whole_prompt() {
        let text = assemble(
            vec![
                section("base", 0, "base"),
                complete("whole", 9, "only me in {{cwd}}"),
                section("extra", 10, "extra"),
            ],
            &vars(&[("cwd", "/w")]),
        );
        assert_eq!(text, Ok("only me in /w".to_owned()));
    }

    #[test]
    fn loop14_variables_are_interpolated_and_unknown_names_stay() {
        let v = vars(&[("cwd", "/repo"), ("tools", "a, b"), ("x", "{{cwd}}")]);
        assert_eq!(
            interpolate("in {{cwd}} with {{ tools }}; {{nope}} {{x}} {{}} {{cwd", &v),
            "in /repo with a, b; {{nope}} {{cwd}} {{}} {{cwd"
        );
        assert_eq!(interpolate("{{{cwd}}}", &v), "{/repo}");
        assert_eq!(interpolate("{{bad name}} ok", &v), "{{bad name}} ok");
    }

    #[test]
    fn loop14_blank_sections_are_left_out_and_text_is_trimmed() {
        let text = assemble(
            vec![
                section("a", 0, "\n a \n"),
                section("b", 1, "  "),
                section("c", 2, "c"),
            ],
            &Variables::new(),
        );
        assert_eq!(text, Ok("a\n\nc".to_owned()));
        assert_eq!(assemble(vec![], &Variables::new()), Ok(String::new()));
    }

    #[test]
    fn loop14_assembly_is_deterministic() {
        let v = builtins("/w", &["read_file".into(), "shell".into()], 1_700_000_000);
        let a = assemble(default_sections(), &v);
        let b = assemble(
            default_sections(),
            &builtins("/w", &["read_file".into(), "shell".into()], 1_700_000_000),
        );
        assert_eq!(a, b);
    }

    #[test]
    fn default_prompt_introduces_keel_and_names_the_tools() {
        let v = builtins("/work/p", &["read_file".into(), "shell".into()], 0);
        let text = assemble(default_sections(), &v).unwrap();
        assert!(text.starts_with("You are keel, a careful coding agent working in /work/p."));
        assert!(text.contains("(read_file, shell)"));
        assert!(text.ends_with("finish with a short summary of what you did."));
        assert!(!text.contains("{{"));
        let none = assemble(default_sections(), &builtins("/w", &[], 0)).unwrap();
        assert!(none.contains("(none)"));
    }

    #[test]
    fn builtins_name_cwd_date_os_tools() {
        let v = builtins("/w", &["a".into(), "b".into()], 0);
        assert_eq!(v.keys().collect::<Vec<_>>(), ["cwd", "date", "os", "tools"]);
        assert_eq!(v["date"], "1970-01-01");
        assert_eq!(v["os"], std::env::consts::OS);
        assert_eq!(v["tools"], "a, b");
    }

    #[test]
    fn utc_dates_cover_leap_days_and_eras() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(86_399), "1970-01-01");
        assert_eq!(utc_date(951_782_400), "2000-02-29");
        assert_eq!(utc_date(1_709_164_800), "2024-02-29");
        assert_eq!(utc_date(1_709_251_200), "2024-03-01");
        assert_eq!(utc_date(4_102_444_800), "2100-01-01");
        assert_eq!(utc_date(-86_400), "1969-12-31");
        assert_eq!(utc_date(1_735_689_599), "2024-12-31");
    }
}
