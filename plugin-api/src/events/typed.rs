//! [`Typed`]: an event's payload field or decision as a typed value, carried across the ABI in
//! the SDK's one serialised form ([`Payload`]: JSON text plus frozen documents by reference).
//!
//! Why not `repr(C)` structs for every decision: decisions evolve (a new variant, an optional
//! field) within an ABI major, and serde types do that without a layout change — the same
//! reason service requests are serde types. Why not bare JSON text ([`super::Json`]): a
//! listener that reads `decision.get("kind")` and compares it with `"enter"` compiles with a
//! typo. A `Typed<T>` is written with [`Typed::new`] from a `T` and read with [`Typed::get`]
//! into a `T`; the JSON in between is an encoding, never an interface.
//!
//! A [`Frozen`](crate::sdk::Frozen) document rides by reference inside plain structs; inside an
//! internally tagged enum (`#[serde(tag = "kind")]`) it cannot be read back, because serde
//! buffers the variant before it knows the type — keep decisions' frozen parts in a struct.
//!
//! The layout the kernel checks is the envelope's (every `Typed<T>` has the same one): the
//! type parameter is checked where the value is read, and a document that is not a `T` is an
//! `INVALID_ARGUMENTS` error naming `T`, never a panic.

use std::fmt;

use abi_stable::StableAbi;
use abi_stable::marker_type::UnsafeIgnoredType;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::sdk::{Payload, Result};

/// A `T`, serialised once, carried by an event.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(unsafe_unconstrained(T))]
pub struct Typed<T> {
    payload: Payload,
    _type: UnsafeIgnoredType<T>,
}

impl<T: Serialize> Typed<T> {
    /// Encodes `value` (its frozen documents by reference).
    ///
    /// # Errors
    /// `INVALID_JSON` when `value` cannot be serialised (non-string map keys).
    pub fn new(value: &T) -> Result<Self> {
        Ok(Typed {
            payload: Payload::encode(value)?,
            _type: UnsafeIgnoredType::DEFAULT,
        })
    }
}

impl<T: DeserializeOwned> Typed<T> {
    /// Decodes the value (frozen documents are shared, not copied).
    ///
    /// # Errors
    /// `INVALID_ARGUMENTS` naming `T` when a foreign listener left something that is not a `T`.
    pub fn get(&self) -> Result<T> {
        self.payload.decode_ref(std::any::type_name::<T>())
    }

    /// Decodes the value, consuming the envelope.
    ///
    /// # Errors
    /// As [`Typed::get`].
    pub fn into_inner(self) -> Result<T> {
        self.payload.decode(std::any::type_name::<T>())
    }
}

impl<T> Typed<T> {
    /// Wraps a payload already encoded from a `T` (a result snapshot the pipeline keeps, so it
    /// is not encoded twice). A payload that is not a `T` is caught where it is read:
    /// [`Typed::get`] answers `INVALID_ARGUMENTS`, as for a foreign listener's document.
    pub fn from_payload(payload: Payload) -> Self {
        Typed {
            payload,
            _type: UnsafeIgnoredType::DEFAULT,
        }
    }

    /// The JSON text (frozen documents appear as `{"$frozen":N}` placeholders): for logs and
    /// for bridges that forward the document verbatim (hooks, MCP).
    pub fn text(&self) -> &str {
        self.payload.text()
    }

    /// The serialised form.
    pub fn payload(&self) -> &Payload {
        &self.payload
    }
}

impl<T> Clone for Typed<T> {
    fn clone(&self) -> Self {
        Typed {
            payload: self.payload.clone(),
            _type: UnsafeIgnoredType::DEFAULT,
        }
    }
}

impl<T> fmt::Debug for Typed<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Typed")
            .field("type", &std::any::type_name::<T>())
            .field("text", &self.payload.text())
            .finish()
    }
}

/// Equal when the texts are equal and the frozen documents hold the same text.
impl<T> PartialEq for Typed<T> {
    fn eq(&self, other: &Self) -> bool {
        self.payload.text() == other.payload.text()
            && self.payload.frozen.len() == other.payload.frozen.len()
            && self
                .payload
                .frozen
                .iter()
                .zip(other.payload.frozen.iter())
                .all(|(a, b)| a.as_str() == b.as_str())
    }
}

impl<T> Eq for Typed<T> {}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;
    use crate::sdk::Frozen;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "kind", rename_all = "lowercase")]
    enum Decision {
        Enter { messages: Vec<String> },
        Reject,
    }

    #[derive(Debug, Serialize, Deserialize)]
    struct Request {
        history: Vec<Frozen>,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Other {
        steer: String,
    }

    #[test]
    fn a_value_round_trips_and_its_frozen_documents_are_shared() {
        let m = Frozen::freeze(&serde_json::json!({"text": "x".repeat(10_000)})).unwrap();
        let t = Typed::new(&Request {
            history: vec![m.clone()],
        })
        .unwrap();
        assert!(t.text().len() < 60, "{}", t.text());
        assert!(t.get().unwrap().history[0].same(&m));
        assert_eq!(t.clone(), t);
        let enter = Decision::Enter {
            messages: vec!["hi".into()],
        };
        assert_eq!(Typed::new(&enter).unwrap().get().unwrap(), enter);
        assert_eq!(
            Typed::new(&Decision::Reject).unwrap().into_inner().unwrap(),
            Decision::Reject
        );
    }

    #[test]
    fn a_document_of_another_type_is_an_error_naming_the_type() {
        let t = Typed::<Other>::new(&Other { steer: "go".into() }).unwrap();
        // What a foreign listener could leave: the same envelope with another type's text.
        let forged: Typed<Decision> = Typed {
            payload: t.payload().clone(),
            _type: UnsafeIgnoredType::DEFAULT,
        };
        let e = forged.get().unwrap_err();
        assert_eq!(e.code, "INVALID_ARGUMENTS");
        assert!(e.message.contains("Decision"), "{}", e.message);
    }
}
