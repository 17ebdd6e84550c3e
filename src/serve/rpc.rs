//! The JSON-RPC 2.0 message model: incoming messages, responses, notifications and the error
//! codes the service uses.

use serde::Serialize;
use serde_json::{json, Value};

/// Standard JSON-RPC 2.0 codes, the LSP cancellation code, and baton's application range.
pub mod code {
    /// Invalid JSON (or a frame that could not be read).
    pub const PARSE_ERROR: i64 = -32700;
    /// Valid JSON that is not a JSON-RPC request, or a message over the size limit.
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    /// The client cancelled the request with `$/cancelRequest`.
    pub const REQUEST_CANCELLED: i64 = -32800;
    /// The policy set does not check (data: diagnostics).
    pub const POLICY_ERROR: i64 = -32001;
    /// The state given or stored is invalid (data: problems).
    pub const STATE_ERROR: i64 = -32002;
    /// The thread, run or handoff does not exist.
    pub const NOT_FOUND: i64 = -32003;
    /// The store failed or refused the operation.
    pub const STORE_ERROR: i64 = -32004;
    /// A template failed to render.
    pub const RENDER_ERROR: i64 = -32005;
    /// Delivery (off-band write, pre-grant) failed.
    pub const DELIVERY_ERROR: i64 = -32006;
    /// The server is shutting down and takes no new requests.
    pub const SHUTTING_DOWN: i64 = -32007;
}

/// A request id: a number or a string (JSON-RPC 2.0 §4).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(untagged)]
pub enum Id {
    Num(i64),
    Str(String),
}

impl Id {
    /// The id a JSON value holds, if it is an integer or a string.
    pub fn from_value(v: &Value) -> Option<Id> {
        match v {
            Value::Number(n) => n.as_i64().map(Id::Num),
            Value::String(s) => Some(Id::Str(s.clone())),
            _ => None,
        }
    }
}

/// An error response's `error` member.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }
    pub fn with_data(mut self, data: Value) -> RpcError {
        self.data = Some(data);
        self
    }
    pub fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(code::INVALID_PARAMS, message)
    }
    pub fn internal(message: impl Into<String>) -> RpcError {
        RpcError::new(code::INTERNAL_ERROR, message)
    }
}

/// A message the client sent.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Request {
        id: Id,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// A response to a request of ours; the service sends none, so these are ignored.
    Response,
}

/// Parse one message body. On failure, the error response to send (with the id when known).
pub fn parse(body: &[u8]) -> Result<Incoming, (Option<Id>, RpcError)> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        (
            None,
            RpcError::new(
                code::PARSE_ERROR,
                format!(
                    "invalid JSON at line {} column {}: {}",
                    e.line(),
                    e.column(),
                    strip_position(&e.to_string())
                ),
            ),
        )
    })?;
    let Value::Object(mut m) = v else {
        let what = if v.is_array() {
            "batch requests (arrays) are not supported; send one request per message"
        } else {
            "a JSON-RPC message must be a JSON object"
        };
        return Err((None, RpcError::new(code::INVALID_REQUEST, what)));
    };
    let raw_id = m.remove("id");
    let id = match &raw_id {
        None => None,
        Some(v) => match Id::from_value(v) {
            Some(id) => Some(id),
            None => {
                return Err((
                    None,
                    RpcError::new(
                        code::INVALID_REQUEST,
                        format!("`id` must be an integer or a string, not {v}"),
                    ),
                ))
            }
        },
    };
    let invalid =
        |id: &Option<Id>, msg: String| Err((id.clone(), RpcError::new(code::INVALID_REQUEST, msg)));
    match m.get("jsonrpc") {
        Some(Value::String(s)) if s == "2.0" => {}
        Some(other) => return invalid(&id, format!("`jsonrpc` must be \"2.0\", not {other}")),
        None => return invalid(&id, "missing `\"jsonrpc\": \"2.0\"`".into()),
    }
    let method = match m.remove("method") {
        Some(Value::String(s)) => s,
        Some(other) => return invalid(&id, format!("`method` must be a string, not {other}")),
        None if m.contains_key("result") || m.contains_key("error") => {
            return Ok(Incoming::Response)
        }
        None => return invalid(&id, "missing `method`".into()),
    };
    let params = match m.remove("params") {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(p @ (Value::Object(_) | Value::Array(_))) => p,
        Some(other) => {
            return Err((
                id,
                RpcError::new(
                    code::INVALID_PARAMS,
                    format!("`params` must be an object or an array, not {other}"),
                ),
            ))
        }
    };
    Ok(match id {
        Some(id) => Incoming::Request { id, method, params },
        None => Incoming::Notification { method, params },
    })
}

fn strip_position(s: &str) -> String {
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s.to_string(),
    }
}

/// A success response.
pub fn response(id: &Id, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// The JSON text of a success response, byte for byte what serializing [`response`] gives
/// (its members in key order: `id`, `jsonrpc`, `result`), without building the response
/// object around `result`.
pub fn response_body(id: &Id, result: &Value) -> Vec<u8> {
    response_body_json(id, &serde_json::to_vec(result).unwrap_or_default())
}

/// [`response_body`] of a result given as its JSON text.
pub fn response_body_json(id: &Id, result: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(result.len().saturating_add(64));
    out.extend_from_slice(b"{\"id\":");
    let _ = serde_json::to_writer(&mut out, id);
    out.extend_from_slice(b",\"jsonrpc\":\"2.0\",\"result\":");
    out.extend_from_slice(result);
    out.push(b'}');
    out
}

/// An error response; `id` is null when the request's id could not be read.
pub fn error_response(id: Option<&Id>, err: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": err})
}

/// A notification from the server.
pub fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_body_is_the_serialized_response() {
        let result = json!({"z": [1, 2.5, "three"], "a": {"n": null, "b": true}, "é": "\u{1}\n"});
        for id in [Id::Num(-7), Id::Str("req \"1\"".into())] {
            let want = serde_json::to_vec(&response(&id, result.clone())).unwrap();
            assert_eq!(response_body(&id, &result), want);
        }
    }
}
