//! sim's connection loop, plain or TLS: every request passes the fault switch
//! ([`Faults::admit`]) before the router; a refused request closes its connection unanswered,
//! and every open connection closes when the switch cuts them (an outage begins).

use std::convert::Infallible;
use std::net::SocketAddr;

use axum::Router;
use axum::response::Response;
use http::{HeaderValue, Request, header};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use super::admission::Admission;
use super::switch::Faults;

/// The error a refused request's service returns: hyper then closes the connection without
/// writing a response.
#[derive(Debug, thiserror::Error)]
#[error("refused: the API server plays an outage")]
struct Refused;

/// Serves `router` on `listener` (over TLS with `tls`) until `stop`, through `faults`.
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    router: Router,
    faults: Faults,
    stop: CancellationToken,
) {
    loop {
        let (tcp, peer) = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    continue;
                }
            },
        };
        // TCP_NODELAY, as kube-apiserver (Go's net package sets it on every connection): with
        // Nagle on, a watch event written right after another waits for the client's delayed
        // ACK, ~40 ms on Linux.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        tokio::spawn(connection(
            tcp,
            peer,
            tls.clone(),
            router.clone(),
            faults.clone(),
            stop.clone(),
        ));
    }
}

async fn connection(
    tcp: TcpStream,
    peer: SocketAddr,
    tls: Option<TlsAcceptor>,
    router: Router,
    faults: Faults,
    stop: CancellationToken,
) {
    // Subscribed before the first request: a cut from now on closes this connection.
    let mut cuts = faults.cuts();
    cuts.borrow_and_update();
    let refused = CancellationToken::new();
    let service = {
        let refused = refused.clone();
        hyper::service::service_fn(move |req: Request<Incoming>| {
            let admission = faults.admit(req.uri().path(), req.headers());
            let (router, refused) = (router.clone(), refused.clone());
            async move {
                match admission {
                    Admission::Serve => {
                        let resp: Result<Response, Infallible> = router.oneshot(req).await;
                        Ok(resp.unwrap_or_else(|never| match never {}))
                    }
                    Admission::Refuse => {
                        refused.cancel();
                        Err(Refused)
                    }
                    Admission::Throttle {
                        status,
                        retry_after_seconds,
                    } => Ok(throttled(status, retry_after_seconds)),
                }
            }
        })
    };
    let ended = async {
        tokio::select! {
            () = stop.cancelled() => {}
            () = refused.cancelled() => {}
            _ = cuts.changed() => {}
        }
    };
    match tls {
        None => drive(TokioIo::new(tcp), service, ended, peer).await,
        Some(acceptor) => match acceptor.accept(tcp).await {
            Ok(stream) => drive(TokioIo::new(stream), service, ended, peer).await,
            Err(e) => tracing::debug!(peer.addr = %peer, error = %e, "TLS handshake failed"),
        },
    }
}

/// Serves one connection until it ends or `ended` resolves (then drops it: closed unanswered).
async fn drive<I, S>(io: I, service: S, ended: impl Future<Output = ()>, peer: SocketAddr)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: hyper::service::Service<Request<Incoming>, Response = Response, Error = Refused>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let builder = Builder::new(TokioExecutor::new());
    let conn = builder.serve_connection_with_upgrades(io, service);
    tokio::select! {
        () = ended => {}
        r = conn => if let Err(e) = r {
            tracing::debug!(peer.addr = %peer, error = %e, "connection ended with an error");
        },
    }
}

/// The answer of a throttled request, in kube-apiserver's words.
fn throttled(status: http::StatusCode, retry_after_seconds: Option<u64>) -> Response {
    let (reason, message) = match status.as_u16() {
        429 => (
            "TooManyRequests",
            "Too many requests, please try again later.",
        ),
        500 => (
            "InternalError",
            "Internal error occurred: the server is overloaded",
        ),
        503 => (
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
        ),
        504 => (
            "Timeout",
            "the server was unable to return a response in the time allotted",
        ),
        _ => ("", "the server cannot handle the request now"),
    };
    let mut details = serde_json::json!({});
    if let Some(s) = retry_after_seconds {
        details["retryAfterSeconds"] = s.into();
    }
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "details": details, "code": status.as_u16(),
    });
    let mut resp = crate::apiserver::requests::kit::json_response(status, body.to_string());
    if let Some(s) = retry_after_seconds {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(s));
    }
    resp
}
