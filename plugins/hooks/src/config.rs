//! The `hooks` row's config and the hook table both it and Claude Code's settings files give.
//!
//! The table has Claude Code's shape — `{ EVENT = [{ matcher, hooks = [{ type = "command",
//! command, timeout }] }] }` — so a team's `.claude/settings.json` works as it is and a profile
//! row writes the same thing in TOML. Everything is checked before any request: a hook of the
//! wrong shape, an empty command or a matcher that is not a regular expression refuses the run
//! with one line naming the row or the file ([`HookSet::build`]).

use std::collections::BTreeMap;
use std::time::Duration;

use regex::Regex;
use schemars::JsonSchema;
use serde::Deserialize;

/// The row config.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HooksConfig {
    /// Claude Code's `hooks` object, in TOML: event → matcher groups.
    #[serde(default)]
    pub hooks: HookTable,
    /// Also load the workspace's `.claude/settings.json` and `.claude/settings.local.json`
    /// (each only when the project trust covers it).
    #[serde(default)]
    pub claude_settings: bool,
    /// Seconds a hook without its own `timeout` may run (Claude Code's default, 60).
    #[serde(default = "default_timeout")]
    #[schemars(range(min = 1))]
    pub default_timeout: u64,
    /// What a PreToolUse hook that runs past its timeout means for the call.
    #[serde(default)]
    pub on_timeout: OnTimeout,
    /// How many times Stop hooks may continue one turn before keel lets it end.
    #[serde(default = "default_max_stop")]
    pub max_stop_continuations: u32,
    /// Milliseconds between SIGTERM and SIGKILL for a hook's process group at its timeout.
    #[serde(default = "default_grace_ms")]
    pub grace_ms: u64,
    /// Names passed through from keel's environment to every hook beside the base allow-list
    /// (`HOME`, `PATH`, …; an entry ending in `*` is a prefix). A `KEEL_*`, credential-like or
    /// held credential name never passes (issue 23 item 1).
    #[serde(default)]
    #[schemars(inner(regex(pattern = r"^[A-Za-z_][A-Za-z0-9_]*\*?$")))]
    pub pass_env: Vec<String>,
}

fn default_timeout() -> u64 {
    60
}
fn default_max_stop() -> u32 {
    3
}
fn default_grace_ms() -> u64 {
    1_000
}

/// `on_timeout`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnTimeout {
    /// The call proceeds (a timeout is a non-blocking error, as in Claude Code).
    #[default]
    Proceed,
    /// The call is denied.
    Deny,
}

/// The events keel runs hooks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Event {
    /// Before a tool call's policy (`tools/rewrite` + `tools/pre-execute`).
    PreToolUse,
    /// After a successful tool body (`tools/post-execute`).
    PostToolUse,
    /// A prompt is about to enter a step (`agent/pre-step`).
    UserPromptSubmit,
    /// The turn would stop (`agent/turn-stopping`).
    Stop,
    /// The session's first step in this process (`session/created`, then `agent/pre-step`).
    SessionStart,
    /// A compaction is about to run (`context/compact`).
    PreCompact,
}

impl Event {
    /// Every event, in table order.
    pub const ALL: [Event; 6] = [
        Event::PreToolUse,
        Event::PostToolUse,
        Event::UserPromptSubmit,
        Event::Stop,
        Event::SessionStart,
        Event::PreCompact,
    ];

    /// Claude Code's name for it (`hook_event_name`).
    pub fn name(self) -> &'static str {
        match self {
            Event::PreToolUse => "PreToolUse",
            Event::PostToolUse => "PostToolUse",
            Event::UserPromptSubmit => "UserPromptSubmit",
            Event::Stop => "Stop",
            Event::SessionStart => "SessionStart",
            Event::PreCompact => "PreCompact",
        }
    }

    /// The event named `name`, when keel runs it.
    pub fn parse(name: &str) -> Option<Event> {
        Event::ALL.into_iter().find(|e| e.name() == name)
    }
}

/// The hook table: event → matcher groups (Claude Code's `hooks` object).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HookTable {
    /// Before a tool call; the matcher is over the tool name.
    #[serde(rename = "PreToolUse", default)]
    pub pre_tool_use: Vec<MatcherGroup>,
    /// After a tool call; the matcher is over the tool name.
    #[serde(rename = "PostToolUse", default)]
    pub post_tool_use: Vec<MatcherGroup>,
    /// Before a prompt enters the conversation.
    #[serde(rename = "UserPromptSubmit", default)]
    pub user_prompt_submit: Vec<MatcherGroup>,
    /// When the turn would stop.
    #[serde(rename = "Stop", default)]
    pub stop: Vec<MatcherGroup>,
    /// When a session starts or resumes; the matcher is over `startup` / `resume`.
    #[serde(rename = "SessionStart", default)]
    pub session_start: Vec<MatcherGroup>,
    /// Before a compaction; the matcher is over the trigger (`auto`).
    #[serde(rename = "PreCompact", default)]
    pub pre_compact: Vec<MatcherGroup>,
}

impl HookTable {
    fn groups(&self, event: Event) -> &[MatcherGroup] {
        match event {
            Event::PreToolUse => &self.pre_tool_use,
            Event::PostToolUse => &self.post_tool_use,
            Event::UserPromptSubmit => &self.user_prompt_submit,
            Event::Stop => &self.stop,
            Event::SessionStart => &self.session_start,
            Event::PreCompact => &self.pre_compact,
        }
    }
}

/// One matcher and its commands.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MatcherGroup {
    /// Empty or `*`: everything; otherwise a regular expression that must match the whole
    /// subject (`shell|write_file`, `mcp__everything__.*`).
    #[serde(default)]
    pub matcher: String,
    /// The commands to run.
    pub hooks: Vec<HookEntry>,
}

/// One command hook.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HookEntry {
    /// Only `"command"` (Claude Code's prompt and agent hooks are not supported).
    #[serde(rename = "type")]
    pub kind: HookType,
    /// The command line, run with `bash -c` in the session's working directory.
    pub command: String,
    /// Seconds before it is killed (default: the row's `default_timeout`).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub timeout: Option<u64>,
    /// Claude Code's spinner text; accepted and unused.
    #[serde(default, rename = "statusMessage")]
    pub status_message: Option<String>,
}

/// `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HookType {
    /// A shell command.
    Command,
}

/// One runnable hook.
#[derive(Debug, Clone)]
pub struct Hook {
    /// Its event.
    pub event: Event,
    /// The matcher as written.
    pub matcher: String,
    /// The compiled matcher (`None`: everything).
    regex: Option<Regex>,
    /// The command line.
    pub command: String,
    /// Its timeout.
    pub timeout: Duration,
    /// Where it came from: `row 'hooks'` or a settings file.
    pub source: String,
}

impl Hook {
    /// Whether the hook applies to a subject known by `names` (a tool's keel name and its
    /// Claude Code names, a SessionStart source, a PreCompact trigger; none for events without
    /// a subject): the matcher must match one of them whole.
    pub fn matches(&self, names: &[&str]) -> bool {
        match &self.regex {
            None => true,
            Some(_) if names.is_empty() => true,
            Some(re) => names.iter().any(|n| re.is_match(n)),
        }
    }

    /// Whether the matcher is a pattern (not empty or `*`).
    pub fn is_pattern(&self) -> bool {
        self.regex.is_some()
    }
}

/// Every hook keel runs, by event, in the order they were given.
#[derive(Debug, Clone, Default)]
pub struct HookSet {
    hooks: BTreeMap<Event, Vec<Hook>>,
}

impl HookSet {
    /// Adds `table`'s hooks from `source`; `default_timeout` for hooks without their own.
    ///
    /// # Errors
    /// One line naming `source`, the event, the group and what is wrong.
    pub fn add(
        &mut self,
        table: &HookTable,
        source: &str,
        default_timeout: u64,
    ) -> Result<(), String> {
        for event in Event::ALL {
            for (g, group) in table.groups(event).iter().enumerate() {
                let at = format!("{source}: hooks.{}[{g}]", event.name());
                let regex = compile(&group.matcher).map_err(|e| format!("{at}.matcher: {e}"))?;
                for (h, entry) in group.hooks.iter().enumerate() {
                    if entry.command.trim().is_empty() {
                        return Err(format!("{at}.hooks[{h}].command is empty"));
                    }
                    let secs = entry.timeout.unwrap_or(default_timeout);
                    if secs == 0 {
                        return Err(format!("{at}.hooks[{h}].timeout must be at least 1 second"));
                    }
                    let hook = Hook {
                        event,
                        matcher: group.matcher.clone(),
                        regex: regex.clone(),
                        command: entry.command.clone(),
                        timeout: Duration::from_secs(secs),
                        source: source.to_owned(),
                    };
                    self.hooks.entry(event).or_default().push(hook);
                }
            }
        }
        Ok(())
    }

    /// The hooks of `event` that apply to the subject known by `names`, each command once (as
    /// Claude Code deduplicates identical commands).
    pub fn matching(&self, event: Event, names: &[&str]) -> Vec<Hook> {
        let mut out: Vec<Hook> = Vec::new();
        for h in self.hooks.get(&event).into_iter().flatten() {
            if h.matches(names) && !out.iter().any(|o| o.command == h.command) {
                out.push(h.clone());
            }
        }
        out
    }

    /// Whether any hook of `event` is configured.
    pub fn has(&self, event: Event) -> bool {
        self.hooks.get(&event).is_some_and(|v| !v.is_empty())
    }

    /// The tool hooks (PreToolUse, PostToolUse) whose matcher matches none of `tools` — each
    /// tool given by all its names — as `(source, event, matcher)`, each once.
    pub fn unmatched(&self, tools: &[Vec<&str>]) -> Vec<(String, Event, String)> {
        let mut out: Vec<(String, Event, String)> = Vec::new();
        for event in [Event::PreToolUse, Event::PostToolUse] {
            for h in self.hooks.get(&event).into_iter().flatten() {
                let dead = h.is_pattern() && !tools.iter().any(|names| h.matches(names));
                let seen = out
                    .iter()
                    .any(|(s, e, m)| s == &h.source && *e == event && m == &h.matcher);
                if dead && !seen {
                    out.push((h.source.clone(), event, h.matcher.clone()));
                }
            }
        }
        out
    }

    /// The longest timeout of any hook (bounds listener deadlines).
    pub fn longest(&self) -> Duration {
        self.hooks
            .values()
            .flatten()
            .map(|h| h.timeout)
            .max()
            .unwrap_or_default()
    }
}

/// `""` and `"*"` match everything; anything else is a regular expression over the whole
/// subject.
fn compile(matcher: &str) -> Result<Option<Regex>, String> {
    let m = matcher.trim();
    if m.is_empty() || m == "*" {
        return Ok(None);
    }
    Regex::new(&format!("^(?:{m})$")).map(Some).map_err(|e| {
        format!(
            "`{m}` is not a regular expression ({})",
            first_line(&e.to_string())
        )
    })
}

fn first_line(text: &str) -> String {
    text.lines().last().unwrap_or_default().trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn table(toml_json: serde_json::Value) -> HookTable {
        serde_json::from_value(toml_json).unwrap()
    }

    // Issue 15 item 3: Claude Code's matcher semantics over keel's tool names.
    #[test]
    fn matchers_follow_claude_code_over_keel_tool_names() {
        let t = table(serde_json::json!({"PreToolUse": [
            {"matcher": "shell|write_file", "hooks": [{"type": "command", "command": "a"}]},
            {"matcher": "mcp__everything__.*", "hooks": [{"type": "command", "command": "b"}]},
            {"matcher": "*", "hooks": [{"type": "command", "command": "c", "timeout": 5}]},
            {"hooks": [{"type": "command", "command": "a"}]},
        ]}));
        let mut set = HookSet::default();
        set.add(&t, "row 'hooks'", 60).unwrap();
        let names = |tool: &str| -> Vec<String> {
            set.matching(Event::PreToolUse, &[tool])
                .into_iter()
                .map(|h| h.command)
                .collect()
        };
        assert_eq!(names("shell"), ["a", "c"]);
        assert_eq!(
            names("shell_x"),
            ["c", "a"],
            "anchored: shell_x is not shell"
        );
        assert_eq!(names("mcp__everything__echo"), ["b", "c", "a"]);
        assert_eq!(names("read_file"), ["c", "a"]);
        assert!(set.has(Event::PreToolUse) && !set.has(Event::Stop));
        assert_eq!(set.longest(), Duration::from_secs(60));
    }

    // Issue 23 item 10: a matcher is tested against every name of a tool, and one that
    // matches no offered tool under any name is reported once, with where it came from.
    #[test]
    fn a_matcher_matches_any_name_and_a_dead_one_is_reported_once() {
        let t = table(serde_json::json!({
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": "a"}]},
                {"matcher": "NotebookEdit", "hooks": [{"type": "command", "command": "b"},
                    {"type": "command", "command": "c"}]},
                {"matcher": "", "hooks": [{"type": "command", "command": "d"}]}],
            "PostToolUse": [
                {"matcher": "Write|Edit|MultiEdit", "hooks": [{"type": "command", "command": "e"}]}]}));
        let mut set = HookSet::default();
        set.add(&t, ".claude/settings.json", 60).unwrap();
        let hits = |names: &[&str]| -> Vec<String> {
            set.matching(Event::PreToolUse, names)
                .into_iter()
                .map(|h| h.command)
                .collect()
        };
        assert_eq!(hits(&["shell", "Bash"]), ["a", "d"]);
        assert_eq!(hits(&["shell"]), ["d"]);
        let tools = vec![
            vec!["shell", "Bash"],
            vec!["edit_file", "Edit", "MultiEdit"],
        ];
        assert_eq!(
            set.unmatched(&tools),
            [(
                ".claude/settings.json".to_owned(),
                Event::PreToolUse,
                "NotebookEdit".to_owned()
            )]
        );
    }

    #[test]
    fn a_bad_matcher_or_an_empty_command_names_the_place() {
        let t = table(serde_json::json!({"Stop": [
            {"matcher": "(", "hooks": [{"type": "command", "command": "a"}]}]}));
        let e = HookSet::default()
            .add(&t, ".claude/settings.json", 60)
            .unwrap_err();
        assert!(
            e.starts_with(".claude/settings.json: hooks.Stop[0].matcher: `(`"),
            "{e}"
        );
        let t = table(serde_json::json!({"PostToolUse": [
            {"hooks": [{"type": "command", "command": " "}]}]}));
        let e = HookSet::default().add(&t, "row 'hooks'", 60).unwrap_err();
        assert_eq!(
            e,
            "row 'hooks': hooks.PostToolUse[0].hooks[0].command is empty"
        );
    }

    #[test]
    fn only_command_hooks_are_accepted() {
        let r: Result<HookTable, _> = serde_json::from_value(serde_json::json!({"Stop": [
            {"hooks": [{"type": "prompt", "command": "a"}]}]}));
        assert!(r.is_err());
    }
}
