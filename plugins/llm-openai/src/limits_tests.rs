//! Issue 14 item 1: the row's window over the table's, the table by longest prefix, the
//! output reserve's order, and limits no model has refused naming the key.

use serde_json::{Value, json};

use super::*;

fn row(extra: Value) -> Config {
    let mut v = json!({"base_url": "http://x/v1", "model": "row-model"});
    for (k, val) in extra.as_object().into_iter().flatten() {
        v[k] = val.clone();
    }
    serde_json::from_value(v).unwrap()
}

fn call(model: &str) -> LlmCallConfig {
    LlmCallConfig {
        provider: "openai".into(),
        model: model.into(),
        ..LlmCallConfig::default()
    }
}

#[test]
fn the_table_matches_the_longest_prefix() {
    let window = |m: &str| lookup(m).map(|k| k.window);
    assert_eq!(window("gpt-4o"), Some(128_000));
    assert_eq!(window("gpt-4o-mini-2024-07-18"), Some(128_000));
    assert_eq!(window("gpt-4.1-nano"), Some(1_047_576));
    assert_eq!(window("gpt-4-turbo-2024-04-09"), Some(128_000));
    assert_eq!(window("gpt-4-0613"), Some(8_192));
    assert_eq!(window("gpt-4-32k"), Some(32_768));
    assert_eq!(window("gpt-3.5-turbo"), Some(16_385));
    assert_eq!(window("o1"), Some(200_000));
    assert_eq!(window("o1-mini"), Some(128_000));
    assert_eq!(window("o3-mini"), Some(200_000));
    assert_eq!(window("o4-mini"), Some(200_000));
    assert_eq!(window("gpt-5-mini"), Some(400_000));
    assert_eq!(window("gpt-5-chat-latest"), Some(128_000));
    // A router's vendor prefix and the case do not matter.
    assert_eq!(window("openai/GPT-4o"), Some(128_000));
    // Unknown models stay unknown.
    assert_eq!(window("qwen2.5-7b-instruct"), None);
    assert_eq!(window("mock-model"), None);
}

#[test]
fn a_configured_window_wins_over_the_table() {
    let l = answer(&row(json!({"context_window": 16_000})), &call("gpt-4o"));
    assert_eq!(l.context_window, Some(16_000));
    assert_eq!(l.source, "config");
    // The general reserve rule: min(window / 8, 4096).
    assert_eq!(l.output_reserve, 2_000);
}

#[test]
fn the_table_answers_a_known_model_and_an_unknown_one_is_unknown() {
    let l = answer(&row(json!({})), &call("gpt-4o"));
    assert_eq!(
        (l.context_window, l.output_reserve, l.source.as_str()),
        (Some(128_000), 4_096, "table")
    );
    // gpt-5 keeps its 128,000-token answer free: OpenAI refuses a prompt over 272,000.
    let l = answer(&row(json!({})), &call("gpt-5"));
    assert_eq!(
        (l.context_window, l.output_reserve),
        (Some(400_000), 128_000)
    );
    let l = answer(&row(json!({})), &call("local-llama"));
    assert_eq!(
        l,
        ModelLimits {
            context_window: None,
            output_reserve: 0,
            bytes_per_token: None,
            source: "unknown".into(),
        }
    );
    // An empty call model is the row's model.
    let l = answer(&row(json!({"model": "gpt-4"})), &call(""));
    assert_eq!(l.context_window, Some(8_192));
}

#[test]
fn the_output_reserve_is_max_tokens_then_the_row_reserve_then_the_rule() {
    let mut c = call("gpt-4o");
    c.max_tokens = Some(300);
    let r = row(json!({"output_reserve": 1_000, "max_tokens": 700}));
    // The call's max_tokens, then the row's (both go out with the request).
    assert_eq!(answer(&r, &c).output_reserve, 300);
    assert_eq!(answer(&r, &call("gpt-4o")).output_reserve, 700);
    let r = row(json!({"output_reserve": 1_000}));
    assert_eq!(answer(&r, &call("gpt-4o")).output_reserve, 1_000);
    assert_eq!(answer(&r, &call("gpt-5")).output_reserve, 1_000);
    // The rule caps at 4096 and scales down for small windows.
    let small = row(json!({"context_window": 8_000}));
    assert_eq!(answer(&small, &call("x")).output_reserve, 1_000);
    // An unknown window with a configured reserve keeps it.
    let r = row(json!({"output_reserve": 50}));
    assert_eq!(answer(&r, &call("x")).output_reserve, 50);
}

#[test]
fn bytes_per_token_is_passed_through() {
    let l = answer(&row(json!({"bytes_per_token": 3.2})), &call("gpt-4o"));
    assert_eq!(l.bytes_per_token, Some(3.2));
}

#[test]
fn limits_no_model_has_are_refused_naming_the_key() {
    let err = check(&row(json!({"context_window": 0}))).unwrap_err();
    assert!(err.is(ContractCode::Config), "{err}");
    assert!(err.message.contains("context_window"), "{err}");
    for bad in [0.0, -1.5] {
        let err = check(&row(json!({"bytes_per_token": bad}))).unwrap_err();
        assert!(err.message.contains("bytes_per_token"), "{err}");
    }
    assert!(check(&row(json!({"context_window": 1, "bytes_per_token": 0.5}))).is_ok());
    // Activation builds the adapter through the same check.
    let err = crate::Adapter::new(row(json!({"bytes_per_token": 0.0}))).unwrap_err();
    assert!(err.message.contains("bytes_per_token"), "{err}");
}
