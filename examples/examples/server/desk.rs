//! The example's chat model: deterministic rules instead of a network model, so that the server answers
//! any number of requests without an API key. It streams its replies word by word.

use async_trait::async_trait;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use serde_json::json;
use weft::fakes::FakeChatModel;
use weft::prelude::*;

/// An evening-planning assistant that follows rules: asked about a city, it checks the weather; asked to
/// book, it books (a call that needs a human's approval); then it answers with what the tools said. With
/// `tools: false` it only talks.
#[derive(Debug, Clone)]
pub(crate) struct Desk {
    pub(crate) tools: bool,
}

/// The city after "in ", capitalised as written (Lisbon by default).
fn city(text: &str) -> String {
    text.split_once(" in ")
        .and_then(|(_, rest)| rest.split(|c: char| !c.is_alphabetic()).find(|w| !w.is_empty()))
        .unwrap_or("Lisbon")
        .to_owned()
}

fn call(id: usize, name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall { name: name.to_owned(), args, id: Some(format!("call-{id}")) }
}

impl Desk {
    /// The reply to a conversation.
    pub(crate) fn reply(&self, messages: &[Message]) -> AiMessage {
        let start = messages.iter().rposition(|m| matches!(m, Message::Human(_))).unwrap_or(0);
        let question = messages.get(start).map(Message::text).unwrap_or_default();
        if !self.tools {
            return AiMessage::new(format!("You said: {question}"));
        }
        let results: Vec<&ToolMessage> = messages[start..].iter().filter_map(Message::as_tool).collect();
        let called = |name: &str| results.iter().any(|r| r.name.as_deref() == Some(name));
        let asks = |text: &str, tool: ToolCall| AiMessage { tool_calls: vec![tool], ..AiMessage::new(text) };
        if !called("get_weather") {
            let city = city(&question);
            return asks(
                &format!("Checking the weather in {city}."),
                call(messages.len(), "get_weather", json!({"city": city})),
            );
        }
        if question.to_lowercase().contains("book") && !called("book_table") {
            let booking = json!({"restaurant": "Casa Azul", "people": 2, "time": "20:00"});
            return asks("Booking a table.", call(messages.len(), "book_table", booking));
        }
        let said: Vec<String> = results.iter().map(|r| r.content.text()).collect();
        AiMessage::new(format!("Here is what I found: {}", said.join(" ")))
    }
}

#[async_trait]
impl ChatModel for Desk {
    fn model_name(&self) -> &str {
        "desk-rules"
    }

    fn provider(&self) -> &str {
        "weft-example"
    }

    async fn generate(
        &self,
        messages: Vec<Message>,
        _: &CallOptions,
        _: &RunnableConfig,
    ) -> weft::Result<AiMessage> {
        Ok(self.reply(&messages))
    }

    fn stream_chunks<'a>(
        &'a self,
        messages: Vec<Message>,
        options: &CallOptions,
        config: &RunnableConfig,
    ) -> BoxStream<'a, weft::Result<AiMessage>> {
        // A one-reply scripted model splits the reply into word chunks (tool calls in the last).
        let script = FakeChatModel::new([self.reply(&messages)]);
        let (options, config) = (options.clone(), config.clone());
        futures::stream::once(async move {
            script.stream_chunks(messages, &options, &config).collect::<Vec<_>>().await
        })
        .flat_map(futures::stream::iter)
        .boxed()
    }
}

weft::impl_chat_model_runnable!(Desk);
