//! The JSON-RPC wire: which dialect a body speaks, its calls, and the replies in that dialect.
//! Pure functions from bytes to values and back; `rpc::serve` does the HTTP around them.
//!
//! Two dialects, chosen per body:
//! - **gorilla** (WAM's `github.com/gorilla/rpc/json`, reference §1.2): any object without
//!   `"jsonrpc":"2.0"`. `params` is a one-element array (an object is accepted too), a reply is
//!   `{"result":…,"error":null,"id":…}` plus a newline, a method error is a bare string with HTTP
//!   200, and envelope errors are `text/plain` 400s with gorilla's own messages. A call without an
//!   id (or with `"id":null`) is a notification: it runs and gets an empty 200.
//! - **JSON-RPC 2.0**: an object with `"jsonrpc":"2.0"`, or a batch (a JSON array; every element
//!   is answered as 2.0, since batches exist only there). Errors carry the codes of [`ErrorKind`].
//!
//! A body that is not JSON at all is answered as 2.0 (-32700) when its text mentions
//! `"jsonrpc"`, else as gorilla (400 text/plain): the only hint there is.

use serde::Serialize;
use serde_json::{Map, Value};
use telemesh_core::go::json_type as go_type;
/// Go's `%q` of a string, as gorilla puts it in its messages.
pub use telemesh_core::go::quote as go_quote;

/// Which protocol a call speaks, and so which shape its reply takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// WAM's gorilla JSON-RPC 1.0 shape.
    Gorilla,
    /// JSON-RPC 2.0.
    V2,
}

/// The calls in batches are capped, so one body cannot hold the replica for long.
pub const MAX_BATCH: usize = 100;

/// Every error a call can get, with its JSON-RPC 2.0 code and HTTP status. The one table of
/// codes: the application codes mirror the HTTP status they stand for (`-32000 - (status - 400)`
/// would clash with reserved codes, so they are listed instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// -32700: the body is not JSON.
    Parse,
    /// -32600: not a request object (or a bad batch).
    InvalidRequest,
    /// -32601: no such method.
    MethodNotFound,
    /// -32602: params of the wrong JSON shape (gorilla: a 400 like its decoder's).
    ParamsShape,
    /// -32602: params that decode but do not validate; WAM's message (gorilla: a method error).
    InvalidParams,
    /// -32603: the API server failed or could not be reached.
    Internal,
    /// -32001 (HTTP 401): no bearer token, or one the API server does not accept.
    Unauthenticated,
    /// -32003 (HTTP 403): the caller may not do this (SubjectAccessReview said no).
    Forbidden,
    /// -32004 (HTTP 404): the action, pod, node or namespace does not exist.
    NotFound,
    /// -32009 (HTTP 409): the request conflicts with what exists: an idempotency key used for
    /// another request, a pod that is not Pending or already has a node.
    Conflict,
    /// -32022 (HTTP 422): the node cannot take the pod (resources, taints, selector,
    /// unschedulable); the message gives the scheduler's reason.
    Unfit,
}

impl ErrorKind {
    /// The JSON-RPC 2.0 error code.
    pub fn code(self) -> i64 {
        match self {
            Self::Parse => -32700,
            Self::InvalidRequest => -32600,
            Self::MethodNotFound => -32601,
            Self::ParamsShape | Self::InvalidParams => -32602,
            Self::Internal => -32603,
            Self::Unauthenticated => -32001,
            Self::Forbidden => -32003,
            Self::NotFound => -32004,
            Self::Conflict => -32009,
            Self::Unfit => -32022,
        }
    }

    /// Whether gorilla reports it before calling the method (a `text/plain` 400) rather than
    /// as the method's error.
    pub fn is_gorilla_envelope(self) -> bool {
        matches!(
            self,
            Self::Parse | Self::InvalidRequest | Self::MethodNotFound | Self::ParamsShape
        )
    }

    /// The HTTP status of a single call's reply carrying this error (batches are always 200):
    /// authentication and authorization failures say so at the HTTP level too, for proxies and
    /// `curl -f`; every other error is in the body.
    pub fn http_status(self) -> u16 {
        match self {
            Self::Unauthenticated => 401,
            Self::Forbidden => 403,
            _ => 200,
        }
    }

    /// A bounded name for metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Parse => "parse",
            Self::InvalidRequest => "invalid_request",
            Self::MethodNotFound => "method_not_found",
            Self::ParamsShape | Self::InvalidParams => "invalid_params",
            Self::Internal => "internal",
            Self::Unauthenticated => "unauthenticated",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not_found",
            Self::Conflict => "conflict",
            Self::Unfit => "unfit",
        }
    }
}

/// A call's error: its kind and a message a person can act on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct RpcError {
    /// What went wrong, as a code.
    pub kind: ErrorKind,
    /// The message (WAM's where WAM has one).
    pub message: String,
    /// More detail for 2.0 replies (`error.data`).
    pub data: Option<Value>,
}

impl RpcError {
    /// An error of `kind` saying `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            data: None,
        }
    }

    /// Adds `error.data`.
    #[must_use]
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
}

/// One call of a body.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The dialect its reply takes.
    pub dialect: Dialect,
    /// Its id; `None` for a notification.
    pub id: Option<Value>,
    /// The method as sent (`action.Create`).
    pub method: String,
    /// The params member as sent; `None` when absent (or, for gorilla, `null`).
    pub params: Option<Value>,
}

/// A call that could not be read, answered in `dialect` with `id` (if it had one).
#[derive(Debug, Clone, PartialEq)]
pub struct BadCall {
    /// The dialect of the reply.
    pub dialect: Dialect,
    /// The id, when the call had a readable one; `None` answers with `"id":null`.
    pub id: Option<Value>,
    /// The error.
    pub error: RpcError,
}

/// What a body holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// One call (or one unreadable one).
    Single(Result<Call, Box<BadCall>>),
    /// A batch: its elements, in order.
    Batch(Vec<Result<Call, Box<BadCall>>>),
}

/// What a call is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// An action method.
    Action(telemesh_core::action::Method),
    /// `action.Get`.
    Get,
    /// `action.Wait`.
    Wait,
}

impl Target {
    /// The method's name after `action.`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Action(m) => m.as_str(),
            Self::Get => "Get",
            Self::Wait => "Wait",
        }
    }
}

/// Resolves a method name as gorilla's service map does (`action.<Name>`, case-sensitive),
/// with gorilla's messages.
pub fn resolve(method: &str) -> Result<Target, RpcError> {
    let parts: Vec<&str> = method.split('.').collect();
    let [service, name] = parts[..] else {
        return Err(RpcError::new(
            ErrorKind::MethodNotFound,
            format!(
                "rpc: service/method request ill-formed: {}",
                go_quote(method)
            ),
        ));
    };
    if service != "action" {
        return Err(RpcError::new(
            ErrorKind::MethodNotFound,
            format!("rpc: can't find service {}", go_quote(method)),
        ));
    }
    match name {
        "Get" => Ok(Target::Get),
        "Wait" => Ok(Target::Wait),
        _ => telemesh_core::action::Method::parse(name)
            .map(Target::Action)
            .ok_or_else(|| {
                RpcError::new(
                    ErrorKind::MethodNotFound,
                    format!("rpc: can't find method {}", go_quote(method)),
                )
            }),
    }
}

/// The args object of a call: WAM's one-element array unwrapped (extra elements ignored, as Go
/// ignores them; an empty array or a `null` element is an empty object, as Go leaves the args
/// zero), or an object as is. gorilla without params: its "missing params field"; 2.0 without
/// params: an empty object (the method then says what is missing).
pub fn args(call: &Call) -> Result<Value, RpcError> {
    match &call.params {
        None if call.dialect == Dialect::Gorilla => Err(RpcError::new(
            ErrorKind::ParamsShape,
            "rpc: method request ill-formed: missing params field",
        )),
        None => Ok(Value::Object(Map::new())),
        Some(Value::Array(items)) => match items.first() {
            None | Some(Value::Null) => Ok(Value::Object(Map::new())),
            Some(first) => {
                if call.dialect == Dialect::V2 && items.len() > 1 {
                    return Err(RpcError::new(
                        ErrorKind::ParamsShape,
                        format!(
                            "params is an array of {} elements; send one object, or an array holding one",
                            items.len()
                        ),
                    ));
                }
                Ok(first.clone())
            }
        },
        Some(obj @ Value::Object(_)) => Ok(obj.clone()),
        Some(other) => Err(RpcError::new(
            ErrorKind::ParamsShape,
            match call.dialect {
                Dialect::Gorilla => format!(
                    "json: cannot unmarshal {} into Go value of type [1]interface {{}}",
                    go_type(other)
                ),
                Dialect::V2 => format!(
                    "params must be an object or a one-element array holding one, not a {}",
                    go_type(other)
                ),
            },
        )),
    }
}

/// Looks `key` up as Go's decoder matches struct fields: exactly, else case-insensitively (the
/// last such key wins, as Go's decoder overwrites).
pub fn field<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).or_else(|| {
        obj.iter()
            .rev()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    })
}

fn gorilla_call(obj: &Map<String, Value>) -> Result<Call, Box<BadCall>> {
    // Go decodes `{"method":string,"params":RawMessage,"id":RawMessage}`; `null` leaves a
    // pointer nil, so `"id":null` is a notification and `"params":null` is missing.
    let id = field(obj, "id").filter(|v| !v.is_null()).cloned();
    let method = match field(obj, "method") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(Box::new(BadCall {
                dialect: Dialect::Gorilla,
                id,
                error: RpcError::new(
                    ErrorKind::InvalidRequest,
                    format!(
                        "json: cannot unmarshal {} into Go struct field serverRequest.method of type string",
                        go_type(other)
                    ),
                ),
            }));
        }
    };
    Ok(Call {
        dialect: Dialect::Gorilla,
        id,
        method,
        params: field(obj, "params").filter(|v| !v.is_null()).cloned(),
    })
}

fn v2_call(value: &Value) -> Result<Call, Box<BadCall>> {
    let invalid = |id: Option<Value>, message: String| {
        Box::new(BadCall {
            dialect: Dialect::V2,
            id,
            error: RpcError::new(ErrorKind::InvalidRequest, message),
        })
    };
    let Value::Object(obj) = value else {
        return Err(invalid(
            None,
            format!("a request must be an object, not a {}", go_type(value)),
        ));
    };
    let id = obj.get("id").cloned();
    if let Some(id) = &id
        && !matches!(id, Value::String(_) | Value::Number(_) | Value::Null)
    {
        return Err(invalid(
            None,
            format!(
                "id must be a string, a number or null, not a {}",
                go_type(id)
            ),
        ));
    }
    if obj.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return Err(invalid(
            id,
            "a request in a batch must say \"jsonrpc\":\"2.0\"".into(),
        ));
    }
    let method = match obj.get("method") {
        Some(Value::String(m)) => m.clone(),
        _ => return Err(invalid(id, "method must be a string".into())),
    };
    let params = obj.get("params").cloned();
    if let Some(p) = &params
        && !matches!(p, Value::Array(_) | Value::Object(_))
    {
        return Err(invalid(
            id,
            format!("params must be an object or an array, not a {}", go_type(p)),
        ));
    }
    Ok(Call {
        dialect: Dialect::V2,
        id,
        method,
        params,
    })
}

/// Reads a body into its calls.
pub fn parse(body: &[u8]) -> Body {
    let value: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            let v2 = String::from_utf8_lossy(body).contains("\"jsonrpc\"");
            let (dialect, message) = if v2 {
                (Dialect::V2, format!("the body is not JSON: {e}"))
            } else if body.iter().all(u8::is_ascii_whitespace) {
                // Go's decoder on an empty body.
                (Dialect::Gorilla, "EOF".to_owned())
            } else {
                (Dialect::Gorilla, e.to_string())
            };
            return Body::Single(Err(Box::new(BadCall {
                dialect,
                id: None,
                error: RpcError::new(ErrorKind::Parse, message),
            })));
        }
    };
    match value {
        Value::Array(items) => {
            if items.is_empty() {
                return Body::Single(Err(Box::new(BadCall {
                    dialect: Dialect::V2,
                    id: None,
                    error: RpcError::new(ErrorKind::InvalidRequest, "the batch is empty"),
                })));
            }
            if items.len() > MAX_BATCH {
                return Body::Single(Err(Box::new(BadCall {
                    dialect: Dialect::V2,
                    id: None,
                    error: RpcError::new(
                        ErrorKind::InvalidRequest,
                        format!(
                            "the batch holds {} calls; send at most {MAX_BATCH} per request",
                            items.len()
                        ),
                    ),
                })));
            }
            Body::Batch(items.iter().map(v2_call).collect())
        }
        Value::Object(ref obj) if obj.get("jsonrpc") == Some(&Value::String("2.0".into())) => {
            Body::Single(v2_call(&value))
        }
        Value::Object(obj) => Body::Single(gorilla_call(&obj)),
        other => Body::Single(Err(Box::new(BadCall {
            dialect: Dialect::Gorilla,
            id: None,
            error: RpcError::new(
                ErrorKind::InvalidRequest,
                format!(
                    "json: cannot unmarshal {} into Go value of type json.serverRequest",
                    go_type(&other)
                ),
            ),
        }))),
    }
}

#[derive(Serialize)]
struct GorillaReply<'a> {
    result: &'a Value,
    error: &'a Value,
    id: &'a Value,
}

#[derive(Serialize)]
struct V2Error<'a> {
    code: i64,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a Value>,
}

#[derive(Serialize)]
struct V2Reply<'a> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<V2Error<'a>>,
    id: &'a Value,
}

/// A call's reply object in `dialect` (gorilla's without its trailing newline).
pub fn reply(dialect: Dialect, id: Option<&Value>, outcome: &Result<Value, RpcError>) -> Value {
    let id = id.unwrap_or(&Value::Null);
    let encoded = match (dialect, outcome) {
        (Dialect::Gorilla, Ok(result)) => serde_json::to_value(GorillaReply {
            result,
            error: &Value::Null,
            id,
        }),
        (Dialect::Gorilla, Err(e)) => serde_json::to_value(GorillaReply {
            result: &Value::Null,
            error: &Value::String(e.message.clone()),
            id,
        }),
        (Dialect::V2, Ok(result)) => serde_json::to_value(V2Reply {
            jsonrpc: "2.0",
            result: Some(result),
            error: None,
            id,
        }),
        (Dialect::V2, Err(e)) => serde_json::to_value(V2Reply {
            jsonrpc: "2.0",
            result: None,
            error: Some(V2Error {
                code: e.kind.code(),
                message: &e.message,
                data: e.data.as_ref(),
            }),
            id,
        }),
    };
    // Serialising plain values cannot fail.
    encoded.unwrap_or(Value::Null)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;
    use telemesh_core::action::Method;

    use super::*;

    fn single(body: &str) -> Result<Call, Box<BadCall>> {
        match parse(body.as_bytes()) {
            Body::Single(c) => c,
            Body::Batch(_) => panic!("a batch"),
        }
    }

    #[test]
    fn dialect_follows_the_jsonrpc_member() {
        let c = single(r#"{"method":"action.Create","params":[{}],"id":"1"}"#).unwrap();
        assert_eq!((c.dialect, c.id), (Dialect::Gorilla, Some(json!("1"))));
        let c = single(r#"{"jsonrpc":"2.0","method":"action.Get","params":{},"id":7}"#).unwrap();
        assert_eq!((c.dialect, c.id), (Dialect::V2, Some(json!(7))));
        // gorilla ignores any other jsonrpc value, and matches member names case-insensitively.
        let c = single(r#"{"jsonrpc":"1.0","Method":"action.Get","ID":3}"#).unwrap();
        assert_eq!(
            (c.dialect, c.method.as_str(), c.id),
            (Dialect::Gorilla, "action.Get", Some(json!(3)))
        );
        // gorilla: "id":null is a notification; 2.0: an id.
        assert_eq!(single(r#"{"method":"a.b","id":null}"#).unwrap().id, None);
        assert_eq!(
            single(r#"{"jsonrpc":"2.0","method":"a.b","id":null}"#)
                .unwrap()
                .id,
            Some(Value::Null)
        );
        assert_eq!(
            single(r#"{"jsonrpc":"2.0","method":"a.b"}"#).unwrap().id,
            None
        );
    }

    #[test]
    fn unreadable_bodies_get_the_dialects_errors() {
        let e = single("{nope").unwrap_err();
        assert_eq!(
            (e.dialect, e.error.kind),
            (Dialect::Gorilla, ErrorKind::Parse)
        );
        assert_eq!(single("").unwrap_err().error.message, "EOF");
        let e = single(r#"{"jsonrpc":"2.0", nope"#).unwrap_err();
        assert_eq!((e.dialect, e.error.kind), (Dialect::V2, ErrorKind::Parse));
        let e = single(r#"{"jsonrpc":"2.0","method":1,"id":1}"#).unwrap_err();
        assert_eq!(
            (e.error.kind, e.id),
            (ErrorKind::InvalidRequest, Some(json!(1)))
        );
        let e = single(r#"{"jsonrpc":"2.0","method":"a.b","id":{}}"#).unwrap_err();
        assert_eq!((e.error.kind, e.id), (ErrorKind::InvalidRequest, None));
        let e = single(r#"{"method":5,"id":"1"}"#).unwrap_err();
        assert_eq!(
            e.error.message,
            "json: cannot unmarshal number into Go struct field serverRequest.method of type string"
        );
    }

    #[test]
    fn batches_are_two_point_zero_and_bounded() {
        let Body::Batch(calls) =
            parse(br#"[{"jsonrpc":"2.0","method":"action.Get","id":1}, 5, {"method":"x.y"}]"#)
        else {
            panic!("not a batch")
        };
        assert!(calls[0].is_ok());
        assert_eq!(
            calls[1].as_ref().unwrap_err().error.kind,
            ErrorKind::InvalidRequest
        );
        assert!(calls[2].is_err(), "batch elements must say jsonrpc 2.0");
        let Body::Single(Err(e)) = parse(b"[]") else {
            panic!("an empty batch is one error")
        };
        assert_eq!(
            (e.dialect, e.error.kind),
            (Dialect::V2, ErrorKind::InvalidRequest)
        );
        let big = format!("[{}]", vec!["1"; MAX_BATCH + 1].join(","));
        assert!(matches!(parse(big.as_bytes()), Body::Single(Err(_))));
    }

    #[test]
    fn methods_resolve_with_gorillas_messages() {
        assert_eq!(
            resolve("action.Create").unwrap(),
            Target::Action(Method::Create)
        );
        assert_eq!(resolve("action.Wait").unwrap(), Target::Wait);
        assert_eq!(
            resolve("x").unwrap_err().message,
            r#"rpc: service/method request ill-formed: "x""#
        );
        assert_eq!(
            resolve("wam.Create").unwrap_err().message,
            r#"rpc: can't find service "wam.Create""#
        );
        assert_eq!(
            resolve("action.create").unwrap_err().message,
            r#"rpc: can't find method "action.create""#
        );
        assert_eq!(go_quote("a\"b\n"), r#""a\"b\n""#);
    }

    #[test]
    fn args_unwrap_wams_array_and_accept_objects() {
        let call = |dialect, params: Option<Value>| Call {
            dialect,
            id: None,
            method: "action.Delete".into(),
            params,
        };
        let p = json!({"pod": {"name": "a"}});
        for d in [Dialect::Gorilla, Dialect::V2] {
            assert_eq!(args(&call(d, Some(json!([p.clone()])))).unwrap(), p);
            assert_eq!(args(&call(d, Some(p.clone()))).unwrap(), p);
            assert_eq!(args(&call(d, Some(json!([])))).unwrap(), json!({}));
        }
        assert_eq!(
            args(&call(Dialect::Gorilla, None)).unwrap_err().message,
            "rpc: method request ill-formed: missing params field"
        );
        assert_eq!(args(&call(Dialect::V2, None)).unwrap(), json!({}));
        assert_eq!(
            args(&call(Dialect::Gorilla, Some(json!("x"))))
                .unwrap_err()
                .message,
            "json: cannot unmarshal string into Go value of type [1]interface {}"
        );
        // Go ignores extra elements; 2.0 callers hear about them.
        assert_eq!(
            args(&call(Dialect::Gorilla, Some(json!([p.clone(), 1])))).unwrap(),
            p
        );
        assert_eq!(
            args(&call(Dialect::V2, Some(json!([p, 1]))))
                .unwrap_err()
                .kind,
            ErrorKind::ParamsShape
        );
    }

    #[test]
    fn replies_have_each_dialects_shape() {
        let ok = Ok(json!({"message": "ok"}));
        let id = json!("1");
        assert_eq!(
            serde_json::to_string(&reply(Dialect::Gorilla, Some(&id), &ok)).unwrap(),
            r#"{"result":{"message":"ok"},"error":null,"id":"1"}"#
        );
        let err = Err(RpcError::new(
            ErrorKind::InvalidParams,
            "pod's name must be specified",
        ));
        assert_eq!(
            serde_json::to_string(&reply(Dialect::Gorilla, Some(&id), &err)).unwrap(),
            r#"{"result":null,"error":"pod's name must be specified","id":"1"}"#
        );
        assert_eq!(
            serde_json::to_string(&reply(Dialect::V2, Some(&id), &ok)).unwrap(),
            r#"{"jsonrpc":"2.0","result":{"message":"ok"},"id":"1"}"#
        );
        assert_eq!(
            serde_json::to_string(&reply(Dialect::V2, None, &err)).unwrap(),
            r#"{"jsonrpc":"2.0","error":{"code":-32602,"message":"pod's name must be specified"},"id":null}"#
        );
    }

    #[test]
    fn field_lookup_is_case_insensitive_like_go() {
        let obj = json!({"IdempotencyKey": "k", "callbackurl": "u"});
        let obj = obj.as_object().unwrap();
        assert_eq!(field(obj, "idempotencyKey"), Some(&json!("k")));
        assert_eq!(field(obj, "callbackURL"), Some(&json!("u")));
        assert_eq!(field(obj, "other"), None);
    }
}
