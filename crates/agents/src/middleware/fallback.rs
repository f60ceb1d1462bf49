//! [`ModelFallback`]: LangChain's `ModelFallbackMiddleware`, other models tried in order when the
//! agent's model fails.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use weft_runnable_core::{ChatModel, Result};

use crate::agent::{Hooks, Middleware, ModelHandler, ModelRequest, ModelResponse};

/// When a model call fails, tries the same request on each fallback model in turn (LangChain's
/// `ModelFallbackMiddleware`); the last failure is the run's. Control flow (an interrupt) is never
/// retried on another model.
#[derive(Clone)]
pub struct ModelFallback {
    models: Vec<Arc<dyn ChatModel>>,
}

impl fmt::Debug for ModelFallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelFallback")
            .field("models", &self.models.iter().map(|m| m.model_name().to_owned()).collect::<Vec<_>>())
            .finish()
    }
}

impl ModelFallback {
    /// Falls back to `first`, then to the models added with [`then`](Self::then).
    pub fn new<M: ChatModel + 'static>(first: M) -> Self {
        Self { models: vec![Arc::new(first)] }
    }

    /// Adds a model tried after the others.
    #[must_use]
    pub fn then<M: ChatModel + 'static>(mut self, model: M) -> Self {
        self.models.push(Arc::new(model));
        self
    }
}

#[async_trait]
impl<C: Send + Sync + 'static> Middleware<C> for ModelFallback {
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed("ModelFallbackMiddleware")
    }

    fn hooks(&self) -> Hooks {
        Hooks::new().wrap_model_call()
    }

    async fn wrap_model_call(
        &self,
        request: ModelRequest<C>,
        next: ModelHandler<'_, C>,
    ) -> Result<ModelResponse> {
        let mut last = match next.call(request.clone()).await {
            Ok(response) => return Ok(response),
            Err(err) if err.is_control_flow() => return Err(err),
            Err(err) => err,
        };
        for model in &self.models {
            let mut fallback = request.clone();
            fallback.model = Arc::clone(model);
            match next.call(fallback).await {
                Ok(response) => return Ok(response),
                Err(err) if err.is_control_flow() => return Err(err),
                Err(err) => last = err,
            }
        }
        Err(last)
    }
}
