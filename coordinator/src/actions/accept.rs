//! Accepting an action: the validated request becomes a `WorkloadAction` in its target's
//! namespace and the object's name is the action id, returned at once. One create call per
//! action (plus the reads of [`super::fit::check_bind`] for Bind), so the store, not this
//! replica, bounds how many actions per second are accepted.
//!
//! Idempotency: a caller that sends an idempotency key (the params' `idempotencyKey` member, or
//! the `Idempotency-Key` HTTP header for a single call) gets an object name derived from its
//! namespace, user name and key ([`telemesh_core::action::idempotent_name`]); the API server
//! refuses a second object of that name, so a retry, or the same request arriving at two
//! replicas at once, finds the first action instead of making another. The same key with a different method or params is refused.
//!
//! Also here: reading an action back (`action.Get`) and waiting for it to end (`action.Wait`),
//! in the shape both return and callbacks POST ([`action_json`]).

use std::time::Duration;

use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use telemesh_core::action::{ActionRequest, Requester, WorkloadAction, WorkloadActionSpec};
use tokio_util::sync::CancellationToken;

use super::rpc::wire::{ErrorKind, RpcError, field};

/// `action.Wait`'s timeout when the caller gives none.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);
/// The longest `action.Wait` holds a request.
pub const MAX_WAIT: Duration = Duration::from_secs(300);
/// The longest idempotency key accepted.
pub const MAX_KEY_LEN: usize = 256;

/// The members of an action's params that are about delivery, not the action.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extras {
    /// Where to POST the outcome.
    pub callback_url: Option<String>,
    /// The caller's idempotency key.
    pub idempotency_key: Option<String>,
}

fn optional_string(
    obj: &serde_json::Map<String, Value>,
    key: &str,
) -> Result<Option<String>, RpcError> {
    match field(obj, key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(RpcError::new(
            ErrorKind::InvalidParams,
            format!("{key} must be a string, not {other}"),
        )),
    }
}

/// Reads `callbackURL` and `idempotencyKey` from the params (Go-style case-insensitive names;
/// WAM ignores unknown members, so WAM callers are unaffected) and the `Idempotency-Key` header
/// value `header_key`; the two keys, when both given, must agree.
pub fn extras(args: &Value, header_key: Option<&str>) -> Result<Extras, RpcError> {
    let empty = serde_json::Map::new();
    let obj = args.as_object().unwrap_or(&empty);
    let callback_url = optional_string(obj, "callbackURL")?;
    if let Some(url) = &callback_url {
        let ok = url.parse::<http::Uri>().ok().is_some_and(|u| {
            matches!(u.scheme_str(), Some("http" | "https")) && u.authority().is_some()
        });
        if !ok {
            return Err(RpcError::new(
                ErrorKind::InvalidParams,
                format!("callbackURL {url:?} is not an http:// or https:// URL"),
            ));
        }
    }
    let in_params = optional_string(obj, "idempotencyKey")?;
    let header_key = header_key.filter(|k| !k.is_empty()).map(str::to_owned);
    let idempotency_key = match (in_params, header_key) {
        (Some(p), Some(h)) if p != h => {
            return Err(RpcError::new(
                ErrorKind::InvalidParams,
                format!(
                    "idempotencyKey {p:?} in params and Idempotency-Key header {h:?} differ; send one"
                ),
            ));
        }
        (p, h) => p.or(h),
    };
    if let Some(k) = &idempotency_key
        && k.len() > MAX_KEY_LEN
    {
        return Err(RpcError::new(
            ErrorKind::InvalidParams,
            format!("idempotencyKey is {} bytes; at most {MAX_KEY_LEN}", k.len()),
        ));
    }
    Ok(Extras {
        callback_url,
        idempotency_key,
    })
}

/// RFC 3339 in UTC with microseconds, fixed width, so stored times sort as strings.
pub fn rfc3339_micros(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// A random action id, the same length as idempotent ones.
pub fn random_name() -> String {
    let bytes: [u8; 10] = rand::random();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("wa-{hex}")
}

/// The object for an accepted request: `args` are the params as received.
pub fn new_action(
    name: String,
    request: &ActionRequest,
    args: &Value,
    extras: &Extras,
    requester: &Requester,
    received_at: jiff::Timestamp,
) -> WorkloadAction {
    let mut action = WorkloadAction::new(
        &name,
        WorkloadActionSpec {
            method: request.method().as_str().to_owned(),
            params: args.clone(),
            target: request.target(),
            node: request.node().map(str::to_owned),
            callback_url: extras.callback_url.clone(),
            idempotency_key: extras.idempotency_key.clone(),
            requester: requester.clone(),
            received_at: rfc3339_micros(received_at),
        },
    );
    action.metadata.namespace = Some(request.namespace().to_owned());
    action
}

/// What accepting gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    /// The action id (object name).
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Whether an earlier request with the same idempotency key made it.
    pub existing: bool,
}

impl Accepted {
    /// The RPC result.
    pub fn result(&self) -> Value {
        json!({"message": "ok", "actionId": self.name, "namespace": self.namespace})
    }
}

fn api_error(e: &kube::Error, what: &str) -> RpcError {
    match e {
        kube::Error::Api(s) if s.code == 404 => {
            RpcError::new(ErrorKind::NotFound, format!("{what}: {}", s.message))
        }
        kube::Error::Api(s) if s.code == 403 => RpcError::new(
            ErrorKind::Internal,
            format!(
                "{what}: the coordinator's own RBAC refused: {}; check its ClusterRole",
                s.message
            ),
        ),
        other => RpcError::new(ErrorKind::Internal, format!("{what}: {other}; retry")),
    }
}

/// Stores `action`; on a name clash (the same idempotency key again) returns the existing
/// action when it asks for the same thing, else a conflict.
pub async fn store(client: &kube::Client, action: &WorkloadAction) -> Result<Accepted, RpcError> {
    let namespace = action.metadata.namespace.clone().unwrap_or_default();
    let name = action.metadata.name.clone().unwrap_or_default();
    let api: Api<WorkloadAction> = Api::namespaced(client.clone(), &namespace);
    match api.create(&PostParams::default(), action).await {
        Ok(_) => Ok(Accepted {
            name,
            namespace,
            existing: false,
        }),
        Err(kube::Error::Api(s)) if s.code == 409 && action.spec.idempotency_key.is_some() => {
            let existing = api
                .get(&name)
                .await
                .map_err(|e| api_error(&e, "reading the action of this idempotency key"))?;
            if existing.spec.method == action.spec.method
                && existing.spec.params == action.spec.params
            {
                Ok(Accepted {
                    name,
                    namespace,
                    existing: true,
                })
            } else {
                Err(RpcError::new(
                    ErrorKind::Conflict,
                    format!(
                        "idempotency key {:?} was already used for another request (action {name}, {} {}); use a new key for a new request",
                        action.spec.idempotency_key.as_deref().unwrap_or_default(),
                        existing.spec.method,
                        existing.spec.target
                    ),
                )
                .with_data(json!({"actionId": name, "namespace": namespace})))
            }
        }
        Err(e) => Err(api_error(
            &e,
            &format!("storing the action in namespace {namespace:?}"),
        )),
    }
}

/// An action as `action.Get` returns it and callbacks carry it: `message` is always `ok` (the
/// action's own message is `status.message`).
pub fn action_json(action: &WorkloadAction) -> Value {
    let status = action.status.clone().unwrap_or_default();
    json!({
        "message": "ok",
        "actionId": action.metadata.name,
        "namespace": action.metadata.namespace,
        "method": action.spec.method,
        "target": action.spec.target,
        "node": action.spec.node,
        "params": action.spec.params,
        "requester": action.spec.requester.username,
        "receivedAt": action.spec.received_at,
        "phase": status.phase.as_str(),
        "status": status,
    })
}

/// `action.Get`'s and `action.Wait`'s params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    /// The action id.
    pub name: String,
    /// Its namespace (`default` when not given).
    pub namespace: String,
    /// Wait only: how long.
    pub timeout: Duration,
}

/// Reads `{actionId, namespace?, timeoutSeconds?}`.
pub fn lookup(args: &Value) -> Result<Lookup, RpcError> {
    let invalid = |m: String| RpcError::new(ErrorKind::InvalidParams, m);
    let empty = serde_json::Map::new();
    let obj = args.as_object().unwrap_or(&empty);
    let name =
        optional_string(obj, "actionId")?.ok_or_else(|| invalid("actionId is required".into()))?;
    let namespace = optional_string(obj, "namespace")?.unwrap_or_else(|| "default".into());
    let timeout = match field(obj, "timeoutSeconds") {
        None | Some(Value::Null) => DEFAULT_WAIT,
        Some(v) => {
            let secs = v
                .as_f64()
                .filter(|s| (0.0..=MAX_WAIT.as_secs_f64()).contains(s));
            Duration::from_secs_f64(secs.ok_or_else(|| {
                invalid(format!(
                    "timeoutSeconds must be a number from 0 to {}, not {v}",
                    MAX_WAIT.as_secs()
                ))
            })?)
        }
    };
    Ok(Lookup {
        name,
        namespace,
        timeout,
    })
}

/// Reads an action.
pub async fn get(client: &kube::Client, l: &Lookup) -> Result<WorkloadAction, RpcError> {
    Api::<WorkloadAction>::namespaced(client.clone(), &l.namespace)
        .get(&l.name)
        .await
        .map_err(|e| match e {
            kube::Error::Api(s) if s.code == 404 => RpcError::new(
                ErrorKind::NotFound,
                format!(
                    "action {:?} not found in namespace {:?}",
                    l.name, l.namespace
                ),
            ),
            other => api_error(&other, "reading the action"),
        })
}

/// Waits until the action's phase is terminal, `l.timeout` passes or `stop` is cancelled;
/// returns the action as last seen and whether it ended.
pub async fn wait(
    client: &kube::Client,
    l: &Lookup,
    stop: &CancellationToken,
) -> Result<(WorkloadAction, bool), RpcError> {
    let first = get(client, l).await?;
    if first.phase().is_terminal() || l.timeout.is_zero() {
        let done = first.phase().is_terminal();
        return Ok((first, done));
    }
    let api = Api::<WorkloadAction>::namespaced(client.clone(), &l.namespace);
    // A deleted action also ends the wait (then the final read says not found).
    let ended = kube::runtime::wait::await_condition(api, &l.name, |a: Option<&WorkloadAction>| {
        a.is_none_or(|a| a.phase().is_terminal())
    });
    tokio::select! {
        seen = tokio::time::timeout(l.timeout, ended) => match seen {
            Ok(Ok(Some(action))) => Ok((action, true)),
            Ok(Ok(None)) => get(client, l).await.map(|a| (a, false)),
            Ok(Err(e)) => Err(RpcError::new(ErrorKind::Internal, format!("watching the action: {e}; retry"))),
            Err(_elapsed) => get(client, l).await.map(|a| {
                let done = a.phase().is_terminal();
                (a, done)
            }),
        },
        () = stop.cancelled() => get(client, l).await.map(|a| {
            let done = a.phase().is_terminal();
            (a, done)
        }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use telemesh_core::action::{Method, idempotent_name};

    use super::*;

    #[test]
    fn extras_come_from_params_or_the_header_and_must_agree() {
        let args = json!({"pod": {"name": "a"}, "IdempotencyKey": "k1", "callbackURL": "https://hooks.example/x"});
        let e = extras(&args, None).unwrap();
        assert_eq!(e.idempotency_key.as_deref(), Some("k1"));
        assert_eq!(e.callback_url.as_deref(), Some("https://hooks.example/x"));
        assert_eq!(extras(&args, Some("k1")).unwrap(), e);
        assert_eq!(
            extras(&args, Some("k2")).unwrap_err().kind,
            ErrorKind::InvalidParams
        );
        let e = extras(&json!({}), Some("h")).unwrap();
        assert_eq!(e.idempotency_key.as_deref(), Some("h"));
        for bad in [
            json!({"callbackURL": "ftp://x/y"}),
            json!({"callbackURL": "/relative"}),
            json!({"idempotencyKey": 5}),
        ] {
            assert!(extras(&bad, None).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_stored_spec_is_the_request_as_received() {
        let args = json!({"pod": {"namespace": "ul", "name": "a-1"}, "node": {"name": "n7"}, "idempotencyKey": "k"});
        let request = ActionRequest::parse(Method::Move, &args).unwrap();
        let requester = Requester {
            username: "alice".into(),
            ..Requester::default()
        };
        let extras = extras(&args, None).unwrap();
        let at: jiff::Timestamp = "2026-11-24T20:01:02.5Z".parse().unwrap();
        let name = idempotent_name("ul", "alice", "k");
        let a = new_action(name.clone(), &request, &args, &extras, &requester, at);
        assert_eq!(a.metadata.namespace.as_deref(), Some("ul"));
        assert_eq!(a.metadata.name.as_deref(), Some(name.as_str()));
        assert_eq!(a.spec.method, "Move");
        assert_eq!(a.spec.params, args);
        assert_eq!(a.spec.target, "Pod/a-1");
        assert_eq!(a.spec.node.as_deref(), Some("n7"));
        assert_eq!(a.spec.idempotency_key.as_deref(), Some("k"));
        assert_eq!(a.spec.received_at, "2026-11-24T20:01:02.500000Z");
        let shown = action_json(&a);
        assert_eq!(shown["message"], "ok");
        assert_eq!(shown["actionId"], name.as_str());
        assert_eq!(shown["phase"], "Pending");
        assert_eq!(shown["requester"], "alice");
        assert_eq!(random_name().len(), name.len());
    }

    #[test]
    fn lookups_default_and_bound_the_timeout() {
        let l = lookup(&json!({"actionId": "wa-1"})).unwrap();
        assert_eq!((l.namespace.as_str(), l.timeout), ("default", DEFAULT_WAIT));
        let l =
            lookup(&json!({"actionId": "wa-1", "namespace": "ul", "timeoutSeconds": 0.5})).unwrap();
        assert_eq!(l.timeout, Duration::from_millis(500));
        assert!(lookup(&json!({"actionId": "wa-1", "timeoutSeconds": 301})).is_err());
        assert_eq!(
            lookup(&json!({})).unwrap_err().message,
            "actionId is required"
        );
    }
}
