//! Prompt templates: f-string syntax, variables, missing-variable errors, placeholders, partials, runs.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use weft_runnable_core::{
    AiMessage, ChatPromptPart, ChatPromptTemplate, Error, EventRecorder, Message, MessagesPlaceholder,
    PromptTemplate, PromptValue, Runnable, RunnableConfig, RunnableLambda, ToolMessage,
};

fn config() -> RunnableConfig {
    RunnableConfig::default()
}

fn text(prompt: &PromptTemplate, input: serde_json::Value) -> String {
    prompt.format(input).unwrap()
}

#[test]
fn prompt_template_sorts_and_dedups_input_variables() {
    let prompt = PromptTemplate::from_template("{b} and {a}, then {b} again").unwrap();
    assert_eq!(prompt.input_variables(), ["a", "b"]);
    assert_eq!(text(&prompt, json!({"a": "A", "b": "B", "unused": 1})), "B and A, then B again");
}

#[test]
fn strings_insert_as_is_and_other_values_as_json() {
    let prompt = PromptTemplate::from_template("{s}|{n}|{f}|{b}|{l}|{o}|{z}").unwrap();
    let input =
        json!({"s": "say \"hi\"", "n": 3, "f": 1.5, "b": true, "l": [1, "x"], "o": {"k": "v"}, "z": null});
    assert_eq!(text(&prompt, input), r#"say "hi"|3|1.5|true|[1,"x"]|{"k":"v"}|null"#);
}

#[test]
fn doubled_braces_are_literal_braces() {
    let prompt = PromptTemplate::from_template("{{not_a_var}} {{ {x} }}").unwrap();
    assert_eq!(prompt.input_variables(), ["x"]);
    assert_eq!(text(&prompt, json!({"x": 1})), "{not_a_var} { 1 }");
}

#[test]
fn unbalanced_braces_are_invalid_templates_naming_the_template() {
    let cases = [
        ("Tell me {", "unclosed '{' at byte 8 in template \"Tell me {\""),
        ("a } b", "single '}' at byte 2 in template \"a } b\""),
        ("x {} y", "empty variable '{}' at byte 2 in template \"x {} y\""),
        ("{a{b}}", "unexpected '{' at byte 2 inside a variable name in template \"{a{b}}\""),
    ];
    for (template, what) in cases {
        let err = PromptTemplate::from_template(template).unwrap_err();
        assert!(matches!(err, Error::InvalidTemplate(_)), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!("invalid template: {what} (write '{{{{' or '}}}}' for a literal brace)")
        );
    }
    let err = ChatPromptTemplate::from_messages([("human", "oops }")]).unwrap_err();
    assert!(err.to_string().contains("in template \"oops }\""), "{err}");
}

#[test]
fn missing_variables_error_names_missing_expected_and_received() {
    let prompt = PromptTemplate::from_template("{greeting}, {name}! You are {age}.").unwrap();
    let err = prompt.format(json!({"name": "Al", "other": 1})).unwrap_err();
    match &err {
        Error::MissingVariables { template, missing, expected, received } => {
            assert_eq!(*template, "PromptTemplate");
            assert_eq!(missing, &["age", "greeting"]);
            assert_eq!(expected, &["age", "greeting", "name"]);
            assert_eq!(received, &["name", "other"]);
        }
        other => panic!("unexpected error {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        "input to PromptTemplate is missing variables [\"age\", \"greeting\"]; \
         expected: [\"age\", \"greeting\", \"name\"]; received: [\"name\", \"other\"]; \
         if {age} is meant as literal text, escape its braces: {{age}}"
    );
}

#[tokio::test]
async fn chat_missing_variables_error_names_placeholders_too() {
    let prompt = ChatPromptTemplate::from_messages([
        ChatPromptPart::from(("system", "You are {role}")),
        MessagesPlaceholder::new("history").into(),
        ("human", "{q}").into(),
    ])
    .unwrap();
    let err = prompt.invoke(json!({"role": "kind", "q": "hi"}), &config()).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "input to ChatPromptTemplate is missing variables [\"history\"]; \
         expected: [\"history\", \"q\", \"role\"]; received: [\"q\", \"role\"]; \
         if {history} is meant as literal text, escape its braces: {{history}}"
    );
}

#[tokio::test]
async fn a_bare_value_fills_the_only_variable() {
    let prompt = PromptTemplate::from_template("Tell me about {topic}").unwrap();
    let chain = prompt | RunnableLambda::new(|p: PromptValue| p.to_text());
    assert_eq!(chain.invoke(json!("cats"), &config()).await.unwrap(), "Tell me about cats");
    assert_eq!(chain.invoke(json!(42), &config()).await.unwrap(), "Tell me about 42");

    let chat = ChatPromptTemplate::from_messages([("system", "Be brief"), ("human", "{q}")]).unwrap();
    let messages = chat.format_messages(json!("why?")).unwrap();
    assert_eq!(messages, [Message::system("Be brief"), Message::human("why?")]);
}

#[test]
fn a_bare_value_is_rejected_when_the_template_has_several_variables() {
    let prompt = PromptTemplate::from_template("{a} {b}").unwrap();
    let err = prompt.format(json!("cats")).unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)));
    assert_eq!(
        err.to_string(),
        "invalid input: expected a JSON object of variables as input to PromptTemplate, got \"cats\" \
         (a bare value is accepted only by a template with exactly one variable; this one expects \
         [\"a\", \"b\"])"
    );
}

#[test]
fn null_input_is_an_empty_object() {
    let prompt = PromptTemplate::from_template("no variables").unwrap();
    assert_eq!(text(&prompt, serde_json::Value::Null), "no variables");
    let err = PromptTemplate::from_template("{a}").unwrap().format(serde_json::Value::Null).unwrap_err();
    assert!(matches!(err, Error::MissingVariables { .. }), "{err:?}");
}

#[test]
fn chat_roles_map_to_message_types() {
    let prompt = ChatPromptTemplate::from_messages([
        ("system", "s {x}"),
        ("human", "h {x}"),
        ("user", "u {x}"),
        ("ai", "a {x}"),
        ("assistant", "b {x}"),
    ])
    .unwrap();
    assert_eq!(
        prompt.format_messages(json!({"x": 1})).unwrap(),
        [
            Message::system("s 1"),
            Message::human("h 1"),
            Message::human("u 1"),
            Message::ai("a 1"),
            Message::ai("b 1"),
        ]
    );
}

#[test]
fn unknown_role_is_an_error_naming_it() {
    let err = ChatPromptTemplate::from_messages([("robot", "beep")]).unwrap_err();
    assert!(matches!(err, Error::InvalidTemplate(_)));
    assert_eq!(
        err.to_string(),
        "invalid template: unknown message role \"robot\" in ChatPromptTemplate; use one of system, human, \
         user, ai, assistant, placeholder"
    );
}

#[test]
fn required_and_optional_variables_follow_langchain() {
    let prompt = ChatPromptTemplate::from_messages([
        ChatPromptPart::from(("system", "You are {role}")),
        MessagesPlaceholder::new("history").into(),
        ("human", "{q}").into(),
        ("placeholder", "{extra}").into(),
    ])
    .unwrap();
    assert_eq!(prompt.input_variables(), ["history", "q", "role"]);
    assert_eq!(prompt.optional_variables(), ["extra"]);
}

#[test]
fn a_variable_both_optional_and_required_is_required() {
    let prompt = ChatPromptTemplate::from_messages([
        ChatPromptPart::from(MessagesPlaceholder::optional("x")),
        ("human", "{x}").into(),
    ])
    .unwrap();
    assert_eq!(prompt.input_variables(), ["x"]);
    assert!(prompt.optional_variables().is_empty());
}

#[test]
fn placeholder_role_needs_exactly_one_variable() {
    for template in ["history", "{a}{b}", "the {history}"] {
        let err = ChatPromptTemplate::from_messages([("placeholder", template)]).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "invalid template: a placeholder takes one variable in braces, like \"{{history}}\", got {template:?}"
            )
        );
    }
}

fn history_prompt() -> ChatPromptTemplate {
    ChatPromptTemplate::from_messages([
        ChatPromptPart::from(("system", "sys")),
        MessagesPlaceholder::new("history").into(),
        ("human", "{q}").into(),
    ])
    .unwrap()
}

#[test]
fn placeholder_given_a_non_list_is_invalid_input() {
    let err = history_prompt().format_messages(json!({"history": "notalist", "q": "x"})).unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)));
    assert_eq!(
        err.to_string(),
        "invalid input: variable history should be a list of messages, got \"notalist\""
    );
    let err = history_prompt().format_messages(json!({"history": {"a": 1}, "q": "x"})).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid input: variable history should be a list of messages, got {\"a\":1}"
    );
    let err = history_prompt().format_messages(json!({"history": null, "q": "x"})).unwrap_err();
    assert_eq!(err.to_string(), "invalid input: variable history should be a list of messages, got null");
}

#[test]
fn placeholder_accepts_message_likes() {
    let ai = serde_json::to_value(Message::Ai(AiMessage::new("serialized"))).unwrap();
    let history = json!([
        {"type": "human", "content": "typed"},
        {"role": "user", "content": "by role", "name": "ann"},
        {"role": "assistant", "content": null},
        ["ai", "pair"],
        ["system", [{"type": "text", "text": "blocks"}]],
        "bare string",
        {"role": "tool", "content": "42", "tool_call_id": "call-1"},
        {"type": "ai", "data": {"content": "from message_to_dict", "id": "m1"}},
        ai,
    ]);
    let messages = history_prompt().format_messages(json!({"history": history, "q": "now"})).unwrap();
    let mut named = Message::human("by role");
    if let Message::Human(m) = &mut named {
        m.name = Some("ann".into());
    }
    assert_eq!(
        messages,
        [
            Message::system("sys"),
            Message::human("typed"),
            named,
            Message::ai(""),
            Message::ai("pair"),
            Message::System(weft_runnable_core::SystemMessage {
                content: weft_runnable_core::Content::Blocks(vec![json!({"type": "text", "text": "blocks"})]),
                ..Default::default()
            }),
            Message::human("bare string"),
            Message::Tool(ToolMessage {
                content: "42".into(),
                tool_call_id: "call-1".into(),
                ..Default::default()
            }),
            Message::ai("from message_to_dict").with_id("m1"),
            Message::ai("serialized"),
            Message::human("now"),
        ]
    );
}

#[test]
fn placeholder_item_errors_name_the_variable_and_the_item() {
    // Each bad item is named in the error, after the variable it came from.
    let cases = [
        (json!({"role": "robot", "content": "x"}), "'robot'"),
        (json!({"content": "x"}), "content"),
        (json!(7), "7"),
        (json!(["human", "a", "b"]), "[\"human\",\"a\",\"b\"]"),
    ];
    for (item, culprit) in cases {
        let err = history_prompt().format_messages(json!({"history": [item], "q": "x"})).unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("invalid input: variable history: "), "{text}");
        assert!(text.contains(culprit), "{text} should name {culprit}");
    }
    let err = history_prompt()
        .format_messages(json!({"history": [{"role": "tool", "content": "x"}], "q": "x"}))
        .unwrap_err();
    assert!(err.to_string().starts_with("invalid input: variable history: invalid 'tool' message"), "{err}");
    assert!(err.to_string().contains("tool_call_id"), "{err}");
}

#[test]
fn optional_placeholder_may_be_absent_or_null() {
    let prompt = ChatPromptTemplate::from_messages([("placeholder", "{history}"), ("human", "{q}")]).unwrap();
    assert_eq!(prompt.format_messages(json!({"q": "hi"})).unwrap(), [Message::human("hi")]);
    assert_eq!(prompt.format_messages(json!({"q": "hi", "history": null})).unwrap(), [Message::human("hi")]);
    assert_eq!(
        prompt.format_messages(json!({"q": "hi", "history": [["ai", "earlier"]]})).unwrap(),
        [Message::ai("earlier"), Message::human("hi")]
    );
    let err = prompt.format_messages(json!({"q": "hi", "history": "nope"})).unwrap_err();
    assert_eq!(err.to_string(), "invalid input: variable history should be a list of messages, got \"nope\"");
}

#[test]
fn placeholder_with_n_messages_keeps_the_last_ones() {
    let prompt =
        ChatPromptTemplate::from_messages([MessagesPlaceholder::new("h").with_n_messages(2)]).unwrap();
    let messages = prompt.format_messages(json!({"h": ["one", "two", "three"]})).unwrap();
    assert_eq!(messages, [Message::human("two"), Message::human("three")]);
}

#[test]
fn literal_messages_are_not_templated() {
    let prompt = ChatPromptTemplate::from_messages([
        ChatPromptPart::from(Message::system("keep {this} as is")),
        ("human", "{q}").into(),
    ])
    .unwrap();
    assert_eq!(prompt.input_variables(), ["q"]);
    assert_eq!(
        prompt.format_messages(json!({"q": "x"})).unwrap(),
        [Message::system("keep {this} as is"), Message::human("x")]
    );
}

#[test]
fn partial_variables_prefill_and_input_wins() {
    let prompt = PromptTemplate::from_template("{greeting}, {name}").unwrap().partial("greeting", "Hello");
    assert_eq!(prompt.input_variables(), ["name"]);
    assert_eq!(prompt.partial_variables(), ["greeting"]);
    assert_eq!(text(&prompt, json!({"name": "Al"})), "Hello, Al");
    assert_eq!(text(&prompt, json!({"name": "Al", "greeting": "Hi"})), "Hi, Al");
    // The only variable left takes a bare value.
    assert_eq!(text(&prompt, json!("Bo")), "Hello, Bo");
}

#[test]
fn partial_functions_run_at_every_format() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let prompt = PromptTemplate::from_template("call {n}")
        .unwrap()
        .partial_fn("n", move || json!(counter.fetch_add(1, Ordering::SeqCst) + 1));
    assert!(prompt.input_variables().is_empty());
    assert_eq!(text(&prompt, json!({})), "call 1");
    assert_eq!(text(&prompt, json!({})), "call 2");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[test]
fn chat_partials_fill_templates_and_placeholders() {
    let prompt = history_prompt().partial("history", json!([["ai", "pre-filled"]]));
    assert_eq!(prompt.input_variables(), ["q"]);
    assert_eq!(prompt.partial_variables(), ["history"]);
    assert_eq!(
        prompt.format_messages(json!("go")).unwrap(),
        [Message::system("sys"), Message::ai("pre-filled"), Message::human("go")]
    );
    let optional = ChatPromptTemplate::from_messages([("placeholder", "{extra}"), ("human", "{role}: {q}")])
        .unwrap()
        .partial("extra", json!([]))
        .partial("role", "user");
    assert!(optional.optional_variables().is_empty());
    assert_eq!(optional.input_variables(), ["q"]);
    assert_eq!(optional.format_messages(json!({"q": "hi"})).unwrap(), [Message::human("user: hi")]);
}

#[tokio::test]
async fn templates_run_as_prompt_runs() {
    let recorder = EventRecorder::new();
    let config = RunnableConfig::default().with_callbacks(recorder.sink());
    let chat = ChatPromptTemplate::from_messages([("human", "{q}")]).unwrap();
    assert_eq!(
        chat.invoke(json!({"q": "hi"}), &config).await.unwrap(),
        PromptValue::Messages(vec![Message::human("hi")])
    );
    let prompt = PromptTemplate::from_template("{q}").unwrap();
    prompt.invoke(json!({"q": "hi"}), &config).await.unwrap();
    let _ = prompt.invoke(json!({}), &config).await.unwrap_err();
    let names = recorder.names();
    let expected: Vec<(String, String)> = [
        ("on_prompt_start", "ChatPromptTemplate"),
        ("on_prompt_end", "ChatPromptTemplate"),
        ("on_prompt_start", "PromptTemplate"),
        ("on_prompt_end", "PromptTemplate"),
        ("on_prompt_start", "PromptTemplate"),
        ("on_prompt_end", "PromptTemplate"),
    ]
    .iter()
    .map(|(e, n)| ((*e).to_owned(), (*n).to_owned()))
    .collect();
    assert_eq!(names, expected);
    let events = recorder.events();
    assert_eq!(events[1].data.output, Some(json!([{"type": "human", "content": "hi"}])));
    assert!(events[5].data.error.as_deref().unwrap().starts_with("input to PromptTemplate is missing"));
}

#[tokio::test]
async fn chat_prompt_pipes_into_a_model() {
    let model =
        RunnableLambda::new(|p: PromptValue| AiMessage::new(format!("{} messages", p.into_messages().len())));
    let chain = history_prompt() | model;
    let out =
        chain.invoke(json!({"history": [["human", "a"], ["ai", "b"]], "q": "c"}), &config()).await.unwrap();
    assert_eq!(out.text(), "4 messages");
}
