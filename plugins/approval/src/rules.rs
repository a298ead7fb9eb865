//! Approval rules: `allow`, `ask` and `deny` lists of `tool` or `tool(pattern)` entries, e.g.
//! `shell(git status*)`, `write_file(src/**)`, `read_file`. The tool part is a glob over the
//! tool name; the pattern is a glob over the call's subject: `shell`'s `command`, the fs tools'
//! `path` (or `glob`/`grep`'s `pattern`), else the arguments as compact JSON. `*` also matches
//! `/`, so `git status*` covers `git status --short src/`.
//!
//! Precedence, strictest first: a downstream deny, a deny rule, a downstream ask, an ask rule,
//! an allow rule, the row's mode. A rule never loosens what another pre-execute listener
//! decided (TOOL-02); an allow rule only spares an ask the *mode* would have made.

use globset::{GlobBuilder, GlobMatcher};
use serde::Deserialize;
use serde_json::Value;

use crate::policy::{CallView, Decision};

/// The row config's `rules` table.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RulesConfig {
    /// Run without asking.
    #[serde(default)]
    #[schemars(inner(length(min = 1)))]
    pub allow: Vec<String>,
    /// Ask first.
    #[serde(default)]
    #[schemars(inner(length(min = 1)))]
    pub ask: Vec<String>,
    /// Never run.
    #[serde(default)]
    #[schemars(inner(length(min = 1)))]
    pub deny: Vec<String>,
}

#[derive(Debug, Clone)]
struct Rule {
    text: String,
    tool: GlobMatcher,
    pattern: Option<GlobMatcher>,
}

/// The compiled rules.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    allow: Vec<Rule>,
    ask: Vec<Rule>,
    deny: Vec<Rule>,
}

fn glob(text: &str) -> Result<GlobMatcher, String> {
    GlobBuilder::new(text)
        .literal_separator(false)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| e.to_string())
}

fn parse_rule(list: &str, text: &str) -> Result<Rule, String> {
    let bad = |why: String| format!("approval rule {list}[{text:?}]: {why}");
    let (tool, pattern) = match text.find('(') {
        None => (text, None),
        Some(open) => {
            let Some(inner) = text[open + 1..].strip_suffix(')') else {
                return Err(bad("a pattern must end with ')'".to_owned()));
            };
            (&text[..open], Some(inner))
        }
    };
    let tool = tool.trim();
    if tool.is_empty() {
        return Err(bad("the tool name is empty".to_owned()));
    }
    Ok(Rule {
        text: text.to_owned(),
        tool: glob(tool).map_err(bad)?,
        pattern: pattern.map(glob).transpose().map_err(bad)?,
    })
}

/// What a pattern is matched against.
fn subject(call: &CallView<'_>) -> String {
    let field = |k: &str| call.args.get(k).and_then(Value::as_str).map(str::to_owned);
    let primary = match call.name {
        "shell" => field("command"),
        "read_file" | "write_file" | "edit_file" | "list_dir" => field("path"),
        "glob" | "grep" => field("pattern"),
        _ => None,
    };
    primary.unwrap_or_else(|| call.args.to_string())
}

impl Rule {
    fn matches(&self, call: &CallView<'_>, subject: &str) -> bool {
        self.tool.is_match(call.name) && self.pattern.as_ref().is_none_or(|p| p.is_match(subject))
    }
}

impl Rules {
    /// Compiles the config.
    ///
    /// # Errors
    /// A sentence naming the list and the rule that does not parse.
    pub fn parse(config: &RulesConfig) -> Result<Rules, String> {
        let compile = |list: &str, items: &[String]| -> Result<Vec<Rule>, String> {
            items.iter().map(|t| parse_rule(list, t)).collect()
        };
        Ok(Rules {
            allow: compile("allow", &config.allow)?,
            ask: compile("ask", &config.ask)?,
            deny: compile("deny", &config.deny)?,
        })
    }

    /// The decision for `call`, given what the rest of the chain decided (`downstream`) and
    /// what the row's mode alone would make of it (`by_mode`).
    pub fn decide(
        &self,
        call: &CallView<'_>,
        downstream: &Decision,
        by_mode: Decision,
    ) -> Decision {
        if matches!(downstream, Decision::Deny { .. }) {
            return downstream.clone();
        }
        let subject = subject(call);
        let first = |rules: &[Rule]| rules.iter().find(|r| r.matches(call, &subject)).cloned();
        if let Some(rule) = first(&self.deny) {
            return Decision::Deny {
                reason: format!("denied by the approval rule deny[{:?}]", rule.text),
            };
        }
        if matches!(downstream, Decision::Ask { .. }) {
            return downstream.clone();
        }
        if let Some(rule) = first(&self.ask) {
            return Decision::Ask {
                reason: Some(format!("the approval rule ask[{:?}] matched", rule.text)),
            };
        }
        if first(&self.allow).is_some() {
            return Decision::Allow;
        }
        by_mode
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(allow: &[&str], ask: &[&str], deny: &[&str]) -> Rules {
        let v = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect();
        Rules::parse(&RulesConfig {
            allow: v(allow),
            ask: v(ask),
            deny: v(deny),
        })
        .unwrap()
    }

    fn call<'a>(name: &'a str, args: &'a Value) -> CallView<'a> {
        CallView {
            name,
            args,
            mutating: true,
        }
    }

    const ASK_BY_MODE: fn() -> Decision = || Decision::Ask {
        reason: Some("mode".into()),
    };

    #[test]
    fn deny_beats_ask_beats_allow() {
        let r = rules(
            &["shell(git *)"],
            &["shell(git push*)"],
            &["shell(git push --force*)"],
        );
        let status = json!({"command": "git status --short src/"});
        let push = json!({"command": "git push origin main"});
        let force = json!({"command": "git push --force origin main"});
        assert_eq!(
            r.decide(&call("shell", &status), &Decision::Allow, ASK_BY_MODE()),
            Decision::Allow
        );
        assert!(matches!(
            r.decide(&call("shell", &push), &Decision::Allow, Decision::Allow),
            Decision::Ask { .. }
        ));
        let d = r.decide(&call("shell", &force), &Decision::Allow, Decision::Allow);
        assert!(
            matches!(&d, Decision::Deny { reason } if reason.contains("git push --force*")),
            "{d:?}"
        );
    }

    #[test]
    fn fs_paths_and_bare_tool_names_match() {
        let r = rules(&["write_file(src/**)", "read_file"], &[], &["*(**/.env)"]);
        let src = json!({"path": "src/lib/a.rs", "content": "x"});
        let other = json!({"path": "docs/a.md", "content": "x"});
        let env = json!({"path": "config/.env"});
        assert_eq!(
            r.decide(&call("write_file", &src), &Decision::Allow, ASK_BY_MODE()),
            Decision::Allow
        );
        assert_eq!(
            r.decide(&call("write_file", &other), &Decision::Allow, ASK_BY_MODE()),
            ASK_BY_MODE()
        );
        assert_eq!(
            r.decide(&call("read_file", &other), &Decision::Allow, ASK_BY_MODE()),
            Decision::Allow
        );
        assert!(matches!(
            r.decide(&call("read_file", &env), &Decision::Allow, Decision::Allow),
            Decision::Deny { .. }
        ));
    }

    #[test]
    fn tool02_rules_never_loosen_the_chain() {
        let r = rules(&["*"], &[], &[]);
        let args = json!({});
        let deny = Decision::Deny {
            reason: "sandbox".into(),
        };
        let ask = Decision::Ask { reason: None };
        assert_eq!(
            r.decide(&call("shell", &args), &deny, Decision::Allow),
            deny
        );
        assert_eq!(r.decide(&call("shell", &args), &ask, Decision::Allow), ask);
    }

    #[test]
    fn bad_rules_name_the_list_and_the_rule() {
        let e = Rules::parse(&RulesConfig {
            deny: vec!["shell(rm *".into()],
            ..RulesConfig::default()
        })
        .unwrap_err();
        assert!(e.contains("deny") && e.contains("shell(rm *"), "{e}");
        let e = Rules::parse(&RulesConfig {
            allow: vec!["(x)".into()],
            ..RulesConfig::default()
        })
        .unwrap_err();
        assert!(e.contains("empty"), "{e}");
    }
}
