//! [`Payload`]: the one serialised form a contract call's request and answer take across the
//! ABI: JSON text, plus the [`Frozen`] documents it refers to, carried by reference.
//!
//! Why JSON text and not `repr(C)` request types: every request type is an ordinary serde
//! struct that can gain an optional field within an ABI major without a layout change, and
//! everything but the history is small (a session id, a config, a tool call). Why the side
//! list: the history is not small, and it is already encoded. While a payload is encoded, each
//! `Frozen` it meets is moved to `frozen` and written as `{"$frozen":N}`; decoding puts it back.
//! The text therefore grows with the *number* of messages (a dozen bytes each), never with their
//! size, and no message is re-encoded or re-parsed on the way.
//!
//! The side list lives in a thread-local for the duration of one synchronous `serde` pass; a
//! nested encode saves and restores the outer one.

use std::cell::RefCell;

use abi_stable::StableAbi;
use abi_stable::std_types::{RString, RVec};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::{Error, Result};
use super::frozen::Frozen;
use crate::codes::ContractCode;

/// A serialised request or answer.
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct Payload {
    /// The JSON text, with `{"$frozen":N}` where a frozen document goes.
    pub text: RString,
    /// The frozen documents, by index.
    pub frozen: RVec<Frozen>,
}

thread_local! {
    static ENCODING: RefCell<Option<Vec<Frozen>>> = const { RefCell::new(None) };
    static DECODING: RefCell<Option<Vec<Option<Frozen>>>> = const { RefCell::new(None) };
}

/// While encoding a payload: records `frozen` and returns its index.
pub(crate) fn attach(frozen: &Frozen) -> Option<usize> {
    ENCODING.with(|cell| {
        let mut slot = cell.borrow_mut();
        let list = slot.as_mut()?;
        list.push(frozen.clone());
        Some(list.len() - 1)
    })
}

/// While decoding a payload: takes attachment `index` (each is taken once).
pub(crate) fn detach(index: usize) -> Option<Frozen> {
    DECODING.with(|cell| {
        let mut slot = cell.borrow_mut();
        slot.as_mut()?.get_mut(index)?.take()
    })
}

impl Payload {
    /// Encodes `value`: its text, and its frozen documents by reference.
    ///
    /// # Errors
    /// `INVALID_JSON` when `value` cannot be serialised.
    pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Payload> {
        let outer = ENCODING.with(|cell| cell.replace(Some(Vec::new())));
        let text = serde_json::to_string(value);
        let frozen = ENCODING
            .with(|cell| cell.replace(outer))
            .unwrap_or_default();
        let text = text.map_err(|e| Error::coded(ContractCode::InvalidJson, e.to_string()))?;
        Ok(Payload {
            text: RString::from(text),
            frozen: RVec::from(frozen),
        })
    }

    /// Decodes into `T`; `what` names the request or answer in the error.
    ///
    /// # Errors
    /// `INVALID_ARGUMENTS` when the text is not a `T`.
    pub fn decode<T: DeserializeOwned>(self, what: &str) -> Result<T> {
        let attachments: Vec<Option<Frozen>> = self.frozen.into_iter().map(Some).collect();
        let outer = DECODING.with(|cell| cell.replace(Some(attachments)));
        let value = serde_json::from_str::<T>(self.text.as_str());
        DECODING.with(|cell| cell.replace(outer));
        value.map_err(|e| Error::coded(ContractCode::InvalidArguments, format!("{what}: {e}")))
    }

    /// Decodes into `T` without consuming the payload: with no frozen documents the text is
    /// parsed in place (no copy of the text, no attachment table); otherwise the documents'
    /// handles are cloned (reference counts, not bytes). The read path of
    /// [`Typed::get`](crate::events::Typed::get), which a listener runs once per hop.
    ///
    /// # Errors
    /// `INVALID_ARGUMENTS` when the text is not a `T`.
    pub fn decode_ref<T: DeserializeOwned>(&self, what: &str) -> Result<T> {
        if !self.frozen.is_empty() {
            return self.clone().decode(what);
        }
        serde_json::from_str::<T>(self.text.as_str())
            .map_err(|e| Error::coded(ContractCode::InvalidArguments, format!("{what}: {e}")))
    }

    /// The JSON text alone (frozen documents appear as placeholders).
    pub fn text(&self) -> &str {
        self.text.as_str()
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    struct Request {
        session_id: String,
        messages: Vec<Frozen>,
    }

    // Issue 12 item 2: the history crosses a boundary by reference; the text holds only
    // placeholders, and the decoded documents are the very buffers that were encoded.
    #[test]
    fn frozen_documents_cross_by_reference_not_by_text() {
        let big = "x".repeat(100_000);
        let m1 = Frozen::freeze(&serde_json::json!({"role": "user", "content": big})).unwrap();
        let m2 =
            Frozen::freeze(&serde_json::json!({"role": "assistant", "content": "ok"})).unwrap();
        let request = Request {
            session_id: "s".into(),
            messages: vec![m1.clone(), m2.clone()],
        };
        let payload = Payload::encode(&request).unwrap();
        assert!(payload.text().len() < 100, "{}", payload.text());
        assert_eq!(payload.frozen.len(), 2);
        let back: Request = payload.decode("request").unwrap();
        assert!(back.messages[0].same(&m1));
        assert!(back.messages[1].same(&m2));
    }

    #[test]
    fn outside_a_payload_a_frozen_document_is_its_json() {
        let m = Frozen::freeze(&serde_json::json!({"role": "user", "content": "hi"})).unwrap();
        let text = serde_json::to_string(&vec![m]).unwrap();
        assert_eq!(text, r#"[{"role":"user","content":"hi"}]"#);
        let back: Vec<Frozen> = serde_json::from_str(&text).unwrap();
        assert_eq!(back[0].as_str(), r#"{"role":"user","content":"hi"}"#);
    }

    #[test]
    fn a_placeholder_without_its_attachment_is_an_error_not_a_panic() {
        let payload = Payload {
            text: RString::from(r#"{"session_id":"s","messages":[{"$frozen":3}]}"#),
            frozen: RVec::new(),
        };
        let err = payload.decode::<Request>("request").unwrap_err();
        assert_eq!(err.code, "INVALID_ARGUMENTS");
        assert!(err.message.contains("attachment 3"), "{}", err.message);
    }

    #[test]
    fn nested_encodes_keep_their_own_attachments() {
        struct Outer(Frozen);
        impl Serialize for Outer {
            fn serialize<S: serde::Serializer>(
                &self,
                s: S,
            ) -> std::result::Result<S::Ok, S::Error> {
                let inner = Payload::encode(&self.0).map_err(serde::ser::Error::custom)?;
                assert_eq!(inner.frozen.len(), 1);
                self.0.serialize(s)
            }
        }
        let m = Frozen::freeze(&1).unwrap();
        let p = Payload::encode(&Outer(m)).unwrap();
        assert_eq!(p.frozen.len(), 1);
        assert_eq!(p.text(), r#"{"$frozen":0}"#);
    }
}
