//! The firewall's facts API (requirements SEC-04, SEC-06; ARCHITECTURE §9). Callers supply
//! only facts — a tool name, a path and its access, a host, a text — never a policy and never
//! a "trust me" flag; the firewall owns its policy and decides.
//!
//! One method hands the firewall data rather than asking it: [`RegisterCredential`], by which
//! the `credentials` row reports every value it resolves (issue 10 item 2), so the firewall
//! scrubs it like a secret from everything bound for the model, a log, a session or the
//! terminal. A registered credential is scrub-only: it has no alias, is never filled into a
//! tool argument and is never written to the secrets store.

use serde::{Deserialize, Serialize};

use crate::sdk::{CallHandle, Error, Result, Service};

/// The `keel.firewall` service; its methods are the [`FirewallMethod`]s.
#[derive(Debug, Clone, Copy)]
pub struct Firewall;

impl Service for Firewall {
    const NAME: &'static str = "keel.firewall";
    type Handle = CallHandle;
}

/// The methods of `keel.firewall`, with their argument and answer types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirewallMethod {
    /// `"check_tool"`: [`CheckTool`] → [`Verdict`].
    CheckTool,
    /// `"check_path"`: [`CheckPath`] → [`Verdict`].
    CheckPath,
    /// `"check_network"`: [`CheckNetwork`] → [`Verdict`].
    CheckNetwork,
    /// `"scan_content"`: [`ScanContent`] → [`Findings`].
    ScanContent,
    /// `"register_credential"`: [`RegisterCredential`] → [`Registered`].
    RegisterCredential,
}

impl FirewallMethod {
    /// Every method.
    pub const ALL: [FirewallMethod; 5] = [
        FirewallMethod::CheckTool,
        FirewallMethod::CheckPath,
        FirewallMethod::CheckNetwork,
        FirewallMethod::ScanContent,
        FirewallMethod::RegisterCredential,
    ];

    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            FirewallMethod::CheckTool => "check_tool",
            FirewallMethod::CheckPath => "check_path",
            FirewallMethod::CheckNetwork => "check_network",
            FirewallMethod::ScanContent => "scan_content",
            FirewallMethod::RegisterCredential => "register_credential",
        }
    }

    /// The method named `name`.
    ///
    /// # Errors
    /// `UNKNOWN_METHOD` naming it.
    pub fn parse(name: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|m| m.as_str() == name)
            .ok_or_else(|| {
                Error::new(
                    "UNKNOWN_METHOD",
                    format!("keel.firewall has no method '{name}'"),
                )
            })
    }
}

/// Method `check_tool`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckTool {
    /// Tool name.
    pub name: String,
}

/// How a path is about to be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PathAccess {
    /// Read or list.
    Read,
    /// Create, modify or delete (or run a command there).
    Write,
}

/// Method `check_path`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckPath {
    /// An absolute path (callers resolve relative ones against their working root).
    pub path: String,
    /// The intended access.
    pub access: PathAccess,
}

/// Method `check_network`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckNetwork {
    /// Host name or address, without scheme or port.
    pub host: String,
}

/// Method `scan_content`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanContent {
    /// The text to scan for secret values (and their simple encodings).
    pub text: String,
}

/// The answer of the `check_*` methods.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// The action may go ahead.
    pub allowed: bool,
    /// Why not (present when denied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The answer of `scan_content`: the aliases (`sec_NAME`) of the secrets found, and the
/// [`credential_marker`]s of the registered credentials found, never values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Findings {
    /// Aliases and markers, sorted, each once.
    pub findings: Vec<String>,
}

/// Method `register_credential`: a credential value keel resolved (an adapter key). The
/// firewall scrubs it, and every encoded form it scrubs for secrets, from tool results,
/// model-bound requests, session events and the kernel's output redactions, replacing it with
/// `[credential REF]`. Registering the same pair again is a no-op; a new value for a
/// reference is added (the old one stays scrubbed). `Debug` never shows the value.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterCredential {
    /// The reference the value was resolved for (`OPENAI_API_KEY`).
    #[serde(rename = "ref")]
    pub reference: String,
    /// The value.
    pub value: String,
}

impl std::fmt::Debug for RegisterCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisterCredential")
            .field("reference", &self.reference)
            .field("value", &"<redacted>")
            .finish()
    }
}

/// The answer of `register_credential`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registered {
    /// The pair was new (false: the firewall already scrubbed it).
    pub added: bool,
}

/// The text a registered credential's value (and each encoded form) becomes: `[credential
/// REF]`. No alias form, so the firewall's fill never turns it back into the value.
pub fn credential_marker(reference: &str) -> String {
    format!("[credential {reference}]")
}

/// Calls `register_credential` on `firewall`.
///
/// # Errors
/// The firewall's error (`FIREWALL_ARGS`, `SECRETS_CORRUPT` when the scrubber cannot be
/// built), or the call's.
pub async fn register_credential(
    firewall: &CallHandle,
    reference: &str,
    value: &str,
) -> Result<Registered> {
    let args = serde_json::to_value(RegisterCredential {
        reference: reference.to_owned(),
        value: value.to_owned(),
    })?;
    let answer = firewall
        .call(FirewallMethod::RegisterCredential.as_str(), args)
        .await?;
    Ok(serde_json::from_value(answer)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_round_trip_and_unknown_ones_are_named() {
        for m in FirewallMethod::ALL {
            assert_eq!(FirewallMethod::parse(m.as_str()).unwrap(), m);
        }
        let e = FirewallMethod::parse("fill").unwrap_err();
        assert_eq!(e.code, "UNKNOWN_METHOD");
        assert!(e.message.contains("'fill'"));
    }

    #[test]
    fn a_registration_never_shows_its_value() {
        let r = RegisterCredential {
            reference: "OPENAI_API_KEY".into(),
            value: "sk-live-1".into(),
        };
        assert!(!format!("{r:?}").contains("sk-live-1"));
        let wire = serde_json::to_value(&r).unwrap();
        assert_eq!(
            wire,
            serde_json::json!({"ref": "OPENAI_API_KEY", "value": "sk-live-1"})
        );
        assert_eq!(
            credential_marker("OPENAI_API_KEY"),
            "[credential OPENAI_API_KEY]"
        );
    }
}
