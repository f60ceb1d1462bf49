//! The error type shared by every runnable.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Result alias used throughout weft.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while running a runnable.
///
/// Variants carry enough context to act on (which variable is missing, which tool failed); large payloads
/// are boxed so that `Result` stays small.
///
/// `?` converts into it the errors a weft program meets: I/O, `serde_json`, the graph's, the
/// checkpointers' and stores', the providers' and the server's (each crate converts its own). Its `Debug`
/// form is the readable chain, the message then each cause, as `anyhow` prints it, so that
/// `fn main() -> weft::Result<()>` reports a failure well; `{:#?}` gives the variant and its fields.
///
/// ```
/// fn read_config(path: &str) -> weft_runnable_core::Result<serde_json::Value> {
///     let text = std::fs::read_to_string(path)?; // std::io::Error
///     Ok(serde_json::from_str(&text)?) // serde_json::Error
/// }
/// let err = read_config("/no/such/weft/config.json").unwrap_err();
/// assert!(format!("{err:?}").starts_with("No such file or directory"), "{err:?}");
/// assert!(format!("{err:#?}").starts_with("Custom("), "{err:#?}");
/// ```
#[derive(Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A prompt was formatted with missing variables.
    #[error(
        "input to {template} is missing variables {missing:?}; expected: {expected:?}; received: {received:?}; \
         if {{{first}}} is meant as literal text, escape its braces: {{{{{first}}}}}",
        first = .missing.first().map_or("", String::as_str)
    )]
    MissingVariables {
        /// Name of the template type.
        template: &'static str,
        /// Variables that were not supplied.
        missing: Vec<String>,
        /// Every variable the template expects.
        expected: Vec<String>,
        /// The variables that were supplied.
        received: Vec<String>,
    },
    /// A value of the wrong shape was given to a prompt, parser or runnable.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A template string could not be parsed.
    #[error("invalid template: {0}")]
    InvalidTemplate(String),
    /// An output parser rejected a model's output.
    #[error(transparent)]
    OutputParser(Box<OutputParserError>),
    /// A tool was called with arguments that break its JSON schema.
    #[error("error invoking tool '{tool}' with arguments {args}: {}", .errors.join("; "))]
    ToolArguments {
        /// The tool's name.
        tool: String,
        /// The arguments as received.
        args: Box<serde_json::Value>,
        /// One line per schema violation, as `path: message`.
        errors: Vec<String>,
    },
    /// A tool failed while running.
    #[error("tool '{tool}' failed: {message}")]
    Tool {
        /// The tool's name.
        tool: String,
        /// What went wrong.
        message: String,
    },
    /// A chat model or another provider failed.
    #[error(transparent)]
    Model(Arc<ModelError>),
    /// A required key is missing from `config.configurable`.
    #[error("missing keys {missing:?} in config.configurable; expected keys are {expected:?}")]
    MissingConfigKeys {
        /// The keys that are missing.
        missing: Vec<String>,
        /// Every key the runnable expects.
        expected: Vec<String>,
    },
    /// A stream ended without producing any chunk where at least one was needed.
    #[error("{0} produced an empty stream")]
    EmptyStream(String),
    /// A run did not finish in time.
    #[error("{what} timed out after {after:?}")]
    Timeout {
        /// What timed out.
        what: String,
        /// The limit that was exceeded.
        after: Duration,
    },
    /// A value could not be converted to or from JSON.
    #[error("serialization failed: {0}")]
    Serialization(String),
    /// Control flow travelling through runnables (an interrupt, a command for a parent graph).
    ///
    /// It is never retried and never handled by fallbacks.
    #[error("{0}")]
    ControlFlow(ControlFlow),
    /// An error raised by user code, or another crate's error converted with `?` (its message and
    /// causes are this error's).
    #[error(transparent)]
    Custom(Arc<dyn std::error::Error + Send + Sync + 'static>),
    /// A value in the config (for example a `configurable` key) is not one the runnable accepts.
    #[error("invalid config: {0}")]
    InvalidConfig(String),
    /// User code panicked (a graph's node or router, for one); the panic's message. A graph's default
    /// retry policy skips it (its `retry_on` may ask for it).
    #[error("panicked: {0}")]
    Panicked(String),
}

impl Error {
    /// Wraps any error raised by user code.
    pub fn custom<E>(err: E) -> Self
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        Self::Custom(Arc::new(err))
    }

    /// An error with just a message, for user code that has no error type of its own.
    pub fn msg(message: impl Into<String>) -> Self {
        Self::Custom(Arc::new(MessageError(message.into())))
    }

    /// The error of a caught panic, from its payload (`std::panic::catch_unwind`'s `Err`): its message when
    /// it is text, else a placeholder.
    pub fn from_panic(payload: &(dyn Any + Send)) -> Self {
        let message = payload
            .downcast_ref::<&str>()
            .map(|text| (*text).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_owned());
        Self::Panicked(message)
    }

    /// Whether this error is control flow rather than a failure.
    pub fn is_control_flow(&self) -> bool {
        matches!(self, Self::ControlFlow(_))
    }

    /// The output-parser error inside, if this is one.
    pub fn as_output_parser(&self) -> Option<&OutputParserError> {
        match self {
            Self::OutputParser(e) => Some(e),
            _ => None,
        }
    }

    /// The model error inside, if this is one.
    pub fn as_model(&self) -> Option<&ModelError> {
        match self {
            Self::Model(e) => Some(e),
            _ => None,
        }
    }

    /// The user error inside, downcast to `E`, if this is one of that type.
    pub fn downcast_custom<E: std::error::Error + 'static>(&self) -> Option<&E> {
        match self {
            Self::Custom(e) => e.downcast_ref::<E>(),
            _ => None,
        }
    }
}

/// Readable: the message, then each cause that says something new, numbered as `anyhow` numbers them.
/// The alternate form (`{:#?}`) is the variant and its fields.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            return self.dump(f);
        }
        let message = self.to_string();
        f.write_str(&message)?;
        let causes = causes(self, &message);
        match causes.as_slice() {
            [] => Ok(()),
            [only] => write!(f, "\n\nCaused by:\n    {only}"),
            many => {
                f.write_str("\n\nCaused by:")?;
                many.iter().enumerate().try_for_each(|(n, cause)| write!(f, "\n    {n}: {cause}"))
            }
        }
    }
}

/// The messages of `error`'s sources, leaving out each one that an earlier message already holds (many
/// errors repeat their source's message in their own).
pub(crate) fn causes(error: &(dyn std::error::Error + 'static), message: &str) -> Vec<String> {
    let mut said = message.to_owned();
    let mut causes = Vec::new();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !said.contains(&text) {
            said.push('\n');
            said.push_str(&text);
            causes.push(text);
        }
        source = cause.source();
    }
    causes
}

impl Error {
    /// The variant and its fields, as a derived `Debug` would print them.
    fn dump(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MissingVariables { template, missing, expected, received } => f
                .debug_struct("MissingVariables")
                .field("template", template)
                .field("missing", missing)
                .field("expected", expected)
                .field("received", received)
                .finish(),
            Self::InvalidInput(m) => f.debug_tuple("InvalidInput").field(m).finish(),
            Self::InvalidTemplate(m) => f.debug_tuple("InvalidTemplate").field(m).finish(),
            Self::OutputParser(e) => f.debug_tuple("OutputParser").field(e).finish(),
            Self::ToolArguments { tool, args, errors } => f
                .debug_struct("ToolArguments")
                .field("tool", tool)
                .field("args", args)
                .field("errors", errors)
                .finish(),
            Self::Tool { tool, message } => {
                f.debug_struct("Tool").field("tool", tool).field("message", message).finish()
            }
            Self::Model(e) => f.debug_tuple("Model").field(e).finish(),
            Self::MissingConfigKeys { missing, expected } => f
                .debug_struct("MissingConfigKeys")
                .field("missing", missing)
                .field("expected", expected)
                .finish(),
            Self::EmptyStream(m) => f.debug_tuple("EmptyStream").field(m).finish(),
            Self::Timeout { what, after } => {
                f.debug_struct("Timeout").field("what", what).field("after", after).finish()
            }
            Self::Serialization(m) => f.debug_tuple("Serialization").field(m).finish(),
            Self::ControlFlow(c) => f.debug_tuple("ControlFlow").field(c).finish(),
            Self::Custom(e) => f.debug_tuple("Custom").field(e).finish(),
            Self::InvalidConfig(m) => f.debug_tuple("InvalidConfig").field(m).finish(),
            Self::Panicked(m) => f.debug_tuple("Panicked").field(m).finish(),
        }
    }
}

/// An I/O error in user code (a file, a socket), kept whole: [`Error::downcast_custom`] gives it back.
impl From<std::io::Error> for Error {
    fn from(err: std::io::Error) -> Self {
        Self::custom(err)
    }
}

impl From<serde_json::Error> for Error {
    fn from(err: serde_json::Error) -> Self {
        Self::Serialization(err.to_string())
    }
}

impl From<OutputParserError> for Error {
    fn from(err: OutputParserError) -> Self {
        Self::OutputParser(Box::new(err))
    }
}

impl From<ModelError> for Error {
    fn from(err: ModelError) -> Self {
        Self::Model(Arc::new(err))
    }
}

impl From<ControlFlow> for Error {
    fn from(flow: ControlFlow) -> Self {
        Self::ControlFlow(flow)
    }
}

#[derive(Debug)]
struct MessageError(String);

impl fmt::Display for MessageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MessageError {}

/// An output parser could not make sense of a model's output.
///
/// `observation` and `send_to_llm` let an agent loop send a correction back to the model.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{error}")]
pub struct OutputParserError {
    /// What went wrong.
    pub error: String,
    /// The text to show the model as the observation, when the error is sent back to it.
    pub observation: Option<String>,
    /// The raw model output that failed to parse.
    pub llm_output: Option<String>,
    /// Whether an agent should send `observation` back to the model.
    pub send_to_llm: bool,
}

impl OutputParserError {
    /// A parse error with only a message.
    pub fn new(error: impl Into<String>) -> Self {
        Self { error: error.into(), observation: None, llm_output: None, send_to_llm: false }
    }

    /// Sets the raw model output.
    pub fn with_llm_output(mut self, output: impl Into<String>) -> Self {
        self.llm_output = Some(output.into());
        self
    }

    /// Marks the error to be sent back to the model with this observation.
    pub fn send_to_llm(mut self, observation: impl Into<String>) -> Self {
        self.observation = Some(observation.into());
        self.send_to_llm = true;
        self
    }
}

/// What kind of provider failure happened, for callers that decide whether to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ModelErrorKind {
    /// The provider rejected the request because of rate limits (HTTP 429).
    RateLimited,
    /// The provider failed (HTTP 5xx).
    Server,
    /// The request was malformed (HTTP 400 and friends).
    InvalidRequest,
    /// The credentials were refused (HTTP 401/403).
    Authentication,
    /// The request timed out.
    Timeout,
    /// The connection failed or was cut.
    Connection,
    /// The response could not be understood (bad JSON, a cut stream).
    InvalidResponse,
    /// Anything else, including scripted failures of fake models.
    Other,
}

/// A failure of a chat model, embeddings or another provider.
///
/// A provider crate keeps its own typed error as the [`source`](std::error::Error::source), so a caller
/// can get it back with [`ModelError::provider_error`].
#[derive(Debug, Clone, thiserror::Error)]
#[error("{provider} error: {message}{}", .status.map(|s| format!(" (status {s})")).unwrap_or_default())]
pub struct ModelError {
    /// Which provider failed (`openai`, `fake`, ...).
    pub provider: String,
    /// What kind of failure this is.
    pub kind: ModelErrorKind,
    /// The HTTP status, when there was one.
    pub status: Option<u16>,
    /// How long the provider asked callers to wait before retrying.
    pub retry_after: Option<Duration>,
    /// The provider's message.
    pub message: String,
    /// The provider's own error.
    #[source]
    source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
}

/// Two model errors are equal when their provider, kind, status, retry delay and message are; the
/// provider's own errors are not compared.
impl PartialEq for ModelError {
    fn eq(&self, other: &Self) -> bool {
        self.provider == other.provider
            && self.kind == other.kind
            && self.status == other.status
            && self.retry_after == other.retry_after
            && self.message == other.message
    }
}

impl ModelError {
    /// A provider error of the given kind.
    pub fn new(provider: impl Into<String>, kind: ModelErrorKind, message: impl Into<String>) -> Self {
        Self {
            provider: provider.into(),
            kind,
            status: None,
            retry_after: None,
            message: message.into(),
            source: None,
        }
    }

    /// Keeps the provider's own typed error inside, as the source of this one.
    pub fn with_source<E: std::error::Error + Send + Sync + 'static>(mut self, source: E) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// The provider's own error inside, if it is an `E` (for example `weft_integrations::openai::OpenAIError`).
    pub fn provider_error<E: std::error::Error + 'static>(&self) -> Option<&E> {
        self.source.as_deref().and_then(|source| source.downcast_ref::<E>())
    }

    /// Whether the provider asked us to slow down.
    pub fn is_rate_limited(&self) -> bool {
        self.kind == ModelErrorKind::RateLimited
    }

    /// Whether the failure is worth retrying (rate limits, server errors, timeouts, connection failures).
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind,
            ModelErrorKind::RateLimited
                | ModelErrorKind::Server
                | ModelErrorKind::Timeout
                | ModelErrorKind::Connection
        )
    }
}

/// A control-flow signal (for example a graph interrupt) carried through runnables as an error.
///
/// The payload is opaque here; the crate that raised it downcasts it back.
#[derive(Clone)]
pub struct ControlFlow {
    description: String,
    payload: Arc<dyn Any + Send + Sync>,
}

impl ControlFlow {
    /// Wraps a payload with a human-readable description.
    pub fn new<T: Any + Send + Sync>(description: impl Into<String>, payload: T) -> Self {
        Self { description: description.into(), payload: Arc::new(payload) }
    }

    /// The payload, if it is a `T`.
    pub fn downcast_ref<T: Any>(&self) -> Option<&T> {
        self.payload.downcast_ref::<T>()
    }
}

impl fmt::Debug for ControlFlow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControlFlow").field("description", &self.description).finish_non_exhaustive()
    }
}

impl fmt::Display for ControlFlow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.description)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error, PartialEq)]
    #[error("vendor failure {0}")]
    struct VendorError(u16);

    #[test]
    fn a_model_error_gives_back_the_providers_own_error() {
        let error: Error =
            ModelError::new("vendor", ModelErrorKind::Server, "boom").with_source(VendorError(503)).into();
        let model = error.as_model().unwrap();
        assert_eq!(model.provider_error::<VendorError>(), Some(&VendorError(503)));
        assert_eq!(model.provider_error::<MessageError>().map(|e| e.0.clone()), None);
        let source = std::error::Error::source(model).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("vendor failure 503"));
        assert_eq!(error.to_string(), "vendor error: boom");
    }

    #[test]
    fn a_caught_panic_keeps_its_message() {
        let text = std::panic::catch_unwind(|| std::panic::panic_any("static text")).unwrap_err();
        assert_eq!(Error::from_panic(text.as_ref()).to_string(), "panicked: static text");
        let owned = std::panic::catch_unwind(|| std::panic::panic_any(format!("n = {}", 3))).unwrap_err();
        assert_eq!(Error::from_panic(owned.as_ref()).to_string(), "panicked: n = 3");
        let other = std::panic::catch_unwind(|| std::panic::panic_any(7_u8)).unwrap_err();
        assert!(
            matches!(Error::from_panic(other.as_ref()), Error::Panicked(m) if m == "a panic without a message")
        );
    }

    #[derive(Debug, thiserror::Error)]
    #[error("cannot load the thread")]
    struct Load(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("the run failed: {0}")]
    struct Repeats(#[source] Load);

    #[test]
    fn debug_is_the_message_then_each_new_cause() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "threads.db is missing");
        let plain = Error::msg("no model");
        assert_eq!(format!("{plain:?}"), "no model");
        let one = Error::custom(Load(io()));
        assert_eq!(format!("{one:?}"), "cannot load the thread\n\nCaused by:\n    threads.db is missing");
        // A cause whose message the error already repeats is said once.
        let repeated = Error::custom(Repeats(Load(io())));
        assert_eq!(
            format!("{repeated:?}"),
            "the run failed: cannot load the thread\n\nCaused by:\n    threads.db is missing"
        );
        let model: Error =
            ModelError::new("vendor", ModelErrorKind::Server, "boom").with_source(Load(io())).into();
        assert_eq!(
            format!("{model:?}"),
            "vendor error: boom\n\nCaused by:\n    0: cannot load the thread\n    1: threads.db is missing"
        );
    }

    #[test]
    fn the_alternate_debug_form_is_the_variant_and_its_fields() {
        let err = Error::Tool { tool: "search".into(), message: "down".into() };
        assert_eq!(format!("{err:#?}"), "Tool {\n    tool: \"search\",\n    message: \"down\",\n}");
        assert_eq!(format!("{:#?}", Error::Panicked("x".into())), "Panicked(\n    \"x\",\n)");
    }

    #[test]
    fn io_errors_convert_and_come_back() {
        fn open() -> Result<()> {
            Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, "read-only"))?;
            Ok(())
        }
        let err = open().unwrap_err();
        assert_eq!(err.to_string(), "read-only");
        assert_eq!(
            err.downcast_custom::<std::io::Error>().map(std::io::Error::kind),
            Some(std::io::ErrorKind::PermissionDenied)
        );
    }

    #[test]
    fn model_errors_compare_without_their_source() {
        let plain = ModelError::new("vendor", ModelErrorKind::Server, "boom");
        assert_eq!(plain.clone().with_source(VendorError(1)), plain);
        assert_ne!(ModelError::new("vendor", ModelErrorKind::Timeout, "boom"), plain);
        assert_eq!(plain.provider_error::<VendorError>(), None);
    }
}
