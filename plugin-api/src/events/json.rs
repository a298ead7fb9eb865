//! [`Json`]: a JSON document as text, for the payload fields that are genuinely open.
//!
//! Every decision and every payload field whose shape is fixed is a [`super::Typed`] value
//! (issue 24 item 2). Two documents have no fixed shape and stay `Json`: a tool call's
//! arguments (`ToolExecution.args`, the called tool's own schema) and `session/persist`'s batch
//! (`PersistBatch.data`, the bodies of events of any type). Each field's doc says why.

use abi_stable::StableAbi;
use abi_stable::std_types::RString;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::sdk::{Error, Result};

/// A JSON document as text.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq, Default)]
pub struct Json {
    /// The document.
    pub text: RString,
}

impl Json {
    /// Serialises `value`.
    ///
    /// # Errors
    /// `INVALID_JSON` when `value` cannot be serialised (non-string map keys).
    pub fn of<T: Serialize + ?Sized>(value: &T) -> Result<Self> {
        serde_json::to_string(value)
            .map(|text| Json { text: text.into() })
            .map_err(|e| Error::coded(crate::codes::ContractCode::InvalidJson, e.to_string()))
    }

    /// Parses the document as `T`.
    ///
    /// # Errors
    /// `INVALID_JSON` naming the expected type.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_str(self.text.as_str()).map_err(|e| {
            Error::coded(
                crate::codes::ContractCode::InvalidJson,
                format!("expected {}: {e}", std::any::type_name::<T>()),
            )
        })
    }
}
