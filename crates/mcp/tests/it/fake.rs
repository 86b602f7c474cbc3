//! A tool host with two sessions' worth of policy and a log of what happened to sessions.
//!
//! Tools: `echo` (allowed; returns its `text`, and the idempotency key it was given), `write_file` (listed but denied by the rule
//! `writable_paths`), `shell` (exists, but no session's policy allows it, so never listed).

use std::sync::Mutex;

use forge_mcp::{HostError, ToolHost, ToolReply};
use forge_types::tool::{SessionId, ToolSpec};
use serde_json::{Map, Value, json};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    Opened(SessionId),
    Attached(SessionId),
    Closed(SessionId),
}

#[derive(Debug, Default)]
pub(crate) struct FakeHost {
    sessions: Mutex<Vec<SessionId>>,
    pub(crate) events: Mutex<Vec<Event>>,
}

impl FakeHost {
    pub(crate) fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap().clone()
    }

    /// A session made outside MCP (through the HTTP API, say), to attach to.
    pub(crate) fn existing_session(&self) -> SessionId {
        let id = SessionId::from_random([0xee; 6]);
        self.sessions.lock().unwrap().push(id.clone());
        id
    }

    fn known(&self, session: &SessionId) -> Result<(), HostError> {
        if self.sessions.lock().unwrap().contains(session) {
            Ok(())
        } else {
            Err(HostError::UnknownSession(session.clone()))
        }
    }
}

pub(crate) fn echo_spec() -> ToolSpec {
    ToolSpec {
        name: "echo".to_owned(),
        description: "Returns its text.".to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        }),
    }
}

pub(crate) fn write_spec() -> ToolSpec {
    ToolSpec {
        name: "write_file".to_owned(),
        description: "Writes a file.".to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        }),
    }
}

impl ToolHost for FakeHost {
    async fn open(&self, attach: Option<SessionId>) -> Result<SessionId, HostError> {
        if let Some(id) = attach {
            self.known(&id)?;
            self.events
                .lock()
                .unwrap()
                .push(Event::Attached(id.clone()));
            return Ok(id);
        }
        let mut sessions = self.sessions.lock().unwrap();
        let id = SessionId::from_random([0, 0, 0, 0, 0, u8::try_from(sessions.len()).unwrap()]);
        sessions.push(id.clone());
        self.events.lock().unwrap().push(Event::Opened(id.clone()));
        Ok(id)
    }

    async fn tools(&self, session: &SessionId) -> Result<Vec<ToolSpec>, HostError> {
        self.known(session)?;
        Ok(vec![echo_spec(), write_spec()])
    }

    async fn call(
        &self,
        session: &SessionId,
        tool: &str,
        arguments: Map<String, Value>,
        idempotency_key: Option<String>,
    ) -> Result<ToolReply, HostError> {
        self.known(session)?;
        match tool {
            "echo" => {
                let text = arguments
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                // The key shows in the reply only when the client sent one.
                let mut structured = json!({"session": session, "text": text});
                if let Some(key) = idempotency_key {
                    structured["idempotency_key"] = json!(key);
                }
                Ok(ToolReply::ok(
                    format!("{session}: {text}"),
                    Some(structured),
                ))
            }
            "write_file" => Ok(ToolReply::error(
                "denied by rule writable_paths: /etc/passwd is outside /workspace",
            )),
            "shell" => Ok(ToolReply::error(
                "denied by rule tools: shell is not allowed",
            )),
            other => Err(HostError::UnknownTool(other.to_owned())),
        }
    }

    async fn close(&self, session: &SessionId) {
        self.sessions.lock().unwrap().retain(|s| s != session);
        self.events
            .lock()
            .unwrap()
            .push(Event::Closed(session.clone()));
    }
}
