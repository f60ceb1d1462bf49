//! Tools: argument validation, error policies, outputs, injected arguments and run events.
#![allow(clippy::unwrap_used, missing_docs)]

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use weft_runnable_core::{
    CommandPayload, Error, EventRecorder, InjectedArg, Runnable, RunnableConfig, SharedTool, StructuredTool,
    Tool, ToolCall, ToolCallOutput, ToolContext, ToolErrorPolicy, ToolExt, ToolOutput, ToolSpec, ToolStatus,
    invoke_tool, validate_args,
};

/// A person to register.
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Person {
    name: String,
    age: u8,
    email: Option<String>,
    tags: Vec<String>,
    address: Option<Address>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Address {
    city: String,
    zip: u32,
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
enum Unit {
    Celsius,
    Fahrenheit,
}

fn register() -> StructuredTool {
    StructuredTool::from_typed("register", "Registers a person.", |p: Person| async move {
        Ok(format!("registered {} ({})", p.name, p.age))
    })
}

fn boom() -> StructuredTool {
    StructuredTool::from_fn(
        "boom",
        "Always fails.",
        json!({"type": "object", "properties": {}}),
        |_, _| async { Err::<String, _>(Error::msg("kaboom")) },
    )
}

fn call(name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall { name: name.to_owned(), args, id: Some("call_9".to_owned()) }
}

#[tokio::test]
async fn tool_called_with_args_breaking_its_schema_lists_every_path() {
    let args = json!({
        "name": 7,
        "age": 300,
        "tags": ["a", 2],
        "address": {"city": "Oslo", "zip": "0150", "country": "NO"},
    });
    let err =
        register().invoke(call("register", args.clone()), &RunnableConfig::default()).await.unwrap_err();
    let Error::ToolArguments { tool, args: got, errors } = &err else { panic!("unexpected error {err:?}") };
    assert_eq!(tool, "register");
    assert_eq!(**got, args);
    assert_eq!(
        errors,
        &vec![
            "name: expected string, got integer 7".to_owned(),
            "age: expected a number <= 255, got 300".to_owned(),
            "tags.1: expected string, got integer 2".to_owned(),
            "address.zip: expected integer, got string \"0150\"".to_owned(),
            "address.country: unexpected field".to_owned(),
        ]
    );
    assert!(err.to_string().starts_with("error invoking tool 'register' with arguments"), "{err}");
    assert!(err.to_string().ends_with("address.country: unexpected field"), "{err}");
}

#[tokio::test]
async fn missing_required_arguments_are_reported_by_name() {
    let err =
        register().invoke(call("register", json!({"age": 3})), &RunnableConfig::default()).await.unwrap_err();
    let Error::ToolArguments { errors, .. } = err else { panic!() };
    assert_eq!(errors, vec!["name: missing required field", "tags: missing required field"]);
}

#[test]
fn validator_checks_integers_enums_and_null_alternatives() {
    let schema = schemars::schema_for!(Unit).to_value();
    assert!(validate_args(&schema, &json!("Celsius")).is_ok());
    assert_eq!(
        validate_args(&schema, &json!("Kelvin")).unwrap_err(),
        vec![r#"(root): expected one of ["Celsius","Fahrenheit"], got string "Kelvin""#]
    );
    let schema = json!({"type": "integer"});
    assert!(validate_args(&schema, &json!(3)).is_ok());
    assert_eq!(
        validate_args(&schema, &json!(3.5)).unwrap_err(),
        vec!["(root): expected integer, got number 3.5"]
    );
    let schema = schemars::schema_for!(Option<Address>).to_value();
    assert!(validate_args(&schema, &json!(null)).is_ok());
    assert_eq!(
        validate_args(&schema, &json!({"city": "x"})).unwrap_err(),
        vec!["zip: missing required field"]
    );
}

#[tokio::test]
async fn tool_error_raised_by_default() {
    let err = boom().invoke(call("boom", json!({})), &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(err.to_string(), "kaboom");
}

#[tokio::test]
async fn tool_error_policy_fixed_text_gives_error_message() {
    let tool = boom().with_error_policy(ToolErrorPolicy::text("try again later"));
    let message = tool.invoke(call("boom", json!({})), &RunnableConfig::default()).await.unwrap();
    assert_eq!(message.content.text(), "try again later");
    assert_eq!(message.status, ToolStatus::Error);
    assert_eq!(message.tool_call_id, "call_9");
}

#[tokio::test]
async fn tool_error_policy_message_and_handler_use_the_error() {
    let tool = boom().with_error_policy(ToolErrorPolicy::Message);
    let message = tool.invoke(call("boom", json!({})), &RunnableConfig::default()).await.unwrap();
    assert_eq!(message.content.text(), "kaboom");
    let tool = boom().with_error_policy(ToolErrorPolicy::handler(|e| format!("Error: {e}. Please fix.")));
    let message = tool.invoke(call("boom", json!({})), &RunnableConfig::default()).await.unwrap();
    assert_eq!(message.content.text(), "Error: kaboom. Please fix.");
    assert_eq!(message.status, ToolStatus::Error);
}

#[tokio::test]
async fn tool_error_policy_does_not_cover_argument_validation() {
    let tool = register().with_error_policy(ToolErrorPolicy::Message);
    let err =
        tool.invoke(call("register", json!({"age": "x"})), &RunnableConfig::default()).await.unwrap_err();
    assert!(matches!(err, Error::ToolArguments { .. }), "{err:?}");
}

#[tokio::test]
async fn tool_error_policy_never_handles_control_flow() {
    let tool = StructuredTool::from_fn("pause", "Pauses.", json!({"type": "object"}), |_, _| async {
        Err::<String, _>(Error::ControlFlow(weft_runnable_core::ControlFlow::new("interrupt", 1_u8)))
    })
    .with_error_policy(ToolErrorPolicy::Message);
    let err = tool.invoke(call("pause", json!({})), &RunnableConfig::default()).await.unwrap_err();
    assert!(err.is_control_flow());
}

#[tokio::test]
async fn tool_json_output_becomes_json_text_and_artifact_is_kept() {
    let tool = StructuredTool::from_fn("nums", "Numbers.", json!({"type": "object"}), |_, _| async {
        Ok(json!({"n": [1, 2]}))
    });
    let message = tool.invoke(call("nums", json!({})), &RunnableConfig::default()).await.unwrap();
    assert_eq!(message.content.text(), r#"{"n":[1,2]}"#);
    let tool = StructuredTool::from_fn("docs", "Docs.", json!({"type": "object"}), |_, _| async {
        Ok(ToolOutput::content_and_artifact("found 1", json!({"ids": [7]})))
    });
    let message = tool.invoke(call("docs", json!({})), &RunnableConfig::default()).await.unwrap();
    assert_eq!(message.content.text(), "found 1");
    assert_eq!(message.artifact, Some(json!({"ids": [7]})));
}

#[tokio::test]
async fn tool_returning_a_command_hands_it_to_the_caller() {
    #[derive(Debug, PartialEq)]
    struct Goto(&'static str);
    let tool = StructuredTool::from_fn("jump", "Jumps.", json!({"type": "object"}), |_, _| async {
        Ok(ToolOutput::command(CommandPayload::new(Goto("end"), json!({"goto": "end"}))))
    });
    let out = invoke_tool(&tool, call("jump", json!({})), ToolContext::default()).await.unwrap();
    let ToolCallOutput::Command(command) = out else { panic!("expected a command") };
    assert_eq!(command.downcast_ref::<Goto>(), Some(&Goto("end")));
    let err = tool.invoke(call("jump", json!({})), &RunnableConfig::default()).await.unwrap_err();
    assert!(err.to_string().contains("only a graph can apply"), "{err}");
}

#[tokio::test]
async fn structured_tool_injects_tool_call_id_hidden_from_schema() {
    let schema = json!({
        "type": "object",
        "properties": {"q": {"type": "string"}, "call_id": {"type": "string"}},
        "required": ["q", "call_id"],
    });
    let tool = StructuredTool::from_fn("echo", "Echoes.", schema, |args, _| async move {
        Ok(format!("{} from {}", args["q"].as_str().unwrap(), args["call_id"].as_str().unwrap()))
    })
    .with_injected(InjectedArg::tool_call_id("call_id"));
    assert_eq!(tool.spec().parameters["required"], json!(["q"]));
    let message = tool.invoke(call("echo", json!({"q": "hi"})), &RunnableConfig::default()).await.unwrap();
    assert_eq!(message.content.text(), "hi from call_9");
}

#[tokio::test]
async fn a_tool_keeps_its_validator_and_an_injected_argument_made_later_compiles_it_again() {
    let schema = json!({
        "type": "object",
        "properties": {"q": {"type": "string"}, "call_id": {"type": "string"}},
        "required": ["q", "call_id"],
    });
    let tool = StructuredTool::from_fn("echo", "Echoes.", schema.clone(), |args, _| async move {
        Ok(format!("{} from {}", args["q"].as_str().unwrap(), args["call_id"].as_str().unwrap()))
    });
    // The validator made once checks as `validate_args` does, call after call.
    let validator = tool.args_validator();
    for _ in 0..2 {
        assert_eq!(validator.validate(&json!({"q": 1})), validate_args(&schema, &json!({"q": 1})));
        assert_eq!(
            tool.args_validator().validate(&json!({"q": "hi"})).unwrap_err(),
            vec!["call_id: missing required field"]
        );
    }
    // Hidden from the model now: the kept validator is made again from the model's schema.
    let tool = tool.with_injected(InjectedArg::tool_call_id("call_id"));
    assert!(tool.args_validator().validate(&json!({"q": "hi"})).is_ok());
    let message = tool.invoke(call("echo", json!({"q": "hi"})), &RunnableConfig::default()).await.unwrap();
    assert_eq!(message.content.text(), "hi from call_9");
    let err = tool.invoke(call("echo", json!({"q": 2})), &RunnableConfig::default()).await.unwrap_err();
    let Error::ToolArguments { errors, .. } = err else { panic!("unexpected error {err:?}") };
    assert_eq!(errors, vec!["q: expected string, got integer 2"]);
}

#[tokio::test]
async fn tool_runs_emit_tool_start_end_and_error_events() {
    let recorder = EventRecorder::new();
    let config = RunnableConfig::default().with_callbacks(recorder.sink());
    register().invoke(call("register", json!({"name": "a", "age": 1, "tags": []})), &config).await.unwrap();
    boom().invoke(call("boom", json!({})), &config).await.unwrap_err();
    let events = recorder.events();
    let names: Vec<_> = events.iter().map(|e| (e.event.as_str(), e.name.as_str())).collect();
    assert_eq!(
        names,
        vec![
            ("on_tool_start", "register"),
            ("on_tool_end", "register"),
            ("on_tool_start", "boom"),
            ("on_tool_error", "boom"),
        ]
    );
    assert_eq!(events[0].data.input, Some(json!({"name": "a", "age": 1, "tags": []})));
    assert_eq!(events[1].data.output.as_ref().unwrap()["content"], json!("registered a (1)"));
}

#[test]
fn tool_spec_converts_to_openai_format() {
    let spec = register().spec();
    assert_eq!(spec.description, "Registers a person.");
    let openai = spec.to_openai();
    assert_eq!(openai["type"], "function");
    assert_eq!(openai["function"]["name"], "register");
    assert_eq!(openai["function"]["parameters"]["required"], json!(["name", "age", "tags"]));
    assert!(openai["function"]["parameters"].get("title").is_none());
    assert_eq!(ToolSpec::from_value(&openai).unwrap(), spec);
    let from_type = ToolSpec::from_type::<Person>();
    assert_eq!(
        (from_type.name.as_str(), from_type.description.as_str()),
        ("Person", "A person to register.")
    );
}

#[test]
fn tools_of_different_types_share_one_list() {
    let tools: Vec<SharedTool> =
        vec![register().shared(), boom().with_error_policy(ToolErrorPolicy::Message).shared()];
    let names: Vec<_> = tools.iter().map(|t| t.name().into_owned()).collect();
    assert_eq!(names, vec!["register", "boom"]);
    let specs: Vec<ToolSpec> = tools.iter().map(ToolSpec::from).collect();
    assert_eq!(specs[1].name, "boom");
}
