//! LangChain 1.x's built-in middleware for [`create_agent`](crate::create_agent).
