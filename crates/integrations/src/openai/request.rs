//! Building the body of a chat completion request: messages in OpenAI's shape, the model's settings,
//! and the call's options (stop, tools, tool choice, response format, extra fields).

use serde_json::{Map, Value, json};
use weft_runnable_core::{AiMessage, CallOptions, Content, Message};

use super::OpenAIError;

/// The model's own settings, sent with every request unless a call overrides them.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct ChatSettings {
    pub(crate) model: String,
    pub(crate) temperature: Option<f64>,
    pub(crate) max_tokens: Option<u32>,
    pub(crate) stop: Option<Vec<String>>,
    pub(crate) seed: Option<i64>,
    pub(crate) top_p: Option<f64>,
    pub(crate) extra: Map<String, Value>,
    pub(crate) stream_usage: bool,
    pub(crate) strict_json_schema: bool,
}

/// The request body for `messages` under `options`; `stream` picks a streamed answer.
pub(crate) fn chat_request(
    settings: &ChatSettings,
    messages: &[Message],
    options: &CallOptions,
    stream: bool,
) -> Result<Value, OpenAIError> {
    let mut body = Map::new();
    body.insert("model".to_owned(), Value::String(settings.model.clone()));
    let messages = messages.iter().map(message_to_openai).collect::<Result<Vec<_>, _>>()?;
    body.insert("messages".to_owned(), Value::Array(messages));
    if let Some(temperature) = settings.temperature {
        body.insert("temperature".to_owned(), json!(temperature));
    }
    if let Some(max_tokens) = settings.max_tokens {
        body.insert("max_tokens".to_owned(), json!(max_tokens));
    }
    if let Some(seed) = settings.seed {
        body.insert("seed".to_owned(), json!(seed));
    }
    if let Some(top_p) = settings.top_p {
        body.insert("top_p".to_owned(), json!(top_p));
    }
    if let Some(stop) = options.stop.as_ref().or(settings.stop.as_ref()) {
        body.insert("stop".to_owned(), json!(stop));
    }
    if !options.tools.is_empty() {
        let tools: Vec<Value> = options.tools.iter().map(|spec| spec.to_openai()).collect();
        body.insert("tools".to_owned(), Value::Array(tools));
        if let Some(parallel) = options.parallel_tool_calls {
            body.insert("parallel_tool_calls".to_owned(), Value::Bool(parallel));
        }
    }
    if let Some(choice) = &options.tool_choice {
        body.insert("tool_choice".to_owned(), choice.to_openai());
    }
    if let Some(format) = &options.response_format {
        let format =
            if settings.strict_json_schema { strict_response_format(format) } else { format.clone() };
        body.insert("response_format".to_owned(), format);
    }
    if stream {
        body.insert("stream".to_owned(), Value::Bool(true));
        if settings.stream_usage {
            body.insert("stream_options".to_owned(), json!({"include_usage": true}));
        }
    }
    for (key, value) in settings.extra.iter().chain(&options.extra) {
        body.insert(key.clone(), value.clone());
    }
    // Extra fields may not turn a whole answer into a stream or the reverse: the parsing would not match.
    body.insert("stream".to_owned(), Value::Bool(stream));
    Ok(Value::Object(body))
}

/// One message in OpenAI's shape.
pub(crate) fn message_to_openai(message: &Message) -> Result<Value, OpenAIError> {
    let mut out = Map::new();
    match message {
        Message::System(m) => {
            out.insert("role".to_owned(), json!("system"));
            out.insert("content".to_owned(), content_to_openai(&m.content));
            name(&mut out, m.name.as_deref());
        }
        Message::Human(m) => {
            out.insert("role".to_owned(), json!("user"));
            out.insert("content".to_owned(), content_to_openai(&m.content));
            name(&mut out, m.name.as_deref());
        }
        Message::Ai(m) => return Ok(ai_to_openai(m)),
        Message::Tool(m) => {
            out.insert("role".to_owned(), json!("tool"));
            out.insert("content".to_owned(), content_to_openai(&m.content));
            out.insert("tool_call_id".to_owned(), json!(m.tool_call_id));
        }
        Message::Remove(m) => {
            return Err(OpenAIError::InvalidRequest(format!(
                "a remove marker (id '{}') cannot be sent to a model; apply it with add_messages first",
                m.id
            )));
        }
    }
    Ok(Value::Object(out))
}

fn name(out: &mut Map<String, Value>, name: Option<&str>) {
    if let Some(name) = name.filter(|n| !n.is_empty()) {
        out.insert("name".to_owned(), json!(name));
    }
}

/// An AI message: its text, and its tool calls (valid and invalid, the latter with their raw arguments)
/// as OpenAI function calls. Empty text with tool calls is sent as `null`, as OpenAI does.
fn ai_to_openai(message: &AiMessage) -> Value {
    let mut out = Map::new();
    out.insert("role".to_owned(), json!("assistant"));
    let valid = message.tool_calls.iter().map(|call| {
        let arguments = if call.args.is_null() { "{}".to_owned() } else { call.args.to_string() };
        (call.id.clone(), call.name.clone(), arguments)
    });
    let invalid = message.invalid_tool_calls.iter().map(|call| {
        (call.id.clone(), call.name.clone().unwrap_or_default(), call.args.clone().unwrap_or_default())
    });
    let tool_calls: Vec<Value> = valid
        .chain(invalid)
        .map(|(id, name, arguments)| {
            json!({"id": id.unwrap_or_default(), "type": "function", "function": {"name": name, "arguments": arguments}})
        })
        .collect();
    let content = if message.content.is_empty() && !tool_calls.is_empty() {
        Value::Null
    } else {
        content_to_openai(&message.content)
    };
    out.insert("content".to_owned(), content);
    name(&mut out, message.name.as_deref());
    if !tool_calls.is_empty() {
        out.insert("tool_calls".to_owned(), Value::Array(tool_calls));
    }
    Value::Object(out)
}

/// Text as a string; content blocks as they are, bare strings among them as text blocks.
fn content_to_openai(content: &Content) -> Value {
    match content {
        Content::Text(text) => Value::String(text.clone()),
        Content::Blocks(blocks) => Value::Array(
            blocks
                .iter()
                .map(|block| match block {
                    Value::String(text) => json!({"type": "text", "text": text}),
                    other => other.clone(),
                })
                .collect(),
        ),
    }
}

/// A `json_schema` response format made strict unless it says otherwise: `strict: true`, and every object
/// of the schema closed (`additionalProperties: false`) with all its properties required, as OpenAI's
/// strict mode demands (an optional field stays optional through a `null` in its type).
fn strict_response_format(format: &Value) -> Value {
    let mut format = format.clone();
    let is_schema = format.get("type").and_then(Value::as_str) == Some("json_schema");
    let Some(spec) = format.get_mut("json_schema").and_then(Value::as_object_mut) else { return format };
    if !is_schema || spec.contains_key("strict") {
        return format;
    }
    spec.insert("strict".to_owned(), Value::Bool(true));
    if let Some(schema) = spec.get_mut("schema") {
        close_objects(schema);
    }
    format
}

fn close_objects(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        if let Some(items) = schema.as_array_mut() {
            items.iter_mut().for_each(close_objects);
        }
        return;
    };
    if let Some(Value::Object(properties)) = object.get("properties") {
        let names: Vec<Value> = properties.keys().cloned().map(Value::String).collect();
        object.insert("required".to_owned(), Value::Array(names));
        object.insert("additionalProperties".to_owned(), Value::Bool(false));
    }
    for key in ["properties", "$defs", "definitions"] {
        if let Some(Value::Object(children)) = object.get_mut(key) {
            children.values_mut().for_each(close_objects);
        }
    }
    for key in ["items", "anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(child) = object.get_mut(key) {
            close_objects(child);
        }
    }
}

#[cfg(test)]
mod tests {
    use weft_runnable_core::{InvalidToolCall, ToolCall, ToolChoice, ToolSpec};

    use super::*;

    fn settings() -> ChatSettings {
        ChatSettings {
            model: "m".to_owned(),
            stream_usage: true,
            strict_json_schema: true,
            ..Default::default()
        }
    }

    #[test]
    fn every_message_kind_takes_openai_shape() {
        let ai = AiMessage {
            tool_calls: vec![ToolCall {
                name: "add".to_owned(),
                args: json!({"a": 1}),
                id: Some("c1".to_owned()),
            }],
            invalid_tool_calls: vec![InvalidToolCall {
                name: Some("mul".to_owned()),
                args: Some("{oops".to_owned()),
                id: Some("c2".to_owned()),
                error: Some("bad".to_owned()),
            }],
            ..AiMessage::default()
        };
        let messages = vec![
            Message::system("be brief"),
            Message::human(Content::Blocks(vec![
                json!("look"),
                json!({"type": "image_url", "image_url": {"url": "u"}}),
            ])),
            Message::Ai(ai),
            Message::tool("2", "c1"),
        ];
        let body = chat_request(&settings(), &messages, &CallOptions::default(), false).unwrap();
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "u"}}]},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{\"a\":1}"}},
                    {"id": "c2", "type": "function", "function": {"name": "mul", "arguments": "{oops"}}
                ]},
                {"role": "tool", "content": "2", "tool_call_id": "c1"}
            ])
        );
        assert_eq!(body["stream"], json!(false));
        assert!(body.get("stream_options").is_none());
    }

    #[test]
    fn a_remove_marker_is_refused() {
        let err =
            chat_request(&settings(), &[Message::remove("x")], &CallOptions::default(), false).unwrap_err();
        assert!(err.is_invalid_request(), "{err}");
    }

    #[test]
    fn call_options_override_settings_and_extra_fields_go_last() {
        let mut settings = settings();
        settings.stop = Some(vec!["A".to_owned()]);
        settings.temperature = Some(0.5);
        settings.extra.insert("temperature".to_owned(), json!(0.1));
        let options = CallOptions::default()
            .with_stop(["B"])
            .with_tools(vec![ToolSpec::new("add", "Adds.", json!({"type": "object", "properties": {}}))])
            .with_tool_choice(ToolChoice::Tool("add".to_owned()))
            .with_extra("logprobs", json!(true))
            .with_extra("stream", json!(false));
        let options = CallOptions { parallel_tool_calls: Some(false), ..options };
        let body = chat_request(&settings, &[Message::human("hi")], &options, true).unwrap();
        assert_eq!(body["stop"], json!(["B"]));
        assert_eq!(body["temperature"], json!(0.1));
        assert_eq!(body["logprobs"], json!(true));
        assert_eq!(body["tool_choice"], json!({"type": "function", "function": {"name": "add"}}));
        assert_eq!(body["parallel_tool_calls"], json!(false));
        assert_eq!(body["tools"][0]["function"]["name"], json!("add"));
        assert_eq!(body["stream"], json!(true), "extra fields cannot switch streaming off");
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
    }

    #[test]
    fn parallel_tool_calls_is_only_sent_with_tools() {
        let options = CallOptions { parallel_tool_calls: Some(true), ..CallOptions::default() };
        let body = chat_request(&settings(), &[Message::human("hi")], &options, false).unwrap();
        assert!(body.get("parallel_tool_calls").is_none());
    }

    #[test]
    fn json_schema_formats_are_made_strict_unless_they_say_otherwise() {
        let format = json!({"type": "json_schema", "json_schema": {"name": "P", "schema": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "pet": {"$ref": "#/$defs/Pet"},
                "tags": {"type": "array", "items": {"type": "object", "properties": {"t": {"type": "string"}}}}
            },
            "required": ["name"],
            "$defs": {"Pet": {"type": "object", "properties": {"kind": {"type": ["string", "null"]}}}}
        }}});
        let options = CallOptions { response_format: Some(format.clone()), ..CallOptions::default() };
        let body = chat_request(&settings(), &[Message::human("hi")], &options, false).unwrap();
        let spec = &body["response_format"]["json_schema"];
        assert_eq!(spec["strict"], json!(true));
        assert_eq!(spec["schema"]["required"], json!(["name", "pet", "tags"]));
        assert_eq!(spec["schema"]["additionalProperties"], json!(false));
        assert_eq!(spec["schema"]["$defs"]["Pet"]["required"], json!(["kind"]));
        assert_eq!(spec["schema"]["properties"]["tags"]["items"]["additionalProperties"], json!(false));

        let mut loose = format.clone();
        loose["json_schema"]["strict"] = json!(false);
        let options = CallOptions { response_format: Some(loose.clone()), ..CallOptions::default() };
        let body = chat_request(&settings(), &[Message::human("hi")], &options, false).unwrap();
        assert_eq!(body["response_format"], loose);

        let off = ChatSettings { strict_json_schema: false, ..settings() };
        let options = CallOptions { response_format: Some(format.clone()), ..CallOptions::default() };
        assert_eq!(
            chat_request(&off, &[Message::human("hi")], &options, false).unwrap()["response_format"],
            format
        );
    }
}
