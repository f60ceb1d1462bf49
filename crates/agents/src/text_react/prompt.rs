//! The ReAct prompt: its standard template, how tools are described in it, and the scratchpad.

use serde_json::Value;
use weft_runnable_core::{PromptTemplate, Result, SharedTool, Tool};

use super::action::AgentStep;

/// The standard ReAct prompt (LangChain's `hwchase17/react`), with the variables `tools`, `tool_names`,
/// `input` and `agent_scratchpad`.
pub const REACT_PROMPT_TEMPLATE: &str =
    "Answer the following questions as best you can. You have access to the following tools:

{tools}

Use the following format:

Question: the input question you must answer
Thought: you should always think about what to do
Action: the action to take, should be one of [{tool_names}]
Action Input: the input to the action
Observation: the result of the action
... (this Thought/Action/Action Input/Observation can repeat N times)
Thought: I now know the final answer
Final Answer: the final answer to the original input question

Begin!

Question: {input}
Thought:{agent_scratchpad}";

/// The prefix of an observation in the scratchpad.
pub const OBSERVATION_PREFIX: &str = "Observation: ";

/// The prefix the model continues after an observation.
pub const LLM_PREFIX: &str = "Thought: ";

/// The stop sequence bound to the model, so that it does not write the observation itself.
pub const STOP_SEQUENCE: &str = "\nObservation";

/// [`REACT_PROMPT_TEMPLATE`] as a prompt template.
pub fn react_prompt() -> Result<PromptTemplate> {
    PromptTemplate::from_template(REACT_PROMPT_TEMPLATE)
}

/// Describes tools for the prompt, one per line: `name(arguments) - description`.
///
/// The arguments are those of the schema the model sees, in schema order, written `name: type`, with
/// ` = default` when the schema gives a default. A tool whose schema has no `properties` object is
/// written `name - description`.
///
/// ```
/// use serde_json::json;
/// use weft_agents::text_react::render_text_description;
/// use weft_runnable_core::{StructuredTool, ToolExt};
///
/// let echo = StructuredTool::from_fn(
///     "echo",
///     "Echo input.",
///     json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
///     |args, _| async move { Ok(args["q"].clone()) },
/// );
/// assert_eq!(render_text_description(&[echo.shared()]), "echo(q: string) - Echo input.");
/// ```
pub fn render_text_description(tools: &[SharedTool]) -> String {
    tools.iter().map(describe_tool).collect::<Vec<_>>().join("\n")
}

fn describe_tool(tool: &SharedTool) -> String {
    let schema = tool.model_schema();
    match schema.get("properties").and_then(Value::as_object) {
        Some(properties) => {
            let args: Vec<String> = properties
                .iter()
                .map(|(name, property)| match property.get("default") {
                    Some(default) => format!("{name}: {} = {default}", type_name(property)),
                    None => format!("{name}: {}", type_name(property)),
                })
                .collect();
            format!("{}({}) - {}", Tool::name(&**tool), args.join(", "), tool.description())
        }
        None => format!("{} - {}", Tool::name(&**tool), tool.description()),
    }
}

/// The type of a property schema in a few words: `string`, `integer | null`, `array[string]`, the
/// referenced definition's name, or `any`.
fn type_name(schema: &Value) -> String {
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        return reference.rsplit('/').next().unwrap_or(reference).to_owned();
    }
    match schema.get("type") {
        Some(Value::String(kind)) if kind == "array" => match schema.get("items") {
            Some(items) => format!("array[{}]", type_name(items)),
            None => "array".to_owned(),
        },
        Some(Value::String(kind)) => kind.clone(),
        Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" | "),
        _ => {
            let alternatives = schema.get("anyOf").or_else(|| schema.get("oneOf")).and_then(Value::as_array);
            match alternatives {
                Some(alternatives) => alternatives.iter().map(type_name).collect::<Vec<_>>().join(" | "),
                None => "any".to_owned(),
            }
        }
    }
}

/// The tool names, comma-separated, for the prompt's `tool_names`.
pub fn render_tool_names(tools: &[SharedTool]) -> String {
    tools.iter().map(|tool| Tool::name(&**tool)).collect::<Vec<_>>().join(", ")
}

/// The scratchpad the model continues: for each step, its log, then `\nObservation: <observation>\n`
/// and `Thought: ` (LangChain's `format_log_to_str`).
///
/// ```
/// use weft_agents::text_react::{AgentAction, AgentStep, format_log_to_str};
///
/// let step = AgentStep::new(AgentAction::new("echo", "hi", " look\nAction: echo\nAction Input: hi"), "HI");
/// assert_eq!(
///     format_log_to_str(&[step]),
///     " look\nAction: echo\nAction Input: hi\nObservation: HI\nThought: "
/// );
/// ```
pub fn format_log_to_str(steps: &[AgentStep]) -> String {
    format_log_to_str_with(steps, OBSERVATION_PREFIX, LLM_PREFIX)
}

/// [`format_log_to_str`] with other prefixes.
pub fn format_log_to_str_with(steps: &[AgentStep], observation_prefix: &str, llm_prefix: &str) -> String {
    let mut thoughts = String::new();
    for step in steps {
        thoughts.push_str(&step.action.log);
        thoughts.push('\n');
        thoughts.push_str(observation_prefix);
        thoughts.push_str(&step.observation);
        thoughts.push('\n');
        thoughts.push_str(llm_prefix);
    }
    thoughts
}
