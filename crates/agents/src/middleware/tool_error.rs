//! [`ToolErrorHandler`]: LangChain's `ToolErrorMiddleware`, tool failures turned into messages for the
//! model.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use weft_runnable_core::{Error, Result, ToolCallOutput};

use crate::agent::{Hooks, Middleware, ToolCallRequest, ToolHandler};

type OnErrorFn<C> = dyn Fn(&Error, &ToolCallRequest<C>) -> Option<String> + Send + Sync;

/// Turns a tool's failure into an error tool message with the text `on_error` makes of it, so that the
/// model can correct itself (LangChain's `ToolErrorMiddleware`); `None` lets the error fail the run.
/// Control flow (an interrupt, a command for the parent graph) always passes.
pub struct ToolErrorHandler<C = ()> {
    on_error: Arc<OnErrorFn<C>>,
    tools: Option<Vec<String>>,
}

impl<C> fmt::Debug for ToolErrorHandler<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolErrorHandler").field("tools", &self.tools).finish_non_exhaustive()
    }
}

impl<C> ToolErrorHandler<C> {
    /// Answers failures with what `on_error` returns.
    pub fn new(
        on_error: impl Fn(&Error, &ToolCallRequest<C>) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        Self { on_error: Arc::new(on_error), tools: None }
    }

    /// Only for these tools.
    #[must_use]
    pub fn tools(mut self, tools: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.tools = Some(tools.into_iter().map(Into::into).collect());
        self
    }
}

#[async_trait]
impl<C: Send + Sync + 'static> Middleware<C> for ToolErrorHandler<C> {
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed("ToolErrorMiddleware")
    }

    fn hooks(&self) -> Hooks {
        Hooks::new().wrap_tool_call()
    }

    async fn wrap_tool_call(
        &self,
        request: ToolCallRequest<C>,
        next: ToolHandler<'_, C>,
    ) -> Result<ToolCallOutput> {
        if !request.is_for(self.tools.as_deref()) {
            return next.call(request).await;
        }
        let err = match next.call(request.clone()).await {
            Ok(output) => return Ok(output),
            Err(err) if err.is_control_flow() => return Err(err),
            Err(err) => err,
        };
        let Some(content) = (self.on_error)(&err, &request) else { return Err(err) };
        Ok(request.error_reply(content))
    }
}
