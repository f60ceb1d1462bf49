//! `TypedOutputParser`: a model's JSON output deserialised into a Rust type (LangChain's
//! `PydanticOutputParser`).

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use async_trait::async_trait;
use futures::stream::BoxStream;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::json::{invalid_json, latest, parse_json_text};
use super::{AsText, accumulate_text};
use crate::config::RunnableConfig;
use crate::error::{Error, OutputParserError, Result};
use crate::events::{RunKind, trace_invoke, trace_transform};
use crate::partial_json::parse_json_markdown;
use crate::runnable::{ChunkStream, RunValue, Runnable, short_type_name};

const NAME: &str = "TypedOutputParser";

const FORMAT_INSTRUCTIONS: &str = r#"The output should be formatted as a JSON instance that conforms to the JSON schema below.

As an example, for the schema {"properties": {"foo": {"title": "Foo", "description": "a list of strings", "type": "array", "items": {"type": "string"}}}, "required": ["foo"]}
the object {"foo": ["bar", "baz"]} is a well-formatted instance of the schema. The object {"properties": {"foo": ["bar", "baz"]}} is not well-formatted.

Here is the output schema:
```
"#;

/// Parses a model's JSON output (fences stripped, as [`JsonOutputParser`](super::JsonOutputParser) does)
/// into a `T`; [`format_instructions`](TypedOutputParser::format_instructions) tells the model the
/// schema to follow.
///
/// Streaming yields a `T` each time the JSON parsed so far changes and already deserialises into `T`;
/// a stream whose final JSON does not fit `T` ends with the same error as `invoke`.
///
/// ```
/// use serde::Deserialize;
/// use weft_runnable_core::{Runnable, RunnableConfig, TypedOutputParser};
///
/// #[derive(Debug, Clone, PartialEq, serde::Serialize, Deserialize, schemars::JsonSchema)]
/// struct Person { name: String, age: u32 }
///
/// # tokio_test::block_on(async {
/// let parser = TypedOutputParser::<Person>::new();
/// let person = parser.invoke(r#"{"name": "Ada", "age": 36}"#.to_owned(), &RunnableConfig::default()).await.unwrap();
/// assert_eq!(person, Person { name: "Ada".into(), age: 36 });
/// # });
/// ```
pub struct TypedOutputParser<T> {
    _target: PhantomData<fn() -> T>,
}

impl<T> fmt::Debug for TypedOutputParser<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedOutputParser").field("target", &short_type_name::<T>()).finish()
    }
}

impl<T> Clone for TypedOutputParser<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for TypedOutputParser<T> {}

impl<T> Default for TypedOutputParser<T> {
    fn default() -> Self {
        Self { _target: PhantomData }
    }
}

impl<T: DeserializeOwned + JsonSchema> TypedOutputParser<T> {
    /// A parser for `T`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses one complete text.
    pub fn parse(&self, text: &str) -> Result<T> {
        from_json(parse_json_text(text)?)
    }

    /// Instructions for the model: "The output should be formatted as a JSON instance that conforms to the
    /// JSON schema below." followed by an example and `T`'s JSON schema (without its `title`, `type` and
    /// `$schema`).
    pub fn format_instructions(&self) -> String {
        let mut schema = schemars::schema_for!(T).to_value();
        if let Some(object) = schema.as_object_mut() {
            for key in ["$schema", "title", "type"] {
                object.remove(key);
            }
        }
        format!("{FORMAT_INSTRUCTIONS}{schema}\n```")
    }
}

fn from_json<T: DeserializeOwned>(value: Value) -> Result<T> {
    serde_json::from_value(value.clone()).map_err(|err| typed_error::<T>(&value, &err))
}

fn typed_error<T>(value: &Value, err: &serde_json::Error) -> Error {
    let completion = value.to_string();
    let message =
        format!("failed to parse {} from completion {completion}. got: {err}", short_type_name::<T>());
    OutputParserError::new(message).with_llm_output(completion).into()
}

#[async_trait]
impl<I, T> Runnable<I, T> for TypedOutputParser<T>
where
    I: AsText + RunValue,
    T: DeserializeOwned + JsonSchema + RunValue,
{
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed(NAME)
    }

    fn kind(&self) -> RunKind {
        RunKind::Parser
    }

    async fn invoke(&self, input: I, config: &RunnableConfig) -> Result<T> {
        trace_invoke(
            NAME,
            RunKind::Parser,
            input,
            config,
            |input, _| async move { self.parse(&input.as_text()) },
        )
        .await
    }

    fn transform<'a>(
        &'a self,
        input: ChunkStream<'a, I>,
        config: &RunnableConfig,
    ) -> BoxStream<'a, Result<T>> {
        trace_transform(
            NAME,
            RunKind::Parser,
            input,
            config,
            |input, _| {
                // The JSON parsed so far, and whether it deserialised into a `T`.
                let mut previous: Option<(Value, bool)> = None;
                accumulate_text(input.into_parts().0, move |text, end| {
                    if end {
                        return match previous.take() {
                            None => Some(Err(invalid_json(text.trim()))),
                            Some((_, true)) => None,
                            Some((value, false)) => Some(from_json(value)),
                        };
                    }
                    let parsed = parse_json_markdown(text.trim())?;
                    if previous.as_ref().is_some_and(|(value, _)| *value == parsed) {
                        return None;
                    }
                    let typed = serde_json::from_value::<T>(parsed.clone()).ok();
                    previous = Some((parsed, typed.is_some()));
                    typed.map(Ok)
                })
            },
            latest,
        )
    }

    fn merge_chunks(&self, acc: T, next: T) -> Result<T> {
        latest(acc, next)
    }
}

crate::impl_pipe_operator!([T] TypedOutputParser<T> => T);
