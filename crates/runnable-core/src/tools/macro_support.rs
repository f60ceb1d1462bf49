//! Support code for the `#[tool]` macro's expansion. Not a public API.
//!
//! The macro cannot know the types a function returns, so it converts them by autoref dispatch: method
//! lookup tries `Self = &&W`, then `&W`, then `W` for a receiver of type `&&&W`, so the most specific
//! conversion that applies wins. Errors: `(&&&Wrap(&err)).weft_error_kind().convert(err)` (weft's own
//! error as is, then any `std::error::Error`, then anything `Display`). Values:
//! `(&&Wrap(&value)).weft_output_kind().convert(value)` (a `ToolOutput` as is, then anything
//! `Serialize`).

use std::fmt::Display;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::ToolOutput;
use crate::error::{Error, Result};

/// Deserializes the arguments of a `#[tool]` function.
pub fn parse_args<A: DeserializeOwned>(tool: &str, args: Value) -> Result<A> {
    super::structured::parse_args(tool, args)
}

/// The cleaned JSON schema of a `#[tool]` function's arguments struct, without its description.
pub fn args_schema<A: JsonSchema>() -> Value {
    let mut schema = super::spec::schema_value::<A>();
    if let Some(obj) = schema.as_object_mut() {
        obj.remove("description");
    }
    schema
}

/// A borrowed value whose conversion is chosen by autoref dispatch.
#[derive(Debug)]
pub struct Wrap<'a, T>(pub &'a T);

/// Converts weft's own error as is.
#[derive(Debug)]
pub struct WeftErrorTag;
/// Wraps a `std::error::Error`.
#[derive(Debug)]
pub struct StdErrorTag;
/// Turns a `Display` value into an error message.
#[derive(Debug)]
pub struct DisplayErrorTag;

impl WeftErrorTag {
    /// The error itself.
    pub fn convert(self, err: Error) -> Error {
        err
    }
}

impl StdErrorTag {
    /// The error wrapped as a custom error.
    pub fn convert<E: std::error::Error + Send + Sync + 'static>(self, err: E) -> Error {
        Error::custom(err)
    }
}

impl DisplayErrorTag {
    /// The error's text as a message.
    pub fn convert<E: Display>(self, err: E) -> Error {
        Error::msg(err.to_string())
    }
}

/// Highest priority: weft's `Error`.
pub trait WeftErrorKind {
    /// The conversion tag.
    fn weft_error_kind(&self) -> WeftErrorTag {
        WeftErrorTag
    }
}
impl WeftErrorKind for &&Wrap<'_, Error> {}

/// Second: any `std::error::Error`.
pub trait StdErrorKind {
    /// The conversion tag.
    fn weft_error_kind(&self) -> StdErrorTag {
        StdErrorTag
    }
}
impl<E: std::error::Error + Send + Sync + 'static> StdErrorKind for &Wrap<'_, E> {}

/// Last: anything `Display` (strings, `anyhow::Error`, ...).
pub trait DisplayErrorKind {
    /// The conversion tag.
    fn weft_error_kind(&self) -> DisplayErrorTag {
        DisplayErrorTag
    }
}
impl<E: Display> DisplayErrorKind for Wrap<'_, E> {}

/// Keeps a `ToolOutput` as is.
#[derive(Debug)]
pub struct ToolOutputTag;
/// Serializes any other value.
#[derive(Debug)]
pub struct SerializeTag;

impl ToolOutputTag {
    /// The output itself.
    pub fn convert(self, output: ToolOutput) -> Result<ToolOutput> {
        Ok(output)
    }
}

impl SerializeTag {
    /// Strings become text, other values JSON.
    pub fn convert<T: Serialize>(self, value: T) -> Result<ToolOutput> {
        ToolOutput::from_serialize(&value)
    }
}

/// Highest priority: a `ToolOutput`.
pub trait ToolOutputKind {
    /// The conversion tag.
    fn weft_output_kind(&self) -> ToolOutputTag {
        ToolOutputTag
    }
}
impl ToolOutputKind for &Wrap<'_, ToolOutput> {}

/// Otherwise: any `Serialize` value.
pub trait SerializeKind {
    /// The conversion tag.
    fn weft_output_kind(&self) -> SerializeTag {
        SerializeTag
    }
}
impl<T: Serialize> SerializeKind for Wrap<'_, T> {}
