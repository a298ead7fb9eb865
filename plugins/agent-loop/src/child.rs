//! A child agent's start (issue 16, SES-13/SUB-05): the session it runs in and the settings of
//! its named profile. A spawn is a fresh session whose header records the lineage; a fork is
//! seeded with the parent's events through its last `turn/end`, so the child sees every
//! completed turn and never the parent's open one (the call that started it).
//!
//! Kept apart from `lib.rs` because it is the only place the loop knows it can have a parent;
//! the turn itself only reads the agent's [`AgentOverrides`].

use keel_plugin_api::prelude::*;
use keel_plugin_api::services::agent::{AgentOverrides, ChildMode, CreateAgent};
use keel_plugin_api::services::llm::ModelTool;
use keel_plugin_api::services::session::{
    CreateSession, EventInput, EventRecord, ForkAt, ForkMark, ForkSession, SessionHeader,
    SessionRef,
};
use keel_plugin_api::services::tools::ToolDefinition;

use crate::agent::{LogState, last_message_number};
use crate::seams::Seams;

/// Creates the session of a new agent (root or child) and says where its log stands.
///
/// # Errors
/// The session row's refusals (`SESSION_EXISTS`, a fork boundary inside an open turn, …).
pub async fn create_session(seams: &Seams, a: &CreateAgent) -> Result<(String, LogState)> {
    let sessions = seams.sessions();
    let fresh = LogState {
        header_reason: "initial",
        ..LogState::default()
    };
    let Some(lineage) = &a.lineage else {
        let create = CreateSession {
            cwd: a.cwd.clone(),
            id: a.session_id.clone(),
            ephemeral: a.ephemeral,
            profile: a.profile.clone(),
            ..CreateSession::default()
        };
        return Ok((sessions.create(create).await?.session_id, fresh));
    };
    match lineage.mode {
        ChildMode::Spawn => {
            let create = CreateSession {
                cwd: a.cwd.clone(),
                id: a.session_id.clone(),
                ephemeral: a.ephemeral,
                profile: a.profile.clone(),
                origin: Some(lineage.origin.clone()),
                delegation_depth: lineage.depth,
                parent_session: Some(lineage.parent_session.clone()),
                parent_call_id: lineage.parent_call_id.clone(),
            };
            Ok((sessions.create(create).await?.session_id, fresh))
        }
        ChildMode::Fork => {
            let forked = sessions
                .fork(ForkSession {
                    session_id: lineage.parent_session.clone(),
                    at: Some(ForkAt::Mark(ForkMark::LastTurnEnd)),
                    child_id: a.session_id.clone(),
                    origin: Some(lineage.origin.clone()),
                    delegation_depth: Some(lineage.depth),
                    parent_call_id: lineage.parent_call_id.clone(),
                })
                .await?;
            let id = forked.session_id;
            let seed = sessions.load(SessionRef::new(&id)).await?.events;
            sessions.open(SessionRef::new(&id)).await?;
            let log = LogState {
                next_turn: seed.iter().filter(|e| e.kind == "turn/start").count() as u64,
                last_message: last_message_number(&id, &seed),
                ..fresh
            };
            Ok((id, log))
        }
    }
}

/// The event that records a child's own settings in its log, so `keel resume CHILD` runs it
/// with the same model row, tool set and budget (ignorable: a reader that does not know it
/// loses nothing it needs).
pub const OVERRIDES_EVENT: &str = "agent/overrides";

/// Logs a child's settings at its start (nothing for an agent without any).
///
/// # Errors
/// The session refused the append.
pub async fn record_overrides(
    seams: &Seams,
    session_id: &str,
    overrides: &AgentOverrides,
) -> Result<()> {
    if *overrides == AgentOverrides::default() {
        return Ok(());
    }
    let event = EventInput::new(OVERRIDES_EVENT, overrides)?.ignorable();
    seams.append(session_id, vec![event]).await.map(drop)
}

/// The settings a resumed agent runs with: the last ones its log recorded, and whether it
/// is a child (a delegated session's header names its origin). A record that does not parse
/// (written by another keel) is ignored with a warning: the child then runs with the row's
/// settings, never with someone else's.
pub fn recorded(header: &SessionHeader, events: &[EventRecord]) -> (AgentOverrides, bool) {
    let child = header.origin.is_some();
    let overrides = events
        .iter()
        .rev()
        .find(|e| e.kind == OVERRIDES_EVENT)
        .and_then(|e| match serde_json::from_value(e.data.clone()) {
            Ok(o) => Some(o),
            Err(err) => {
                tracing::warn!(session = %header.id, seq = e.seq, "agent/overrides unreadable: {err}");
                None
            }
        })
        .unwrap_or_default();
    (overrides, child)
}

/// The tools an agent is offered — a child's named tool set, else every tool (but the
/// child-only ones for a root agent) — and the set its batches are held to: only a named tool
/// set. A root agent's batches carry `child: false` instead, which refuses the child-only
/// tools while a tool registered during the turn (an MCP server's list change) stays callable.
pub fn offered(
    tools: Vec<ToolDefinition>,
    overrides: &AgentOverrides,
    child: bool,
) -> (Vec<ModelTool>, Option<Vec<String>>) {
    let kept: Vec<ToolDefinition> = tools
        .into_iter()
        .filter(|t| match &overrides.tools {
            Some(names) => names.contains(&t.name),
            None => child || !t.child_only,
        })
        .collect();
    let allowed = overrides
        .tools
        .is_some()
        .then(|| kept.iter().map(|t| t.name.clone()).collect());
    let model = kept
        .into_iter()
        .map(|d| ModelTool {
            name: d.name,
            description: d.description,
            parameters: d.parameters,
        })
        .collect();
    (model, allowed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(name: &str, child_only: bool) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: String::new(),
            parameters: serde_json::json!({"type": "object"}),
            parallel_safe: false,
            mutating: false,
            child_only,
        }
    }

    fn names(tools: &[ModelTool]) -> Vec<&str> {
        tools.iter().map(|t| t.name.as_str()).collect()
    }

    #[test]
    fn a_root_agent_is_not_offered_child_only_tools() {
        let tools = vec![def("read_file", false), def("memory_write", true)];
        let (model, allowed) = offered(tools.clone(), &AgentOverrides::default(), false);
        assert_eq!(names(&model), ["read_file"]);
        assert_eq!(
            allowed, None,
            "refused by the batch's child flag, not a list"
        );
        let (model, allowed) = offered(tools, &AgentOverrides::default(), true);
        assert_eq!(names(&model), ["read_file", "memory_write"]);
        assert_eq!(
            allowed, None,
            "a child without a tool set may call everything"
        );
    }

    fn record(seq: u64, kind: &str, data: serde_json::Value) -> EventRecord {
        EventRecord {
            seq,
            time: 0,
            kind: kind.into(),
            data,
            ignorable: true,
            surface_op: None,
            source_event_seqs: None,
        }
    }

    // Issue 16: `keel resume CHILD` keeps the child's named profile (its tool set and model).
    #[test]
    fn a_resumed_child_runs_with_the_settings_its_log_recorded() {
        let mut header = SessionHeader {
            kind: keel_plugin_api::services::session::HeaderKind::Session,
            version: 0,
            id: "kid".into(),
            created_at: 0,
            cwd: "/w".into(),
            parent_session: Some("p".into()),
            seed_length: None,
            parent_call_id: Some("c1".into()),
            origin: Some("subagent".into()),
            delegation_depth: 1,
        };
        let events = vec![
            record(
                0,
                OVERRIDES_EVENT,
                serde_json::json!({"tools": ["read_file"], "model": "m1"}),
            ),
            record(1, "turn/start", serde_json::json!({"turn": 0})),
            record(2, OVERRIDES_EVENT, serde_json::json!({"tools": ["grep"]})),
        ];
        let (o, child) = recorded(&header, &events);
        assert!(child);
        assert_eq!(
            o.tools,
            Some(vec!["grep".to_owned()]),
            "the last record wins"
        );
        assert_eq!(o.model, None);
        let broken = vec![record(0, OVERRIDES_EVENT, serde_json::json!({"tools": 7}))];
        assert_eq!(recorded(&header, &broken).0, AgentOverrides::default());
        header.origin = None;
        assert!(!recorded(&header, &[]).1, "a root session is not a child");
    }

    #[test]
    fn a_named_tool_set_is_what_the_child_sees_and_may_call() {
        let tools = vec![
            def("read_file", false),
            def("shell", false),
            def("grep", false),
        ];
        let overrides = AgentOverrides {
            tools: Some(vec!["grep".into(), "read_file".into(), "missing".into()]),
            ..AgentOverrides::default()
        };
        let (model, allowed) = offered(tools, &overrides, true);
        assert_eq!(names(&model), ["read_file", "grep"]);
        assert_eq!(
            allowed,
            Some(vec!["read_file".to_owned(), "grep".to_owned()])
        );
    }
}
