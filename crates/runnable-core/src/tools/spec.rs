//! `ToolSpec`: the description of a tool that chat models receive.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::Tool;
use crate::error::{Error, Result};

/// A tool as a chat model sees it: name, description and the JSON schema of its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What the tool does.
    #[serde(default)]
    pub description: String,
    /// The JSON schema of the arguments (an object schema).
    #[serde(default = "empty_object_schema")]
    pub parameters: Value,
}

fn empty_object_schema() -> Value {
    json!({"type": "object", "properties": {}})
}

impl ToolSpec {
    /// A spec from its parts; `parameters` is cleaned of `$schema` and `title`.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        Self { name: name.into(), description: description.into(), parameters: clean_schema(parameters) }
    }

    /// The spec of a type's JSON schema: named after the type, described by its doc comment.
    pub fn from_type<T: JsonSchema>() -> Self {
        let mut schema = schema_value::<T>();
        let description = match schema.as_object_mut().and_then(|o| o.remove("description")) {
            Some(Value::String(d)) => d,
            _ => String::new(),
        };
        Self::new(T::schema_name(), description, schema)
    }

    /// Reads a spec from JSON: either weft's own form (`name`, `description`, `parameters`) or OpenAI's
    /// tool form (`{"type": "function", "function": {...}}`).
    pub fn from_value(value: &Value) -> Result<Self> {
        let inner = match value.get("function") {
            Some(function) if value.get("type").and_then(Value::as_str) == Some("function") => function,
            _ => value,
        };
        let spec: ToolSpec = serde_json::from_value(inner.clone())
            .map_err(|e| Error::InvalidInput(format!("invalid tool spec {value}: {e}")))?;
        Ok(Self::new(spec.name, spec.description, spec.parameters))
    }

    /// OpenAI's tool format: `{"type": "function", "function": {"name", "description", "parameters"}}`.
    pub fn to_openai(&self) -> Value {
        let mut function = Map::new();
        function.insert("name".to_owned(), Value::String(self.name.clone()));
        if !self.description.is_empty() {
            function.insert("description".to_owned(), Value::String(self.description.clone()));
        }
        function.insert("parameters".to_owned(), self.parameters.clone());
        json!({"type": "function", "function": function})
    }
}

impl<T: Tool + ?Sized> From<&T> for ToolSpec {
    fn from(tool: &T) -> Self {
        tool.spec()
    }
}

impl From<&super::SharedTool> for ToolSpec {
    fn from(tool: &super::SharedTool) -> Self {
        tool.spec()
    }
}

/// The JSON schema of `T` as schemars generates it, cleaned of `$schema` and `title`.
pub fn schema_value<T: JsonSchema>() -> Value {
    clean_schema(schemars::schema_for!(T).to_value())
}

/// Removes the top-level `$schema` and `title` keys, which models do not need.
pub fn clean_schema(mut schema: Value) -> Value {
    if let Some(obj) = schema.as_object_mut() {
        obj.remove("$schema");
        obj.remove("title");
    }
    schema
}
