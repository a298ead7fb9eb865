//! The approval seam answered by the editor: an `approval/answer` question for a session an
//! ACP client opened becomes `session/request_permission` with four options, and the chosen
//! option the keel answer (TOOL-03; the approval row writes the audit pair as always).
//!
//! keel's outcomes have no "always": "allow always" and "reject always" are remembered here,
//! per session and tool name, and later questions for that tool are answered without asking
//! the client (allowed once, or rejected). They last as long as the connection.

use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    SessionId, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
};
use keel_plugin_api::events::approval::ApprovalQuestion;
use keel_plugin_api::services::approval::{ApprovalOutcome, AskAnswer};

use crate::map;
use crate::state::{Always, Shared};

/// Option ids, as the client sends one back.
pub const ALLOW_ONCE: &str = "allow-once";
/// See [`ALLOW_ONCE`].
pub const ALLOW_ALWAYS: &str = "allow-always";
/// See [`ALLOW_ONCE`].
pub const REJECT_ONCE: &str = "reject-once";
/// See [`ALLOW_ONCE`].
pub const REJECT_ALWAYS: &str = "reject-always";

/// The permission request for `q` (its tool call as an update of the call the client saw).
pub fn request(q: &ApprovalQuestion, cwd: &std::path::Path) -> RequestPermissionRequest {
    let r = &q.request;
    let fields = ToolCallUpdateFields::new()
        .title(map::title(&r.tool_name, &r.args))
        .kind(map::kind_of(&r.tool_name))
        .status(ToolCallStatus::Pending)
        .locations(map::locations(&r.args, cwd))
        .raw_input(r.args.clone());
    let option = |id: &str, name: &str, kind| PermissionOption::new(id.to_owned(), name, kind);
    RequestPermissionRequest::new(
        SessionId::new(r.session_id.as_str()),
        ToolCallUpdate::new(r.call_id.clone(), fields),
        vec![
            option(ALLOW_ONCE, "Allow once", PermissionOptionKind::AllowOnce),
            option(
                ALLOW_ALWAYS,
                &format!("Always allow {}", r.tool_name),
                PermissionOptionKind::AllowAlways,
            ),
            option(REJECT_ONCE, "Reject", PermissionOptionKind::RejectOnce),
            option(
                REJECT_ALWAYS,
                &format!("Always reject {}", r.tool_name),
                PermissionOptionKind::RejectAlways,
            ),
        ],
    )
}

/// The keel outcome for the client's answer, and the "always" it asks to remember.
pub fn outcome(answer: &RequestPermissionOutcome) -> (ApprovalOutcome, Option<Always>) {
    match answer {
        RequestPermissionOutcome::Selected(s) => match &*s.option_id.0 {
            ALLOW_ONCE => (ApprovalOutcome::AllowedOnce, None),
            ALLOW_ALWAYS => (ApprovalOutcome::AllowedOnce, Some(Always::Allow)),
            REJECT_ALWAYS => (ApprovalOutcome::Rejected, Some(Always::Reject)),
            // `reject-once`, or an id we never offered: never run on a guess.
            _ => (ApprovalOutcome::Rejected, None),
        },
        _ => (ApprovalOutcome::Cancelled, None),
    }
}

/// Answers `q` when its session is an ACP client's: from a remembered "always", else by
/// asking the client. `None`: not ours (another approver, or `unavailable`, decides).
pub async fn answer(shared: &Shared, q: ApprovalQuestion) -> Option<AskAnswer> {
    let tracked = shared.session(&q.request.session_id)?;
    let connection = shared.connection()?;
    let outcome = match tracked.always(&q.request.tool_name) {
        Some(Always::Allow) => ApprovalOutcome::AllowedOnce,
        Some(Always::Reject) => ApprovalOutcome::Rejected,
        None => {
            let asked = connection
                .send_request(request(&q, &tracked.cwd))
                .block_task()
                .await;
            match asked {
                Ok(response) => {
                    let (outcome, always) = self::outcome(&response.outcome);
                    if let Some(always) = always {
                        tracked.set_always(&q.request.tool_name, always);
                    }
                    outcome
                }
                Err(e) => {
                    tracing::warn!(session = %q.request.session_id, "permission request failed: {e}");
                    ApprovalOutcome::Cancelled
                }
            }
        }
    };
    Some(AskAnswer { outcome })
}
