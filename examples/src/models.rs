//! The chat model of the examples: picked in one place, scripted unless a live model is configured.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use schemars::JsonSchema;
use serde::Serialize;
use weft::fakes::{FakeChatModel, FakeReply};
use weft::{AiMessage, CallOptions, ChatModel, Message, RunnableConfig, StructuredOutputMethod};

/// Where the examples' chat models come from, and how strictly the examples check what they say.
///
/// On the **script** (the default), each role of an example (a router, a grader, a writer) is a
/// [`FakeChatModel`] given the replies it will make, so the example can check its outcome exactly.
/// On a **live** model, the scripts are ignored and every role talks to that model; the examples then
/// check only the protocol (the run ended, the answer is not empty, the route is one of the allowed
/// ones), because a live model's words cannot be known in advance. [`Models::expect_eq`] is the check
/// that holds on the script only.
#[derive(Clone)]
pub struct Models {
    live: Option<Arc<dyn ChatModel>>,
    /// The live server answers by the scripts (`WEFT_EXAMPLES_EXACT=1`): exact checks apply.
    exact_live: bool,
    /// The exact checks a live run could not make, listed when the last clone is dropped.
    unchecked: Arc<Unchecked>,
    /// Where the live model is served, for the output.
    at: Option<String>,
    latency: Option<Duration>,
}

/// Whether a live model was asked for, and which.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LiveRequest {
    /// The script; `configured` when OPENAI_* variables are set anyway.
    No { configured: bool },
    /// A live model: its name and base URL (`None`: OpenAI's).
    Yes { model: String, base_url: Option<String> },
}

/// The exact checks a live run could not make; printed when the example's models are dropped, so the
/// output says what a real model's run did not check.
#[derive(Debug, Default)]
struct Unchecked(std::sync::Mutex<Vec<String>>);

impl Unchecked {
    fn note(&self, what: &str) {
        if let Ok(mut list) = self.0.lock() {
            list.push(what.to_owned());
        }
    }
}

impl Drop for Unchecked {
    fn drop(&mut self) {
        let list = self.0.get_mut().map(std::mem::take).unwrap_or_default();
        if !list.is_empty() {
            println!(
                "not checked on a live model ({} exact checks that hold on the script only): {}",
                list.len(),
                list.join("; ")
            );
        }
    }
}

/// [`ChatOpenAI`](weft::openai::ChatOpenAI) at temperature 0, model `model`, at `base_url` (OpenAI's
/// API when `None`).
#[cfg(feature = "live")]
fn live_model(model: &str, base_url: Option<&str>) -> Result<Models, String> {
    let mut builder = weft::openai::ChatOpenAI::builder().model(model).temperature(0.0);
    if let Some(url) = base_url {
        builder = builder.base_url(url);
    }
    let chat = builder.build().map_err(|err| err.to_string())?;
    let at = base_url.unwrap_or("https://api.openai.com/v1").to_owned();
    Ok(Models { at: Some(at), ..Models::live(chat) })
}

/// Without the `live` feature there is no OpenAI client to run on: the error says how to build one.
#[cfg(not(feature = "live"))]
fn live_model(_model: &str, _base_url: Option<&str>) -> Result<Models, String> {
    Err("the examples were built without their `live` feature; run them with `--features live`, e.g. \
         `cargo run --example quickstart --features live -- --live`"
        .to_owned())
}

/// Reads the live model's settings from the environment when `asked`.
pub(crate) fn live_request(asked: bool) -> LiveRequest {
    let configured =
        ["OPENAI_API_KEY", "OPENAI_BASE_URL"].iter().any(|name| std::env::var_os(name).is_some());
    if !asked {
        return LiveRequest::No { configured };
    }
    LiveRequest::Yes {
        model: std::env::var("OPENAI_MODEL").unwrap_or_else(|_| "gpt-4o-mini".to_owned()),
        base_url: std::env::var("OPENAI_BASE_URL").ok(),
    }
}

impl fmt::Debug for Models {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Models").field("source", &self.describe()).finish()
    }
}

impl Models {
    /// The models every example runs on: **the one place that chooses them**.
    ///
    /// The script, unless a live model is asked for: with the `--live` argument or `WEFT_EXAMPLES_LIVE=1`,
    /// every role talks to `ChatOpenAI` (the `live` feature of this package) at temperature 0, model `OPENAI_MODEL` (default `gpt-4o-mini`),
    /// at `OPENAI_BASE_URL` (for example the local server that `cargo xtask llm-server` starts; default
    /// OpenAI's API, which needs `OPENAI_API_KEY`). An API key in the environment alone never switches an
    /// example to a paid model. The first line of output says which model runs, and where. A live model
    /// that cannot be built (a malformed URL or key) ends the example with the reason.
    pub fn from_env() -> Self {
        let asked = std::env::args().skip(1).any(|arg| arg == "--live")
            || std::env::var("WEFT_EXAMPLES_LIVE").is_ok_and(|v| v == "1");
        let models = match live_request(asked) {
            LiveRequest::No { configured } => {
                if configured {
                    println!(
                        "note: OPENAI_* is set but unused; pass --live (or WEFT_EXAMPLES_LIVE=1) to run on it"
                    );
                }
                Self::scripted()
            }
            LiveRequest::Yes { model, base_url } => match live_model(&model, base_url.as_deref()) {
                Ok(models) if std::env::var("WEFT_EXAMPLES_EXACT").is_ok_and(|v| v == "1") => {
                    models.answering_by_script()
                }
                Ok(models) => models,
                Err(err) => {
                    eprintln!("cannot use the live OpenAI model (--live): {err}");
                    std::process::exit(2);
                }
            },
        };
        println!("model: {}", models.describe());
        models
    }

    /// Scripted models: each role answers with the replies it is given.
    pub fn scripted() -> Self {
        Self { live: None, exact_live: false, unchecked: Arc::default(), at: None, latency: None }
    }

    /// Makes each scripted reply take `latency`, as a live model's would, so that concurrent calls
    /// overlap visibly; a live model is left as it is.
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = Some(latency);
        self
    }

    /// A live model for every role; scripts are ignored and only protocol checks apply.
    pub fn live(model: impl ChatModel + 'static) -> Self {
        Self {
            live: Some(Arc::new(model)),
            exact_live: false,
            unchecked: Arc::default(),
            at: None,
            latency: None,
        }
    }

    /// Declares that the live model answers by the examples' scripts (fakellm with
    /// `examples/fakellm.yaml`), so that the exact checks apply to it too.
    pub fn answering_by_script(mut self) -> Self {
        self.exact_live = self.live.is_some();
        self
    }

    /// Whether the models follow their scripts (scripted `FakeChatModel`s, not a live model).
    pub fn is_scripted(&self) -> bool {
        self.live.is_none()
    }

    /// What the models are, for the reader of an example's output.
    pub fn describe(&self) -> String {
        match &self.live {
            None => "scripted (weft's FakeChatModel: no API key or server needed)".to_owned(),
            Some(model) => {
                let exact =
                    if self.exact_live { ", answering by the scripts: exact checks apply" } else { "" };
                match &self.at {
                    Some(at) => format!("{} ({}) at {at}, live{exact}", model.model_name(), model.provider()),
                    None => format!("{} ({}), live{exact}", model.model_name(), model.provider()),
                }
            }
        }
    }

    /// The model of one role of an example: on the script it answers with `script`, in order (a call
    /// past the end is an error that says so); on a live model it is that model.
    pub fn chat_model<R: Into<FakeReply>>(
        &self,
        role: &str,
        script: impl IntoIterator<Item = R>,
    ) -> ExampleModel {
        match &self.live {
            Some(model) => ExampleModel {
                role: role.to_owned(),
                model: Arc::clone(model),
                script: None,
                prompts: Arc::default(),
            },
            None => {
                let mut fake = FakeChatModel::new(script).with_model_name(format!("scripted-{role}"));
                if let Some(latency) = self.latency {
                    fake = fake.with_delay(latency);
                }
                ExampleModel {
                    role: role.to_owned(),
                    model: Arc::new(fake.clone()),
                    script: Some(fake),
                    prompts: Arc::default(),
                }
            }
        }
    }

    /// Whether exact checks apply: on the script, and on a live server that answers by the examples'
    /// scripts (fakellm serving `examples/fakellm.yaml`, as CI runs it), which `WEFT_EXAMPLES_EXACT=1`
    /// declares.
    pub fn checks_exactly(&self) -> bool {
        self.is_scripted() || self.exact_live
    }

    /// Checks that `actual` is `expected` where every reply is known ([`checks_exactly`](Self::checks_exactly))
    /// and panics with `what` if not; on another live model it cannot be checked, so it prints the value
    /// and counts the check among those the run could not make (listed when the example ends). Protocol
    /// checks that hold on any model are plain `assert!`s in the examples.
    pub fn expect_eq<A, E>(&self, what: &str, actual: A, expected: E)
    where
        A: PartialEq<E> + fmt::Debug,
        E: fmt::Debug,
    {
        if self.checks_exactly() {
            assert_eq!(actual, expected, "{what}");
        } else {
            println!("  (not checked on a live model: {what}: {actual:?}; the script expects {expected:?})");
            self.unchecked.note(what);
        }
    }
}

/// The chat model of one role of an example (see [`Models::chat_model`]): a [`ChatModel`] and a runnable,
/// so it binds tools, gives structured output and pipes like any model.
#[derive(Clone)]
pub struct ExampleModel {
    role: String,
    model: Arc<dyn ChatModel>,
    script: Option<FakeChatModel>,
    /// The messages of each call, whatever the model.
    prompts: Arc<std::sync::Mutex<Vec<Vec<Message>>>>,
}

impl fmt::Debug for ExampleModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExampleModel")
            .field("role", &self.role)
            .field("model", &self.model.model_name())
            .field("scripted", &self.script.is_some())
            .finish()
    }
}

impl ExampleModel {
    /// How this role should give structured output: by a tool call on the script (what
    /// [`structured`] writes), by the type's JSON schema as `response_format` on a live model (OpenAI's
    /// strict mode; llama.cpp's server turns the schema into a grammar, so even a small model answers in
    /// shape, where it may not make a tool call).
    pub fn structured_method(&self) -> StructuredOutputMethod {
        if self.script.is_some() {
            StructuredOutputMethod::FunctionCalling
        } else {
            StructuredOutputMethod::JsonSchema
        }
    }

    /// The role it plays in the example.
    pub fn role(&self) -> &str {
        &self.role
    }

    /// The scripted model behind it, to check what it was asked; `None` on a live model.
    pub fn script(&self) -> Option<&FakeChatModel> {
        self.script.as_ref()
    }

    /// The messages of each call so far, on the script and on a live model alike.
    pub fn prompts(&self) -> Vec<Vec<Message>> {
        self.prompts.lock().map(|prompts| prompts.clone()).unwrap_or_default()
    }

    fn record(&self, messages: &[Message]) {
        if let Ok(mut prompts) = self.prompts.lock() {
            prompts.push(messages.to_vec());
        }
    }
}

#[async_trait]
impl ChatModel for ExampleModel {
    fn type_name(&self) -> Cow<'_, str> {
        self.model.type_name()
    }

    fn model_name(&self) -> &str {
        self.model.model_name()
    }

    fn provider(&self) -> &str {
        self.model.provider()
    }

    async fn generate(
        &self,
        messages: Vec<Message>,
        options: &CallOptions,
        config: &RunnableConfig,
    ) -> weft::Result<AiMessage> {
        self.record(&messages);
        self.model.generate(messages, options, config).await
    }

    fn stream_chunks<'a>(
        &'a self,
        messages: Vec<Message>,
        options: &CallOptions,
        config: &RunnableConfig,
    ) -> BoxStream<'a, weft::Result<AiMessage>> {
        self.record(&messages);
        self.model.stream_chunks(messages, options, config)
    }
}

weft::impl_chat_model_runnable!(ExampleModel);

/// The reply of a model asked for a `T` by function calling
/// ([`with_structured_output`](weft::ChatModelExt::with_structured_output)'s default): one call of the
/// tool named after `T`, with `value` as its arguments. Scripts use it to answer structured questions.
pub fn structured<T: JsonSchema + Serialize>(value: &T) -> FakeReply {
    FakeReply::structured(value)
}
