//! Watch streams: newline-delimited watch events over a chunked response, resumable from a
//! resourceVersion, with bookmarks, `sendInitialEvents` (streaming lists), `timeoutSeconds`,
//! and a 410 `Expired` ERROR event when the version is older than the retained history.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderValue, StatusCode, header};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::apiserver::encodings::table;
use crate::apiserver::requests::error::{ApiError, ApiResult};
use crate::apiserver::requests::kit::{
    self, OutputFormat, RequestCtx, object_value, resource_info,
};
use crate::apiserver::server::Server;
use crate::storage::registry::ResourceDef;
use crate::storage::store::{Delivery, EventType, WatchError, WatchStart};

fn event_line(ty: &str, object: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(object.len() + 32);
    b.put_slice(b"{\"type\":\"");
    b.put_slice(ty.as_bytes());
    b.put_slice(b"\",\"object\":");
    b.put_slice(object);
    b.put_slice(b"}\n");
    b.freeze()
}

fn render(def: &ResourceDef, d: &Delivery, format: OutputFormat) -> Bytes {
    let needs_value =
        d.rv_override.is_some() || format != OutputFormat::Object || !def.serves_storage_form();
    if !needs_value {
        return event_line(d.ty.as_str(), &d.obj.json);
    }
    let mut v = object_value(def, &d.obj);
    if let Some(rv) = d.rv_override {
        v["metadata"]["resourceVersion"] = json!(rv.to_string());
    }
    let obj = match format {
        OutputFormat::Object => v,
        OutputFormat::Metadata => {
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": v["metadata"]})
        }
        OutputFormat::Table(include) => {
            table::render_table(&resource_info(def), &[&v], include, jiff::Timestamp::now())
        }
    };
    event_line(d.ty.as_str(), obj.to_string().as_bytes())
}

fn bookmark(def: &ResourceDef, rv: u64, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let obj = json!({"kind": def.kind, "apiVersion": def.api_version(), "metadata": meta});
    event_line("BOOKMARK", obj.to_string().as_bytes())
}

fn streaming(rx: mpsc::Receiver<Bytes>) -> Response {
    let stream =
        futures::StreamExt::map(ReceiverStream::new(rx), Ok::<_, std::convert::Infallible>);
    let mut resp = Response::new(Body::from_stream(stream));
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// Starts a watch and returns its streaming response.
pub fn serve(
    server: &Arc<Server>,
    def: &Arc<ResourceDef>,
    ns: Option<&str>,
    ctx: &RequestCtx,
    format: OutputFormat,
) -> ApiResult<Response> {
    let q = &ctx.query;
    let filter = kit::build_filter(def, ns, q)?;
    let bookmarks = matches!(
        q.get("allowWatchBookmarks").map(String::as_str),
        Some("true" | "1")
    );
    let send_initial = match q.get("sendInitialEvents").map(String::as_str) {
        Some("true" | "1") => Some(true),
        Some("false" | "0") => Some(false),
        _ => None,
    };
    let rv = match q.get("resourceVersion").map(String::as_str) {
        None | Some("") | Some("0") => None,
        Some(s) => Some(s.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!("resourceVersion: Invalid value: {s:?}"))
        })?),
    };
    if send_initial == Some(true) {
        if !bookmarks {
            return Err(ApiError::invalid(
                "",
                "ListOptions",
                "",
                vec![(
                    "allowWatchBookmarks".into(),
                    "FieldValueForbidden",
                    "Forbidden: allowWatchBookmarks must be true when sendInitialEvents is true"
                        .into(),
                )],
            ));
        }
        if q.get("resourceVersionMatch").map(String::as_str) != Some("NotOlderThan") {
            return Err(ApiError::invalid("", "ListOptions", "", vec![(
                "resourceVersionMatch".into(),
                "FieldValueForbidden",
                "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan".into(),
            )]));
        }
    }
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(1800));
    // sendInitialEvents=true serves the current state (which is never older than any rv);
    // otherwise a given rv resumes from history and no rv starts from the current state.
    let start = match (send_initial, rv) {
        (Some(true), _) | (_, None) => WatchStart::Now,
        (_, Some(rv)) => WatchStart::After(rv),
    };
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let watch = match server.store.watch(&def.id(), filter, start) {
        Ok(w) => w,
        Err(WatchError::Expired { requested, oldest }) => {
            let status =
                ApiError::expired(format!("too old resource version: {requested} ({oldest})"))
                    .status();
            let line = event_line("ERROR", status.to_string().as_bytes());
            let _ = tx.try_send(line);
            return Ok(streaming(rx));
        }
    };
    let def = def.clone();
    let interval = server.config.bookmark_interval;
    let store = server.store.clone();
    let suppress_initial = send_initial == Some(false) && start == WatchStart::Now;
    tokio::spawn(async move {
        let mut watch = watch;
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut last_rv = watch.start_rv;
        if !suppress_initial {
            for d in std::mem::take(&mut watch.initial) {
                last_rv = last_rv.max(d.rv());
                if tx.send(render(&def, &d, format)).await.is_err() {
                    return;
                }
            }
        }
        if send_initial == Some(true)
            && tx.send(bookmark(&def, watch.start_rv, true)).await.is_err()
        {
            return;
        }
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        loop {
            tokio::select! {
                _ = &mut deadline => break,
                _ = tx.closed() => break,
                d = watch.rx.recv() => match d {
                    Some(d) => {
                        last_rv = last_rv.max(d.rv());
                        if tx.send(render(&def, &d, format)).await.is_err() {
                            break;
                        }
                    }
                    // Dropped for falling behind: end the stream, the client re-watches.
                    None => break,
                },
                _ = ticker.tick(), if bookmarks => {
                    // Every change up to the current rv was queued before we read it; drain
                    // the queue first so the bookmark promises nothing unsent.
                    let now_rv = store.current_rv();
                    while let Ok(d) = watch.rx.try_recv() {
                        last_rv = last_rv.max(d.rv());
                        if tx.send(render(&def, &d, format)).await.is_err() {
                            return;
                        }
                    }
                    if tx.send(bookmark(&def, now_rv.max(last_rv), false)).await.is_err() {
                        break;
                    }
                }
            }
        }
        drop(watch);
    });
    Ok(streaming(rx))
}

/// Returns the wire name of an event type (for tests and tools).
pub fn type_name(t: EventType) -> &'static str {
    t.as_str()
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn event_lines_wrap_the_object_verbatim() {
        let line = event_line("ADDED", br#"{"a":1}"#);
        let v: Value = serde_json::from_slice(&line).unwrap_or_default();
        assert_eq!(v, json!({"type": "ADDED", "object": {"a": 1}}));
        assert!(line.ends_with(b"\n"));
    }
}
