//! The approval policy: what the approval row adds to a `tools/pre-execute` decision. It is one
//! pure function, [`decide`], so the rules issue 5 brings (allow/ask/deny by tool name and
//! argument pattern) land in one place, with everything they need already in [`CallView`].
//!
//! The policy only tightens (TOOL-02): a downstream deny stays a deny, a downstream ask stays an
//! ask; only an allow can become an ask.

use serde_json::Value;

/// `mode` of the approval row (and of a per-session override).
pub use keel_plugin_api::services::approval::ApprovalMode as Mode;

/// A `tools/pre-execute` decision (the event's output shape, declared in plugin-api).
pub use keel_plugin_api::services::tools::PreDecision as Decision;

/// What the policy may look at.
#[derive(Debug, Clone, Copy)]
pub struct CallView<'a> {
    /// Tool name.
    pub name: &'a str,
    /// Parsed arguments (an object; `Null` when they could not be read).
    pub args: &'a Value,
    /// The tool changes the world.
    pub mutating: bool,
}

/// The approval policy: `downstream` is what the rest of the pre-execute chain decided.
pub fn decide(mode: Mode, call: &CallView<'_>, downstream: Decision) -> Decision {
    match downstream {
        Decision::Deny { .. } | Decision::Ask { .. } => downstream,
        Decision::Allow => match mode {
            Mode::Ask if call.mutating => Decision::Ask {
                reason: Some(format!("{} changes the workspace", call.name)),
            },
            Mode::Ask | Mode::Never => Decision::Allow,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn view<'a>(name: &'a str, mutating: bool, args: &'a Value) -> CallView<'a> {
        CallView {
            name,
            args,
            mutating,
        }
    }

    #[test]
    fn ask_mode_asks_before_mutating_tools_only() {
        let args = json!({"path": "a"});
        assert_eq!(
            decide(Mode::Ask, &view("write_file", true, &args), Decision::Allow),
            Decision::Ask {
                reason: Some("write_file changes the workspace".into())
            }
        );
        assert_eq!(
            decide(Mode::Ask, &view("read_file", false, &args), Decision::Allow),
            Decision::Allow
        );
    }

    #[test]
    fn never_mode_runs_calls_without_asking() {
        let args = json!({});
        assert_eq!(
            decide(Mode::Never, &view("shell", true, &args), Decision::Allow),
            Decision::Allow
        );
    }

    #[test]
    fn tool02_a_downstream_deny_or_ask_is_never_loosened() {
        let args = json!({});
        let deny = Decision::Deny {
            reason: "sandbox".into(),
        };
        let ask = Decision::Ask { reason: None };
        for mode in [Mode::Never, Mode::Ask] {
            for mutating in [false, true] {
                let v = view("shell", mutating, &args);
                assert_eq!(decide(mode, &v, deny.clone()), deny);
                assert_eq!(decide(mode, &v, ask.clone()), ask);
            }
        }
    }

    #[test]
    fn decisions_and_modes_have_the_documented_wire_shapes() {
        let ask = Decision::Ask {
            reason: Some("x".into()),
        };
        assert_eq!(
            serde_json::to_value(&ask).unwrap(),
            json!({"kind": "ask", "reason": "x"})
        );
        assert_eq!(
            serde_json::to_value(Decision::Ask { reason: None }).unwrap(),
            json!({"kind": "ask"})
        );
        assert_eq!(
            serde_json::from_value::<Decision>(json!({"kind": "deny", "reason": "r"})).unwrap(),
            Decision::Deny { reason: "r".into() }
        );
        assert_eq!("never".parse::<Mode>(), Ok(Mode::Never));
        assert_eq!("ask".parse::<Mode>(), Ok(Mode::Ask));
        assert!("sometimes".parse::<Mode>().is_err());
        assert_eq!(Mode::Ask.to_string(), "ask");
    }
}
