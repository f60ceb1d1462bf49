//! # weft-agents
//!
//! Prebuilt agents land here, built from the public API of `weft-runnable-core` and `weft-graph` only:
//! `ToolNode`, `tools_condition`, `create_react_agent`, a text ReAct `AgentExecutor`, human-in-the-loop
//! helpers.
//!
//! Nothing is exported yet: they need the graph engine first.
