//! Registry rules: LLM-01 (all-or-nothing, atomic replace, disposed handles) and LLM-02
//! (a prepared call binds to one registration and dispatches once).

use super::*;

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn config(provider: &str) -> LlmCallConfig {
    LlmCallConfig {
        provider: provider.to_owned(),
        model: "m".to_owned(),
        ..LlmCallConfig::default()
    }
}

fn provider_names(r: &Registry) -> Vec<String> {
    r.providers().into_iter().map(|r| r.provider).collect()
}

#[test]
fn llm_01_register_routes_every_provider_and_stores_default_model() {
    let mut r = Registry::default();
    let id = r
        .register(
            "keel.llm.adapter.a",
            names(&["openai", "azure"]),
            Some("gpt".into()),
        )
        .unwrap();
    assert_eq!(
        r.providers(),
        vec![
            Route {
                provider: "azure".into(),
                service: "keel.llm.adapter.a".into(),
                default_model: Some("gpt".into()),
            },
            Route {
                provider: "openai".into(),
                service: "keel.llm.adapter.a".into(),
                default_model: Some("gpt".into()),
            },
        ]
    );
    assert_eq!(
        r.resolve("openai").map(|r| r.service),
        Some("keel.llm.adapter.a".into())
    );
    assert!(id > 0);
}

#[test]
fn llm_01_duplicate_provider_registers_nothing() {
    let mut r = Registry::default();
    r.register("svc.a", names(&["openai"]), None).unwrap();
    let err = r
        .register("svc.b", names(&["scripted", "openai"]), None)
        .unwrap_err();
    assert_eq!(err.code.as_str(), "DUPLICATE_ADAPTER");
    assert!(err.message.contains("openai"), "{}", err.message);
    // `scripted` came first in the refused list and must not have been registered.
    assert_eq!(provider_names(&r), names(&["openai"]));
    assert!(r.resolve("scripted").is_none());
}

#[test]
fn llm_01_repeated_provider_in_one_list_is_a_duplicate() {
    let mut r = Registry::default();
    let err = r.register("svc", names(&["x", "x"]), None).unwrap_err();
    assert_eq!(err.code.as_str(), "DUPLICATE_ADAPTER");
    assert!(r.providers().is_empty());
}

#[test]
fn llm_01_empty_lists_and_names_are_invalid() {
    let mut r = Registry::default();
    assert_eq!(
        r.register("svc", vec![], None).unwrap_err().code.as_str(),
        "INVALID_ADAPTER"
    );
    assert_eq!(
        r.register("svc", names(&["ok", ""]), None)
            .unwrap_err()
            .code
            .as_str(),
        "INVALID_ADAPTER"
    );
    assert_eq!(
        r.register(" ", names(&["ok"]), None)
            .unwrap_err()
            .code
            .as_str(),
        "INVALID_ADAPTER"
    );
    assert!(r.providers().is_empty());
}

#[test]
fn llm_01_replace_swaps_routes_atomically() {
    let mut r = Registry::default();
    let a = r.register("svc.a", names(&["p1", "p2"]), None).unwrap();
    r.register("svc.b", names(&["taken"]), None).unwrap();

    r.replace(a, names(&["p2", "p3"])).unwrap();
    assert_eq!(provider_names(&r), names(&["p2", "p3", "taken"]));
    assert!(r.resolve("p1").is_none());

    // A conflicting replace changes nothing.
    let err = r.replace(a, names(&["p4", "taken"])).unwrap_err();
    assert_eq!(err.code.as_str(), "DUPLICATE_ADAPTER");
    assert_eq!(provider_names(&r), names(&["p2", "p3", "taken"]));
    assert_eq!(r.resolve("taken").map(|r| r.service), Some("svc.b".into()));

    let err = r.replace(a, vec![]).unwrap_err();
    assert_eq!(err.code.as_str(), "INVALID_ADAPTER");
    assert_eq!(provider_names(&r), names(&["p2", "p3", "taken"]));
}

#[test]
fn llm_01_disposed_registration_is_refused_on_reuse() {
    let mut r = Registry::default();
    let a = r.register("svc.a", names(&["p"]), None).unwrap();
    r.unregister(a).unwrap();
    assert!(r.providers().is_empty());
    assert_eq!(
        r.unregister(a).unwrap_err().code.as_str(),
        "REGISTRATION_DISPOSED"
    );
    assert_eq!(
        r.replace(a, names(&["p"])).unwrap_err().code.as_str(),
        "REGISTRATION_DISPOSED"
    );
    assert_eq!(
        r.unregister(999).unwrap_err().code.as_str(),
        "REGISTRATION_DISPOSED"
    );
    // The provider is free again, under a new id.
    let b = r.register("svc.b", names(&["p"]), None).unwrap();
    assert_ne!(a, b);
}

#[test]
fn llm_02_prepare_without_adapter_is_no_adapter() {
    let mut r = Registry::default();
    r.register("svc", names(&["scripted"]), None).unwrap();
    let err = r.prepare(&config("openai")).unwrap_err();
    assert_eq!(err.code.as_str(), "NO_ADAPTER");
    assert!(err.message.contains("'openai'"), "{}", err.message);
    assert!(err.message.contains("scripted"), "{}", err.message);
}

#[test]
fn llm_02_prepared_call_dispatches_once_with_its_own_config() {
    let mut r = Registry::default();
    r.register("svc.a", names(&["p"]), None).unwrap();
    let call = r.prepare(&config("p")).unwrap();

    let mut changed = config("p");
    changed.model = "other".into();
    assert_eq!(
        call.dispatch(&changed).unwrap_err().code.as_str(),
        "INVALID_PREPARED_CALL"
    );

    assert_eq!(call.dispatch(&config("p")).unwrap(), "svc.a");
    assert_eq!(
        call.dispatch(&config("p")).unwrap_err().code.as_str(),
        "INVALID_PREPARED_CALL"
    );
}

#[test]
fn llm_02_hot_swap_does_not_move_a_prepared_call() {
    let mut r = Registry::default();
    let a = r.register("svc.a", names(&["p"]), None).unwrap();
    let call = r.prepare(&config("p")).unwrap();
    r.unregister(a).unwrap();
    r.register("svc.b", names(&["p"]), None).unwrap();
    assert_eq!(call.registration, a);
    assert_eq!(call.dispatch(&config("p")).unwrap(), "svc.a");
    assert_eq!(r.prepare(&config("p")).unwrap().service, "svc.b");
}
