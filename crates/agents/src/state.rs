//! The states the prebuilt agents work on: [`HasMessages`] (a conversation channel), [`ReactAgentState`]
//! (what [`create_react_agent`](crate::create_react_agent) needs besides it) and the ready-made
//! [`AgentState`].

use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_graph::{Messages, MessagesState, State};
use weft_runnable_core::Message;

/// A graph state with a conversation channel (LangGraph's `messages_key`): [`ToolNode`](crate::ToolNode)
/// reads the tool calls from it and writes tool messages to it, [`tools_condition`](crate::tools_condition)
/// routes on it.
///
/// Implemented for [`MessagesState`] and [`AgentState`]. For a state of your own, derive it: the
/// conversation is the field named `messages`, or else the one field marked `#[state(add_messages)]`.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use weft_agents::HasMessages;
/// use weft_graph::{Messages, State};
/// use weft_runnable_core::Message;
///
/// #[derive(State, HasMessages, Debug, Clone, Default, Serialize, Deserialize)]
/// struct Chat {
///     #[state(add_messages)]
///     history: Messages,
///     user: String,
/// }
///
/// let chat = Chat { history: vec![Message::human("hi")].into(), user: "ada".into() };
/// assert_eq!(chat.messages()[0].text(), "hi");
/// let _update: ChatUpdate = Chat::messages_update(vec![Message::ai("hello")]);
/// ```
///
/// By hand, the same is:
///
/// ```
/// # use serde::{Deserialize, Serialize};
/// # use weft_agents::HasMessages;
/// # use weft_graph::{Messages, State};
/// # use weft_runnable_core::Message;
/// # #[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
/// # struct Chat {
/// #     #[state(add_messages)]
/// #     history: Messages,
/// # }
/// impl HasMessages for Chat {
///     fn messages(&self) -> &[Message] {
///         &self.history
///     }
///     fn messages_update(messages: Vec<Message>) -> ChatUpdate {
///         Chat::update().history(messages)
///     }
/// }
/// ```
pub trait HasMessages: State {
    /// The conversation, oldest first.
    fn messages(&self) -> &[Message];

    /// An update that adds `messages` to the conversation (through its reducer, normally `add_messages`:
    /// a message whose id is already there replaces it).
    fn messages_update(messages: Vec<Message>) -> Self::Update;
}

impl HasMessages for MessagesState {
    fn messages(&self) -> &[Message] {
        &self.messages
    }

    fn messages_update(messages: Vec<Message>) -> Self::Update {
        MessagesState::update().messages(messages)
    }
}

/// What [`create_react_agent`](crate::create_react_agent) needs of a state besides the conversation.
///
/// Both methods have defaults for states without the channel: a state without a structured-response
/// channel cannot be used with a response format (building the agent says so), and one without an
/// `llm_input_messages` channel always sends the conversation itself to the model. The remaining steps
/// (LangGraph's `remaining_steps` channel) come from the graph's
/// [`Runtime::remaining_steps`](weft_graph::Runtime::remaining_steps) and need no channel.
pub trait ReactAgentState: HasMessages + Default + Serialize + for<'de> Deserialize<'de> {
    /// An update that stores the structured response, or `None` when the state has no channel for it.
    fn structured_response_update(value: Value) -> Option<Self::Update> {
        let _ = value;
        None
    }

    /// The messages a pre-model hook chose for this model call (not kept in the conversation), if any.
    fn llm_input_messages(&self) -> Option<&[Message]> {
        None
    }
}

impl ReactAgentState for MessagesState {}

/// The state of [`create_react_agent`](crate::create_react_agent) (LangGraph's `AgentState` with its
/// `structured_response`): the conversation, the structured response produced after the loop when a
/// response format is set, and the messages a pre-model hook chose for the next model call.
#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentState {
    /// The conversation, merged by message id.
    #[state(add_messages)]
    pub messages: Messages,
    /// The structured response (JSON of the response format's type), once produced.
    pub structured_response: Option<Value>,
    /// Messages for the next model call instead of `messages`, written by a pre-model hook; cleared at the
    /// end of every step in which nothing writes it.
    #[state(ephemeral)]
    pub llm_input_messages: Option<Vec<Message>>,
}

impl HasMessages for AgentState {
    fn messages(&self) -> &[Message] {
        &self.messages
    }

    fn messages_update(messages: Vec<Message>) -> Self::Update {
        AgentState::update().messages(messages)
    }
}

impl ReactAgentState for AgentState {
    fn structured_response_update(value: Value) -> Option<Self::Update> {
        Some(AgentState::update().structured_response(Some(value)))
    }

    fn llm_input_messages(&self) -> Option<&[Message]> {
        self.llm_input_messages.as_deref()
    }
}

/// The JSON object of a state's channels (empty channels left out), as injected `state` arguments see
/// it.
pub(crate) fn state_json<S: State>(state: &S) -> weft_runnable_core::Result<Value> {
    let mut map = serde_json::Map::new();
    for (i, channel) in state.channels().iter().enumerate() {
        let value =
            state.channel_to_json(i).map_err(|e| weft_runnable_core::Error::Serialization(e.to_string()))?;
        if let Some(value) = value {
            map.insert(channel.name.to_string(), value);
        }
    }
    Ok(Value::Object(map))
}
