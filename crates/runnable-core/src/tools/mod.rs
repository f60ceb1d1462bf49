//! Tools: functions a model can call, with a JSON schema of their arguments.
//!
//! A [`Tool`] has a name, a description and a JSON schema of its arguments; [`invoke_tool`] validates a
//! model's arguments against that schema, fills injected arguments from the [`ToolContext`], runs the tool,
//! applies its [`ToolErrorPolicy`] and turns the result into a [`ToolMessage`](crate::ToolMessage).
//!
//! Tools are made from closures with [`StructuredTool`], from documented functions with the
//! [`#[tool]`](crate::tool) attribute, or by implementing [`Tool`] by hand. Every weft tool type is also a
//! `Runnable<ToolCall, ToolMessage>` (see [`impl_tool_runnable!`](crate::impl_tool_runnable)).
//!
//! `Tool::name` and `Runnable::name` return the same string; when both traits are in scope, call it as
//! `Tool::name(&tool)`.
//!
//! ```
//! use serde_json::json;
//! use weft_runnable_core::{Error, Runnable, RunnableConfig, Tool, ToolCall, tool};
//!
//! /// Divides two numbers.
//! #[tool]
//! fn divide(
//!     /// The dividend.
//!     a: f64,
//!     /// The divisor, not zero.
//!     b: f64,
//! ) -> Result<f64, Error> {
//!     if b == 0.0 { Err(Error::msg("division by zero")) } else { Ok(a / b) }
//! }
//!
//! assert_eq!(Tool::name(&divide), "divide");
//! assert_eq!(divide.description(), "Divides two numbers.");
//! assert_eq!(divide.args_schema()["required"], json!(["a", "b"]));
//! assert_eq!(divide::run(1.0, 4.0).unwrap(), 0.25);
//! # tokio_test::block_on(async {
//! let call = ToolCall { name: "divide".into(), args: json!({"a": 1, "b": 4}), id: Some("c1".into()) };
//! let message = divide.invoke(call, &RunnableConfig::default()).await.unwrap();
//! assert_eq!((message.content.text().as_str(), message.tool_call_id.as_str()), ("0.25", "c1"));
//!
//! let bad = ToolCall { name: "divide".into(), args: json!({"a": "one"}), id: None };
//! let err = divide.invoke(bad, &RunnableConfig::default()).await.unwrap_err();
//! let Error::ToolArguments { errors, .. } = err else { panic!("expected an argument error") };
//! assert_eq!(errors, ["b: missing required field", "a: expected number, got string \"one\""]);
//! # });
//! ```

pub mod context;
pub mod invoke;
#[doc(hidden)]
pub mod macro_support;
pub mod output;
pub mod policy;
pub mod spec;
pub mod structured;
pub mod validate;

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::error::Result;

pub use context::{InjectedArg, Injection, ToolContext};
pub use invoke::{ToolCallOutput, invoke_tool, invoke_tool_message};
pub use output::{CommandPayload, ToolOutput};
pub use policy::{ToolErrorPolicy, WithErrorPolicy};
pub use spec::ToolSpec;
pub use structured::StructuredTool;
pub use validate::{ArgsValidator, validate_args};

/// A function a model can call.
///
/// Only the identity (name, description, argument schema) and [`call`](Tool::call) are required. The
/// arguments `call` receives have already been validated against [`model_schema`](Tool::model_schema) and
/// completed with the injected arguments when the tool runs through [`invoke_tool`] (as every runnable
/// call and the graph's tool node do).
#[async_trait]
pub trait Tool: Send + Sync {
    /// The tool's name, as the model calls it.
    fn name(&self) -> &str;

    /// What the tool does, for the model.
    fn description(&self) -> &str;

    /// The JSON schema of the arguments, injected arguments included.
    fn args_schema(&self) -> &Value;

    /// Whether an agent should stop after this tool and return its result directly.
    fn return_direct(&self) -> bool {
        false
    }

    /// Arguments filled from the context instead of by the model (hidden from the model's schema).
    fn injected_args(&self) -> &[InjectedArg] {
        &[]
    }

    /// What to do when [`call`](Tool::call) fails.
    fn error_policy(&self) -> ToolErrorPolicy {
        ToolErrorPolicy::Raise
    }

    /// Runs the tool on validated arguments.
    async fn call(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput>;

    /// The schema the model sees: [`args_schema`](Tool::args_schema) without the injected arguments.
    fn model_schema(&self) -> Cow<'_, Value> {
        let injected = self.injected_args();
        if injected.is_empty() {
            return Cow::Borrowed(self.args_schema());
        }
        let mut schema = self.args_schema().clone();
        if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            for arg in injected {
                props.remove(&arg.field);
            }
        }
        if let Some(required) = schema.get_mut("required").and_then(Value::as_array_mut) {
            required.retain(|r| !injected.iter().any(|arg| r.as_str() == Some(arg.field.as_str())));
        }
        Cow::Owned(schema)
    }

    /// [`model_schema`](Tool::model_schema) compiled, for checking the model's arguments. The default
    /// looks the schema up in a shared cache on each call; a tool whose schema does not change keeps the
    /// validator it made once (as [`StructuredTool`] and `#[tool]` tools do).
    fn args_validator(&self) -> ArgsValidator {
        ArgsValidator::new(&self.model_schema())
    }

    /// The description of this tool handed to chat models.
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(self.name(), self.description(), self.model_schema().into_owned())
    }
}

/// A shared, type-erased tool, as tool lists hold them.
///
/// It is a `Runnable<ToolCall, ToolMessage>`; its [`Tool`] methods are reached through `Deref`
/// (`Tool` is deliberately not implemented for `Arc`, so that `tool.name()` stays unambiguous here).
pub type SharedTool = Arc<dyn Tool>;

/// Methods available on every [`Tool`]; blanket-implemented.
pub trait ToolExt: Tool + Sized {
    /// Applies `policy` to the errors of this tool's body.
    fn with_error_policy(self, policy: ToolErrorPolicy) -> WithErrorPolicy<Self> {
        WithErrorPolicy::new(self, policy)
    }

    /// Erases the type, for lists of different tools.
    fn shared(self) -> SharedTool
    where
        Self: 'static,
    {
        Arc::new(self)
    }
}

impl<T: Tool> ToolExt for T {}

crate::impl_tool_runnable!(@runnable [] dyn Tool);
