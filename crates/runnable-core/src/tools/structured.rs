//! `StructuredTool`: a tool made from a closure.

use std::fmt;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::spec::schema_value;
use super::{ArgsValidator, InjectedArg, Tool, ToolContext, ToolOutput};
use crate::error::{Error, Result};

type ToolFn = dyn Fn(Value, ToolContext) -> BoxFuture<'static, Result<ToolOutput>> + Send + Sync;

/// A tool made from an async closure, with a JSON schema given by hand ([`from_fn`](Self::from_fn)) or
/// derived from a typed arguments struct ([`from_typed`](Self::from_typed)).
///
/// ```
/// use schemars::JsonSchema;
/// use serde::Deserialize;
/// use weft_runnable_core::{Runnable, RunnableConfig, StructuredTool, ToolCall};
///
/// /// Numbers to add.
/// #[derive(Deserialize, JsonSchema)]
/// struct AddArgs {
///     a: i64,
///     b: i64,
/// }
///
/// let add = StructuredTool::from_typed("add", "Adds two numbers.", |args: AddArgs| async move {
///     Ok((args.a + args.b).to_string())
/// });
/// # tokio_test::block_on(async {
/// let call = ToolCall { name: "add".into(), args: serde_json::json!({"a": 2, "b": 3}), id: Some("c1".into()) };
/// let message = add.invoke(call, &RunnableConfig::default()).await.unwrap();
/// assert_eq!(message.content.text(), "5");
/// # });
/// ```
#[derive(Clone)]
pub struct StructuredTool {
    name: String,
    description: String,
    schema: Value,
    return_direct: bool,
    injected: Vec<InjectedArg>,
    func: Arc<ToolFn>,
    /// The model-facing schema compiled, made at the first call.
    validator: OnceLock<ArgsValidator>,
}

impl fmt::Debug for StructuredTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StructuredTool")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("schema", &self.schema)
            .field("return_direct", &self.return_direct)
            .field("injected", &self.injected)
            .finish_non_exhaustive()
    }
}

impl StructuredTool {
    /// A tool taking JSON arguments described by `schema`; `f` receives the validated arguments (injected
    /// ones filled in) and the context.
    pub fn from_fn<F, Fut, O>(
        name: impl Into<String>,
        description: impl Into<String>,
        schema: Value,
        f: F,
    ) -> Self
    where
        F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O>> + Send + 'static,
        O: Into<ToolOutput>,
    {
        let func = move |args: Value, ctx: ToolContext| -> BoxFuture<'static, Result<ToolOutput>> {
            let fut = f(args, ctx);
            Box::pin(async move { fut.await.map(Into::into) })
        };
        Self {
            name: name.into(),
            description: description.into(),
            schema: super::spec::clean_schema(schema),
            return_direct: false,
            injected: Vec::new(),
            func: Arc::new(func),
            validator: OnceLock::new(),
        }
    }

    /// A tool whose arguments are the fields of `A`; the schema is `A`'s JSON schema and `f` receives the
    /// arguments deserialized. An empty `description` takes `A`'s doc comment.
    pub fn from_typed<A, F, Fut, O>(name: impl Into<String>, description: impl Into<String>, f: F) -> Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        F: Fn(A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O>> + Send + 'static,
        O: Into<ToolOutput>,
    {
        let f = Arc::new(f);
        Self::from_typed_with_context(name, description, move |args: A, _ctx: ToolContext| {
            let f = Arc::clone(&f);
            async move { f(args).await }
        })
    }

    /// Like [`from_typed`](Self::from_typed), with the context passed to `f` too.
    pub fn from_typed_with_context<A, F, Fut, O>(
        name: impl Into<String>,
        description: impl Into<String>,
        f: F,
    ) -> Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        F: Fn(A, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O>> + Send + 'static,
        O: Into<ToolOutput>,
    {
        let name = name.into();
        let mut description = description.into();
        let mut schema = schema_value::<A>();
        if let Some(Value::String(doc)) = schema.as_object_mut().and_then(|o| o.remove("description")) {
            if description.is_empty() {
                description = doc;
            }
        }
        let tool_name = name.clone();
        let f = Arc::new(f);
        Self::from_fn(name, description, schema, move |args: Value, ctx: ToolContext| {
            let parsed = parse_args::<A>(&tool_name, args);
            let f = Arc::clone(&f);
            async move { f(parsed?, ctx).await }
        })
    }

    /// Sets whether an agent stops after this tool and returns its result directly.
    pub fn with_return_direct(mut self, return_direct: bool) -> Self {
        self.return_direct = return_direct;
        self
    }

    /// Declares an argument of the schema as injected: hidden from the model, filled from the context.
    pub fn with_injected(mut self, arg: InjectedArg) -> Self {
        self.injected.push(arg);
        // The model's schema changed: compile it again when next needed.
        self.validator = OnceLock::new();
        self
    }
}

/// Deserializes validated arguments into `A`; a failure is an [`Error::ToolArguments`].
pub(crate) fn parse_args<A: DeserializeOwned>(tool: &str, args: Value) -> Result<A> {
    serde_json::from_value::<A>(args.clone()).map_err(|e| Error::ToolArguments {
        tool: tool.to_owned(),
        args: Box::new(args),
        errors: vec![format!("(root): {e}")],
    })
}

#[async_trait]
impl Tool for StructuredTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn args_schema(&self) -> &Value {
        &self.schema
    }

    fn return_direct(&self) -> bool {
        self.return_direct
    }

    fn injected_args(&self) -> &[InjectedArg] {
        &self.injected
    }

    fn args_validator(&self) -> ArgsValidator {
        self.validator.get_or_init(|| ArgsValidator::new(&self.model_schema())).clone()
    }

    async fn call(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput> {
        (self.func)(args, ctx.clone()).await
    }
}

crate::impl_tool_runnable!(StructuredTool);
