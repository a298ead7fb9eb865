//! The harness against a real plugin, `system-prompt`, linked statically (issue 12 item 4): its
//! typed service called through `SystemPromptClient`, a waterfall listener shaping what it
//! assembles, its config checked against its derived schema, what it registered, and fakes
//! served by the probe for a plugin that requires the service.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use keel_plugin_api::events::Typed;
use keel_plugin_api::events::prompt::Assemble;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::prompt::{
    AssembleRequest, AssembledPrompt, PromptSection, SystemPrompt, SystemPromptProvider,
};
use keel_plugin_test::{HarnessError, PROBE_ROW, TestHost, exported};
use pretty_assertions::assert_eq;
use serde_json::json;

fn request() -> AssembleRequest {
    AssembleRequest {
        session_id: "s1".to_owned(),
        cwd: "/work".to_owned(),
        tools: vec!["shell".to_owned()],
    }
}

fn one_section(text: &str) -> serde_json::Value {
    json!({ "sections": [{"id": "base", "order": 0, "text": text}], "variables": {"team": "core"} })
}

#[test]
fn loop14_the_service_answers_a_typed_client_with_the_row_config() {
    let host = TestHost::builder()
        .linked(
            "prompt",
            exported!(keel_plugin_system_prompt),
            one_section("{{team}} in {{cwd}} with {{tools}}"),
        )
        .start()
        .unwrap();
    let client = host.client::<SystemPrompt>().unwrap();
    assert_eq!(client.contract().handle().provider(), "prompt");
    let answer = host.block_on(client.assemble(request())).unwrap();
    assert_eq!(answer.text, "core in /work with shell");
}

#[test]
fn loop14_a_waterfall_listener_adds_a_section_the_service_includes() {
    let seen = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&seen);
    let host = TestHost::builder()
        .linked(
            "prompt",
            exported!(keel_plugin_system_prompt),
            one_section("base"),
        )
        .on_probe_activate(move |ctx| {
            ctx.waterfall::<Assemble>(ListenerOptions::default(), move |payload, next| {
                counted.fetch_add(1, Ordering::SeqCst);
                let mut sections = payload.sections.get()?;
                sections.push(PromptSection {
                    id: "extra".to_owned(),
                    order: 10,
                    text: "from a listener in session {{session}}".to_owned(),
                    complete: false,
                });
                payload.sections = Typed::new(&sections)?;
                let mut vars = payload.variables.get()?;
                vars.insert("session".to_owned(), payload.session_id.to_string());
                payload.variables = Typed::new(&vars)?;
                next.run(payload)
            })?;
            Ok(())
        })
        .start()
        .unwrap();
    assert_eq!(host.listeners::<Assemble>(), 1);
    let client = host.client::<SystemPrompt>().unwrap();
    let answer = host.block_on(client.assemble(request())).unwrap();
    assert_eq!(answer.text, "base\n\nfrom a listener in session s1");
    assert_eq!(seen.load(Ordering::SeqCst), 1);
}

#[test]
fn loop14_a_listener_error_reaches_the_caller_with_its_code() {
    let host = TestHost::builder()
        .linked("prompt", exported!(keel_plugin_system_prompt), json!({}))
        .on_probe_activate(|ctx| {
            ctx.waterfall::<Assemble>(ListenerOptions::default(), |_, _| {
                Err(Error::received("PROOF_REFUSED", "no prompt today"))
            })?;
            Ok(())
        })
        .start()
        .unwrap();
    let client = host.client::<SystemPrompt>().unwrap();
    let err = host.block_on(client.assemble(request())).unwrap_err();
    assert_eq!(err.code, "PROOF_REFUSED", "{err:?}");
}

#[test]
fn a_row_config_that_breaks_the_derived_schema_is_refused_naming_row_and_key() {
    let err = TestHost::builder()
        .linked(
            "prompt",
            exported!(keel_plugin_system_prompt),
            json!({"sections": [{"id": "", "order": 0, "text": "x"}]}),
        )
        .start()
        .unwrap_err();
    assert!(matches!(err, HarnessError::Config { .. }), "{err}");
    let line = err.to_string();
    assert!(
        line.contains("row 'prompt'") && line.contains("/sections/0/id"),
        "{line}"
    );
    assert!(!line.contains('\n'), "one line: {line}");
}

/// A plugin of the test's own: requires the service and asks it once at activation.
#[derive(Default)]
struct Asker;

impl Plugin for Asker {
    type Dispatches = ();

    fn manifest(&self) -> Manifest {
        Manifest::new("asker", "0.1.0").requires::<SystemPrompt>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let prompt = ctx.client::<SystemPrompt>()?;
        let answer = prompt.assemble(request()).await?;
        ctx.effect(&format!("asked: {}", answer.text), || async { Ok(()) })?;
        Ok(())
    }
}

/// A fake provider the probe serves in place of `system-prompt`.
struct Fixed;

impl SystemPromptProvider for Fixed {
    async fn assemble(&self, r: AssembleRequest) -> Result<AssembledPrompt> {
        Ok(AssembledPrompt {
            text: format!("fixed for {}", r.cwd),
        })
    }
}

#[test]
fn the_probe_serves_a_fake_and_the_registry_shows_what_a_row_registered() {
    let host = TestHost::builder()
        .row::<Asker>("asker", json!({}))
        .serve::<SystemPrompt, _>(Fixed)
        .start()
        .unwrap();
    let asker = host.row("asker").unwrap();
    assert_eq!(asker.state, "active");
    assert_eq!(asker.effects, vec!["asked: fixed for /work".to_owned()]);
    assert_eq!(
        host.client::<SystemPrompt>()
            .unwrap()
            .contract()
            .handle()
            .provider(),
        PROBE_ROW
    );
}

#[test]
fn a_required_service_nobody_provides_is_refused_naming_the_row() {
    let err = TestHost::builder()
        .row::<Asker>("asker", json!({}))
        .start()
        .unwrap_err();
    let line = err.to_string();
    assert!(
        line.contains("asker") && line.contains("keel.system-prompt"),
        "{line}"
    );
}

#[test]
fn the_real_service_and_the_asker_together_activate_in_dependency_order() {
    // The asker is listed first; the kernel's waves still activate the provider before it.
    let host = TestHost::builder()
        .row::<Asker>("asker", json!({}))
        .linked(
            "prompt",
            exported!(keel_plugin_system_prompt),
            one_section("real {{cwd}}"),
        )
        .start()
        .unwrap();
    assert_eq!(
        host.row("asker").unwrap().effects,
        vec!["asked: real /work".to_owned()]
    );
    host.shutdown();
}
