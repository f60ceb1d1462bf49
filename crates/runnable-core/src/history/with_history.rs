//! `RunnableWithMessageHistory`: loads a session's history before a run and saves the new turn after it.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt as _};
use serde_json::{Map, Value};

use crate::config::RunnableConfig;
use crate::error::{Error, Result};
use crate::events::{RunKind, event_input, trace_invoke, trace_stream};
use crate::history::output::is_message_object;
use crate::history::{ChatMessageHistory, ToHistoryMessages};
use crate::messages::Message;
use crate::prompts::fstring::json_excerpt;
use crate::runnable::{BoxRunnable, RunValue, Runnable};

/// The config key naming the conversation.
const SESSION_ID: &str = "session_id";

type GetSessionHistory = dyn Fn(&str) -> Arc<dyn ChatMessageHistory> + Send + Sync;

/// Wraps a runnable (typically `prompt | model`) so that each call continues a stored conversation.
///
/// The session is `config.configurable["session_id"]` (missing: [`Error::MissingConfigKeys`]) and its
/// history comes from `get_session_history`. Before the run the history is loaded into the input; after
/// it the input message(s) and the output message(s) are appended to the history.
///
/// Shapes of the input (a JSON value):
/// - with `history_messages_key`: an object; the history goes under that key as a list of messages, and
///   the new messages are read from `input_messages_key` (by default the only key, or else `input`);
/// - with only `input_messages_key`: an object; that key is replaced by history + new messages;
/// - with neither: the new message(s) (a string, a message or a list of them); the wrapped runnable gets
///   history + new messages as one list.
///
/// The output becomes messages through [`ToHistoryMessages`]: an `AiMessage`, a `Message`, a string (an
/// AI message) or a JSON object holding them under `output_messages_key`.
///
/// ```
/// use serde_json::json;
/// use weft_runnable_core::{
///     AiMessage, ChatPromptTemplate, InMemoryHistoryStore, PromptValue, Runnable, RunnableConfig,
///     RunnableLambda, RunnableWithMessageHistory,
/// };
/// # tokio_test::block_on(async {
/// let prompt = ChatPromptTemplate::from_messages([("placeholder", "{history}"), ("human", "{question}")])
///     .unwrap();
/// let model = RunnableLambda::new(|p: PromptValue| AiMessage::new(format!("{} messages", p.into_messages().len())));
/// let store = InMemoryHistoryStore::new();
/// let chat = RunnableWithMessageHistory::new(prompt | model, store.factory())
///     .input_messages_key("question")
///     .history_messages_key("history");
/// let config = RunnableConfig::default().with_configurable("session_id", "s1");
/// assert_eq!(chat.invoke(json!({"question": "hi"}), &config).await.unwrap().text(), "1 messages");
/// assert_eq!(chat.invoke(json!({"question": "again"}), &config).await.unwrap().text(), "3 messages");
/// # });
/// ```
pub struct RunnableWithMessageHistory<O> {
    runnable: BoxRunnable<Value, O>,
    get_session_history: Arc<GetSessionHistory>,
    input_messages_key: Option<String>,
    history_messages_key: Option<String>,
    output_messages_key: Option<String>,
}

impl<O> fmt::Debug for RunnableWithMessageHistory<O>
where
    O: Send + 'static,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunnableWithMessageHistory")
            .field("runnable", &self.runnable)
            .field("input_messages_key", &self.input_messages_key)
            .field("history_messages_key", &self.history_messages_key)
            .field("output_messages_key", &self.output_messages_key)
            .finish_non_exhaustive()
    }
}

impl<O> Clone for RunnableWithMessageHistory<O> {
    fn clone(&self) -> Self {
        Self {
            runnable: self.runnable.clone(),
            get_session_history: Arc::clone(&self.get_session_history),
            input_messages_key: self.input_messages_key.clone(),
            history_messages_key: self.history_messages_key.clone(),
            output_messages_key: self.output_messages_key.clone(),
        }
    }
}

impl<O: RunValue + ToHistoryMessages> RunnableWithMessageHistory<O> {
    /// Wraps `runnable`; `get_session_history` gives the history of a session id.
    pub fn new(
        runnable: impl Runnable<Value, O> + 'static,
        get_session_history: impl Fn(&str) -> Arc<dyn ChatMessageHistory> + Send + Sync + 'static,
    ) -> Self {
        Self {
            runnable: BoxRunnable::new(runnable),
            get_session_history: Arc::new(get_session_history),
            input_messages_key: None,
            history_messages_key: None,
            output_messages_key: None,
        }
    }

    /// The input key holding the new message(s).
    pub fn input_messages_key(mut self, key: impl Into<String>) -> Self {
        self.input_messages_key = Some(key.into());
        self
    }

    /// The input key that receives the history (a prompt's placeholder variable).
    pub fn history_messages_key(mut self, key: impl Into<String>) -> Self {
        self.history_messages_key = Some(key.into());
        self
    }

    /// The output key holding the output message(s), for map-shaped outputs.
    pub fn output_messages_key(mut self, key: impl Into<String>) -> Self {
        self.output_messages_key = Some(key.into());
        self
    }

    /// Everything a run needs: the session's history, the new input messages and the input to pass on.
    async fn enter(&self, input: Value, config: &RunnableConfig) -> Result<Turn> {
        let history = self.session_history(config)?;
        let new_messages = self.input_messages(&input)?;
        let mut messages = history.messages().await?;
        let input = match (&self.history_messages_key, &self.input_messages_key, input) {
            (Some(key), _, Value::Object(mut map)) => {
                map.insert(key.clone(), serde_json::to_value(&messages)?);
                Value::Object(map)
            }
            (None, Some(key), Value::Object(mut map)) => {
                messages.extend(new_messages.iter().cloned());
                map.insert(key.clone(), serde_json::to_value(&messages)?);
                Value::Object(map)
            }
            (None, None, _) => {
                messages.extend(new_messages.iter().cloned());
                serde_json::to_value(&messages)?
            }
            (_, _, other) => {
                return Err(Error::InvalidInput(format!(
                    "RunnableWithMessageHistory with a messages key expects a JSON object input, got {}",
                    json_excerpt(&other)
                )));
            }
        };
        Ok(Turn { history, new_messages, input })
    }

    fn session_history(&self, config: &RunnableConfig) -> Result<Arc<dyn ChatMessageHistory>> {
        let session_id = match config.configurable.get(SESSION_ID) {
            Some(Value::String(id)) => id.clone(),
            Some(Value::Number(id)) => id.to_string(),
            None | Some(Value::Null) => {
                return Err(Error::MissingConfigKeys {
                    missing: vec![SESSION_ID.to_owned()],
                    expected: vec![SESSION_ID.to_owned()],
                });
            }
            Some(other) => {
                return Err(Error::InvalidInput(format!(
                    "config.configurable.session_id should be a string, got {}",
                    json_excerpt(other)
                )));
            }
        };
        Ok((self.get_session_history)(&session_id))
    }

    /// The new messages of this turn, read from the input.
    fn input_messages(&self, input: &Value) -> Result<Vec<Message>> {
        let value = match (input, &self.input_messages_key) {
            (Value::Object(map), Some(key)) => map.get(key).ok_or_else(|| missing_key(map, key))?,
            (Value::Object(map), None) if is_message_object(map) => input,
            (Value::Object(map), None) if map.len() == 1 => map.values().next().unwrap_or(input),
            (Value::Object(map), None) => map.get("input").ok_or_else(|| missing_key(map, "input"))?,
            (other, _) => other,
        };
        match value {
            Value::Array(items) => items.iter().cloned().map(Message::from_like).collect(),
            other => Ok(vec![Message::from_like(other.clone())?]),
        }
    }
}

fn missing_key(map: &Map<String, Value>, key: &str) -> Error {
    Error::InvalidInput(format!(
        "input has no key '{key}' holding the new messages; keys are {:?} (set input_messages_key)",
        map.keys().collect::<Vec<_>>()
    ))
}

/// One call's state between loading the history and saving the turn.
struct Turn {
    history: Arc<dyn ChatMessageHistory>,
    new_messages: Vec<Message>,
    input: Value,
}

impl Turn {
    /// Appends the input messages and the output's messages to the history.
    async fn save<O: ToHistoryMessages>(self, output: &O, output_messages_key: Option<&str>) -> Result<()> {
        let mut messages = self.new_messages;
        messages.extend(output.to_history_messages(output_messages_key)?);
        self.history.add_messages(messages).await
    }
}

#[async_trait]
impl<O: RunValue + ToHistoryMessages> Runnable<Value, O> for RunnableWithMessageHistory<O> {
    async fn invoke(&self, input: Value, config: &RunnableConfig) -> Result<O> {
        trace_invoke(&self.name(), RunKind::Chain, input, config, |input, child| async move {
            let turn = self.enter(input, &child).await?;
            let output = self.runnable.invoke(turn.input.clone(), &child).await?;
            turn.save(&output, self.output_messages_key.as_deref()).await?;
            Ok(output)
        })
        .await
    }

    /// Streams the wrapped runnable's chunks; the turn is saved once the stream has ended, with the
    /// chunks merged by the wrapped runnable's `merge_chunks`.
    fn stream<'a>(&'a self, input: Value, config: &RunnableConfig) -> BoxStream<'a, Result<O>> {
        let input_value = event_input(config, &input);
        let name = self.name().into_owned();
        let merge = |acc, next| self.runnable.merge_chunks(acc, next);
        trace_stream(
            &name,
            RunKind::Chain,
            input_value,
            config,
            move |child| self.stream_turn(input, child),
            merge,
        )
    }

    fn merge_chunks(&self, acc: O, next: O) -> Result<O> {
        self.runnable.merge_chunks(acc, next)
    }
}

impl<O: RunValue + ToHistoryMessages> RunnableWithMessageHistory<O> {
    fn stream_turn(&self, input: Value, config: RunnableConfig) -> BoxStream<'_, Result<O>> {
        enum State<'a, O> {
            Start(Value, Box<RunnableConfig>),
            Running { turn: Turn, chunks: BoxStream<'a, Result<O>>, acc: Option<O> },
            Done,
        }
        stream::unfold(State::Start(input, Box::new(config)), move |state| async move {
            let (turn, mut chunks, acc) = match state {
                State::Start(input, config) => match self.enter(input, &config).await {
                    Ok(turn) => {
                        let chunks = self.runnable.stream(turn.input.clone(), &config);
                        (turn, chunks, None)
                    }
                    Err(err) => return Some((Err(err), State::Done)),
                },
                State::Running { turn, chunks, acc } => (turn, chunks, acc),
                State::Done => return None,
            };
            match chunks.next().await {
                Some(Ok(chunk)) => {
                    let merged = match acc {
                        None => Ok(chunk.clone()),
                        Some(acc) => self.runnable.merge_chunks(acc, chunk.clone()),
                    };
                    match merged {
                        Ok(acc) => Some((Ok(chunk), State::Running { turn, chunks, acc: Some(acc) })),
                        Err(err) => Some((Err(err), State::Done)),
                    }
                }
                Some(Err(err)) => Some((Err(err), State::Done)),
                None => {
                    let saved = match acc {
                        Some(output) => turn.save(&output, self.output_messages_key.as_deref()).await,
                        None => Err(Error::EmptyStream(self.runnable.name().into_owned())),
                    };
                    saved.err().map(|err| (Err(err), State::Done))
                }
            }
        })
        .boxed()
    }
}

crate::impl_pipe_operator!([O] RunnableWithMessageHistory<O> => O);
