//! A caller of the coordinators' workload actions API: WAM's JSON-RPC calls to `POST /rpc` as
//! the seed's curl sends them (gorilla JSON-RPC 1.0: params a one-element array, no
//! `"jsonrpc"`), and a loopback endpoint that receives action callbacks.

use std::net::SocketAddr;

use serde_json::{Value, json};

/// Sends `method` (`action.Create`, ...) with `params` to `http://<api>/rpc`, with a bearer
/// `token` when given (`--api-auth kubernetes`); returns the parsed reply.
pub async fn call(api: SocketAddr, token: Option<&str>, method: &str, params: Value) -> Value {
    let body = json!({"method": method, "params": [params], "id": "1"});
    let authorization = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = authorization
        .iter()
        .map(|a| ("authorization", a.as_str()))
        .collect();
    let body = serde_json::to_vec(&body).expect("a JSON body");
    // A polite client: `/rpc` limits each address (20/s, burst 50) and every test calls from
    // 127.0.0.1, so a test polling an action may be told 429; it waits the second the answer's
    // Retry-After asks for and calls again, as WAM's clients should.
    let reply = loop {
        match telemesh_sim::cluster::http::request_with(
            http::Method::POST,
            &format!("http://{api}/rpc"),
            &headers,
            Some(body.clone()),
        )
        .await
        {
            Err(e) if format!("{e:#}").contains("429 Too Many Requests") => {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
            reply => break reply.unwrap_or_else(|e| panic!("{method}: {e:#}")),
        }
    };
    serde_json::from_slice(&reply)
        .unwrap_or_else(|e| panic!("{method}: the reply is not JSON ({e}): {reply:?}"))
}

/// A callback URL on loopback and the bodies POSTed to it, in arrival order.
pub async fn callee() -> (String, tokio::sync::mpsc::UnboundedReceiver<Value>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let app = axum::Router::new().route(
        "/done",
        axum::routing::post(move |body: axum::Json<Value>| async move {
            let _ = tx.send(body.0);
            http::StatusCode::NO_CONTENT
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binding a loopback port");
    let addr = listener.local_addr().expect("the bound address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/done"), rx)
}
