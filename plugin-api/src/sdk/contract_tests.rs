//! Issue 12 item 1: typed contracts, their versions, and the errors that name both sides.

use futures::executor::block_on;
use serde::{Deserialize, Serialize};

use super::contract::{ContractClient, ContractHandle};
use super::error::Result;
use crate::codes::ContractCode;

#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Pair {
    pub a: i64,
    pub b: i64,
}

mod v1 {
    use super::*;
    crate::contract! {
        /// Version 1 of a test contract.
        pub contract Math = "test.math", version 1;
        provider MathProvider;
        client MathClient;
        /// Sum.
        fn add(Pair) -> i64;
    }
}

mod v2 {
    use super::*;
    crate::contract! {
        /// Version 2 adds `mul`.
        pub contract Math = "test.math", version 2;
        provider MathProvider;
        client MathClient;
        /// Sum.
        fn add(Pair) -> i64;
        /// Product.
        fn mul(Pair) -> i64, since 2;
        /// Panics, to test the boundary.
        fn boom() -> (), since 2;
    }
}

struct OldCalc;
impl v1::MathProvider for OldCalc {
    async fn add(&self, r: Pair) -> Result<i64> {
        Ok(r.a + r.b)
    }
}

struct NewCalc;
impl v2::MathProvider for NewCalc {
    async fn add(&self, r: Pair) -> Result<i64> {
        Ok(r.a + r.b)
    }
    async fn mul(&self, r: Pair) -> Result<i64> {
        Ok(r.a * r.b)
    }
    #[allow(
        clippy::panic,
        reason = "the test checks that a provider panic is caught"
    )]
    async fn boom(&self) -> Result<()> {
        panic!("kaboom")
    }
}

#[test]
fn a_typed_call_round_trips() {
    let client: v2::MathClient =
        ContractClient::new(ContractHandle::serve::<v2::Math, _>("calc", NewCalc), "me").into();
    assert_eq!(block_on(client.mul(Pair { a: 6, b: 7 })).unwrap(), 42);
    assert_eq!(block_on(client.add(Pair { a: 6, b: 7 })).unwrap(), 13);
}

// A newer consumer against an older provider: refused before the call, naming both sides.
#[test]
fn a_method_newer_than_the_provider_is_unknown_method_naming_both_sides() {
    let old = ContractHandle::serve::<v1::Math, _>("old-calc", OldCalc);
    assert_eq!(old.version(), 1);
    let client: v2::MathClient = ContractClient::new(old, "new-consumer").into();
    assert_eq!(block_on(client.add(Pair { a: 1, b: 2 })).unwrap(), 3);
    assert!(!client.contract().has("mul"));
    let err = block_on(client.mul(Pair { a: 1, b: 2 })).unwrap_err();
    assert!(err.is(ContractCode::UnknownMethod), "{err}");
    for part in [
        "`new-consumer` (test.math v2)",
        "`mul` (since v2)",
        "`old-calc` (test.math v1)",
    ] {
        assert!(err.message.contains(part), "{part} not in {}", err.message);
    }
}

// The provider side refuses a name it does not know (a caller whose own declaration is wrong
// or forged): the same code, naming both sides.
#[test]
fn the_provider_refuses_a_method_it_does_not_have() {
    let old = ContractHandle::serve::<v1::Math, _>("old-calc", OldCalc);
    // Pretend the provider claims version 2 so the client-side check passes.
    let client: ContractClient<v2::Math> = ContractClient::new(old, "liar");
    let forged = client.handle().clone().with_version(2);
    let client: ContractClient<v2::Math> = ContractClient::new(forged, "liar");
    let err = block_on(client.__call::<Pair, i64>("mul", 2, &Pair { a: 1, b: 2 })).unwrap_err();
    assert!(err.is(ContractCode::UnknownMethod), "{err}");
    assert!(
        err.message.contains("`liar` (test.math v2) called `mul`"),
        "{}",
        err.message
    );
    assert!(
        err.message.contains("provider `old-calc` (test.math v1)"),
        "{}",
        err.message
    );
}

#[test]
fn a_malformed_request_is_invalid_arguments_naming_the_method() {
    let client: ContractClient<v2::Math> =
        ContractClient::new(ContractHandle::serve::<v2::Math, _>("calc", NewCalc), "me");
    let err = block_on(client.__call::<&str, i64>("add", 1, &"not a pair")).unwrap_err();
    assert!(err.is(ContractCode::InvalidArguments), "{err}");
    assert!(
        err.message.contains("test.math `add` request"),
        "{}",
        err.message
    );
}

#[test]
fn a_wrong_answer_type_is_invalid_answer() {
    let client: ContractClient<v2::Math> =
        ContractClient::new(ContractHandle::serve::<v2::Math, _>("calc", NewCalc), "me");
    let err = block_on(client.__call::<Pair, String>("add", 1, &Pair { a: 1, b: 1 })).unwrap_err();
    assert!(err.is(ContractCode::InvalidAnswer), "{err}");
    assert!(err.message.contains("from `calc`"), "{}", err.message);
}

#[test]
fn a_provider_panic_is_a_panic_error_not_an_abort() {
    let client: v2::MathClient =
        ContractClient::new(ContractHandle::serve::<v2::Math, _>("calc", NewCalc), "me").into();
    let err = block_on(client.boom()).unwrap_err();
    assert!(err.is(ContractCode::Panic), "{err}");
    assert!(err.message.contains("kaboom"), "{}", err.message);
}
