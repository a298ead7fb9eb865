//! [`Frozen`]: a JSON document encoded once and then shared, read-only, by every plugin that
//! handles it.
//!
//! Why: the model history is the one payload that grows with a session. Before SDK 2 it was
//! turned into text and parsed again at every boundary it crossed (session → loop → registry →
//! listeners → adapter: about eight passes per request, each over the whole history). A message
//! is now frozen once, when the session projects it, and crosses every later boundary as a
//! reference count: an `RArc<RString>` whose drop function belongs to the image that allocated
//! it, so any plugin may hold or release it. Readers that need structure parse the one message
//! they need; adapters splice the text into their request body.
//!
//! Inside a contract call a `Frozen` is carried beside the JSON text of the request (see
//! [`Payload`](super::Payload)), never inlined into it. Serialised anywhere else (the session
//! log, `stream-json`, a test's `serde_json::to_value`) it is its JSON document, verbatim.

use abi_stable::StableAbi;
use abi_stable::std_types::{RArc, RString};
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use super::error::{Error, Result};
use super::payload::{attach, detach};
use crate::codes::ContractCode;

/// An immutable, shared JSON document.
#[repr(transparent)]
#[derive(StableAbi, Clone)]
pub struct Frozen(RArc<RString>);

impl Frozen {
    /// Encodes `value` once.
    ///
    /// # Errors
    /// `INVALID_JSON` when `value` cannot be serialised.
    pub fn freeze<T: Serialize + ?Sized>(value: &T) -> Result<Frozen> {
        let text = serde_json::to_string(value)
            .map_err(|e| Error::coded(ContractCode::InvalidJson, e.to_string()))?;
        Ok(Frozen::exact(text))
    }

    /// Shares `text`, without the spare capacity serialising left behind (a frozen document
    /// lives as long as the history: up to half its buffer would be waste).
    fn exact(mut text: String) -> Frozen {
        text.shrink_to_fit();
        Frozen(RArc::new(RString::from(text)))
    }

    /// Takes text that is already one JSON document, checking that it is.
    ///
    /// # Errors
    /// `INVALID_JSON` when it is not.
    pub fn from_text(text: String) -> Result<Frozen> {
        serde_json::from_str::<&RawValue>(&text)
            .map_err(|e| Error::coded(ContractCode::InvalidJson, e.to_string()))?;
        Ok(Frozen::exact(text))
    }

    /// The JSON text.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the text is empty (never, for a document built by this type).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Parses the document into `T` (a reader that needs structure; the text stays shared).
    ///
    /// # Errors
    /// `INVALID_JSON` when the document is not a `T`.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_str(self.as_str())
            .map_err(|e| Error::coded(ContractCode::InvalidJson, e.to_string()))
    }

    /// Identity of the shared buffer: equal for clones of one freeze, different for two
    /// freezes of equal text. Caches key on it (an adapter's encoded message, the firewall's
    /// scrub verdict) while they hold a clone, so the address cannot be reused.
    pub fn identity(&self) -> usize {
        let inner: &RString = &self.0;
        std::ptr::from_ref(inner) as usize
    }

    /// Whether `self` and `other` are the same freeze.
    pub fn same(&self, other: &Frozen) -> bool {
        self.identity() == other.identity()
    }
}

impl std::fmt::Debug for Frozen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq for Frozen {
    fn eq(&self, other: &Self) -> bool {
        self.same(other) || self.as_str() == other.as_str()
    }
}

impl Serialize for Frozen {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        if let Some(index) = attach(self) {
            return Placeholder { index }.serialize(serializer);
        }
        let raw: &RawValue = serde_json::from_str(self.as_str())
            .map_err(|e| serde::ser::Error::custom(format!("frozen document: {e}")))?;
        raw.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Frozen {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        let text = raw.get();
        if text.starts_with("{\"$frozen\":")
            && let Ok(placeholder) = serde_json::from_str::<Placeholder>(text)
        {
            return detach(placeholder.index).ok_or_else(|| {
                D::Error::custom(format!(
                    "frozen attachment {} is missing from the payload",
                    placeholder.index
                ))
            });
        }
        let text: Box<str> = raw.into();
        Ok(Frozen::exact(String::from(text)))
    }
}

/// How a `Frozen` is written inside a payload's text: the index of its attachment.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Placeholder {
    #[serde(rename = "$frozen")]
    index: usize,
}
