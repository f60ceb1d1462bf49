//! Running a tool call: validation, injection, the call itself, the error policy, and the tool message.

use serde::Serialize;
use serde_json::Value;

use super::context::inject_args;
use super::{CommandPayload, Tool, ToolContext, ToolOutput};
use crate::config::RunnableConfig;
use crate::error::{Error, Result};
use crate::events::trace_tool_call;
use crate::messages::{Content, ToolCall, ToolMessage, ToolStatus};

/// The result of a tool call: a message for the model, or a command for the graph.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant, reason = "messages are the common case; boxing them buys nothing")]
pub enum ToolCallOutput {
    /// The tool's result as a tool message.
    Message(ToolMessage),
    /// A command for the graph running the tool (see [`ToolOutput::Command`]).
    Command(CommandPayload),
    /// Several results, in order (see [`ToolOutput::Many`]).
    Many(Vec<ToolCallOutput>),
}

impl Serialize for ToolCallOutput {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Self::Message(message) => message.serialize(serializer),
            Self::Command(command) => command.serialize(serializer),
            Self::Many(outputs) => outputs.serialize(serializer),
        }
    }
}

/// Runs `call` on `tool` as a traced tool run (`on_tool_start`, then `on_tool_end` or `on_tool_error`).
///
/// In order: the arguments are checked against the tool's model-facing schema (a violation is an
/// [`Error::ToolArguments`] listing every `path: message`, never handled by the error policy); injected
/// arguments are filled from `ctx`; the tool runs with `ctx` (its config replaced by the child config of
/// the tool's run); an error of the tool body goes through the tool's
/// [`ToolErrorPolicy`](super::ToolErrorPolicy), a handled error becoming a tool message with status
/// `error`; a result
/// becomes a tool message (text as is, JSON as its text, the artifact kept) or a command.
///
/// The tool call id in the message is `call.id`, or else the id in `ctx`.
pub async fn invoke_tool<T: Tool + ?Sized>(
    tool: &T,
    call: ToolCall,
    ctx: ToolContext,
) -> Result<ToolCallOutput> {
    let ToolCall { name: _, args, id } = call;
    let id = id.or_else(|| ctx.tool_call_id().map(str::to_owned));
    let mut ctx = match &id {
        Some(id) => ctx.with_tool_call_id(id.clone()),
        None => ctx,
    };
    // The tool runs with its run's child config: the context's own is not read again.
    let config = ctx.take_config();
    let name = tool.name().to_owned();
    let args = if args.is_null() { Value::Object(Default::default()) } else { args };
    trace_tool_call(tool.name(), id.clone(), args, config, |args, child| async move {
        if let Err(errors) = tool.args_validator().validate(&args) {
            return Err(Error::ToolArguments { tool: name, args: Box::new(args), errors });
        }
        let args = inject_args(&name, tool.injected_args(), args, &ctx)?;
        let ctx = ctx.with_config(child);
        let message = |content: Content, status: ToolStatus, artifact: Option<Value>| ToolMessage {
            content,
            tool_call_id: id.clone().unwrap_or_default(),
            name: Some(name.clone()),
            artifact,
            status,
            ..ToolMessage::default()
        };
        match tool.call(args, &ctx).await {
            Ok(output) => Ok(call_output(output, &message, id.as_deref(), &name)),
            Err(err) => match tool.error_policy().handle(&err) {
                Some(text) => Ok(ToolCallOutput::Message(message(text.into(), ToolStatus::Error, None))),
                None => Err(err),
            },
        }
    })
    .await
}

/// A tool's output as the result of its call: values become tool messages built by `message`.
fn call_output(
    output: ToolOutput,
    message: &dyn Fn(Content, ToolStatus, Option<Value>) -> ToolMessage,
    id: Option<&str>,
    name: &str,
) -> ToolCallOutput {
    match output {
        ToolOutput::Text(text) => ToolCallOutput::Message(message(text.into(), ToolStatus::Success, None)),
        ToolOutput::Json(value) => {
            ToolCallOutput::Message(message(value.to_string().into(), ToolStatus::Success, None))
        }
        ToolOutput::ContentAndArtifact { content, artifact } => {
            ToolCallOutput::Message(message(content, ToolStatus::Success, Some(artifact)))
        }
        ToolOutput::Command(command) => ToolCallOutput::Command(command),
        ToolOutput::Message(own) => {
            let mut own = *own;
            if own.tool_call_id.is_empty() {
                own.tool_call_id = id.unwrap_or_default().to_owned();
            }
            if own.name.is_none() {
                own.name = Some(name.to_owned());
            }
            ToolCallOutput::Message(own)
        }
        ToolOutput::Many(outputs) => {
            ToolCallOutput::Many(outputs.into_iter().map(|o| call_output(o, message, id, name)).collect())
        }
    }
}

/// Runs `call` on `tool` under `config` and returns the tool message (what `Runnable::invoke` does for
/// tools); a tool that returns a command is an error here, since only a graph can apply it.
pub async fn invoke_tool_message<T: Tool + ?Sized>(
    tool: &T,
    call: ToolCall,
    config: &RunnableConfig,
) -> Result<ToolMessage> {
    match invoke_tool(tool, call, ToolContext::new(config.clone())).await? {
        ToolCallOutput::Message(message) => Ok(message),
        ToolCallOutput::Command(_) | ToolCallOutput::Many(_) => Err(Error::Tool {
            tool: tool.name().to_owned(),
            message:
                "the tool returned a command or several outputs, which only a graph can apply; run it in a \
                      tool node"
                    .to_owned(),
        }),
    }
}

/// Makes a [`Tool`] type a `Runnable<ToolCall, ToolMessage>` of kind `Tool` (named after the tool), whose
/// `invoke` is [`invoke_tool_message`].
///
/// ```
/// use serde_json::{Value, json};
/// use weft_runnable_core::{Result, Runnable, RunnableConfig, Tool, ToolCall, ToolContext, ToolOutput};
///
/// /// Says hello to `name`.
/// struct Greet {
///     schema: Value,
/// }
///
/// #[async_trait::async_trait]
/// impl Tool for Greet {
///     fn name(&self) -> &str {
///         "greet"
///     }
///
///     fn description(&self) -> &str {
///         "Says hello."
///     }
///
///     fn args_schema(&self) -> &Value {
///         &self.schema
///     }
///
///     async fn call(&self, args: Value, _: &ToolContext) -> Result<ToolOutput> {
///         Ok(ToolOutput::text(format!("hello, {}", args["name"].as_str().unwrap_or("you"))))
///     }
/// }
///
/// weft_runnable_core::impl_tool_runnable!(Greet);
/// // For a generic type: `impl_tool_runnable!([T: Clone + Send + Sync] MyGenericTool<T>);`
///
/// # tokio_test::block_on(async {
/// let tool = Greet { schema: json!({"type": "object", "properties": {"name": {"type": "string"}}}) };
/// let call = ToolCall { name: "greet".into(), args: json!({"name": "Ada"}), id: Some("call_1".into()) };
/// let message = tool.invoke(call, &RunnableConfig::default()).await?;
/// assert_eq!(message.content.text(), "hello, Ada");
/// assert_eq!(message.tool_call_id, "call_1");
/// # Ok::<(), weft_runnable_core::Error>(())
/// # }).unwrap();
/// ```
#[macro_export]
macro_rules! impl_tool_runnable {
    (@runnable [$($gen:tt)*] $ty:ty) => {
        #[$crate::__private::async_trait]
        impl<$($gen)*> $crate::Runnable<$crate::ToolCall, $crate::ToolMessage> for $ty {
            fn name(&self) -> ::std::borrow::Cow<'_, str> {
                ::std::borrow::Cow::Borrowed($crate::Tool::name(self))
            }

            fn kind(&self) -> $crate::RunKind {
                $crate::RunKind::Tool
            }

            async fn invoke(
                &self,
                call: $crate::ToolCall,
                config: &$crate::RunnableConfig,
            ) -> $crate::Result<$crate::ToolMessage> {
                $crate::tools::invoke_tool_message(self, call, config).await
            }
        }
    };
    ([$($gen:tt)*] $ty:ty) => {
        $crate::impl_tool_runnable!(@runnable [$($gen)*] $ty);
        $crate::impl_pipe_operator!([$($gen)*] $ty => $crate::ToolMessage);
    };
    ($ty:ty) => {
        $crate::impl_tool_runnable!([] $ty);
    };
}
