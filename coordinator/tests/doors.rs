//! The limits at each of a real coordinator's HTTP doors (in-process, against sim): the
//! extender's body limit and body deadline, the JSON API's and `/rpc`'s body limits and rate
//! limits (429 with Retry-After), the health port's header deadline; each refusal counted in
//! `/metrics`, and a well-behaved call served meanwhile.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::Duration;

use telemesh_runtime::testing::eventually;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

#[path = "support/actions_env.rs"]
mod actions_env;

/// Reads until the server closes; what it sent, empty if nothing.
async fn read_all(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    match tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut out)).await {
        Ok(_) => String::from_utf8_lossy(&out).into_owned(),
        Err(_) => panic!("the server kept the connection open for 60 s"),
    }
}

/// One request with `body` (and `declared` as its Content-Length when given, else the body's
/// length); returns the whole response.
async fn request(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // The server may answer 413 and close before reading it all.
    let _ = stream.write_all(body).await;
    read_all(&mut stream).await
}

fn status(response: &str) -> &str {
    response.split(' ').nth(1).unwrap_or("(no answer)")
}

async fn metrics(addr: SocketAddr) -> String {
    request(addr, "GET", "/metrics", b"").await
}

fn refused(metrics: &str, door: &str, reason: &str) -> u64 {
    let series =
        format!("telemesh_coordinator_http_refused_total{{door=\"{door}\",reason=\"{reason}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series.as_str()))
        .map_or(0, |v| v.trim().parse().unwrap())
}

const NAMES_BODY: &[u8] =
    br#"{"Pod":{"metadata":{"name":"p","namespace":"ul"}},"NodeNames":["n1","n2"]}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_door_refuses_what_is_over_its_limits_and_counts_it() {
    let env = actions_env::start_leading(
        "ul",
        &[
            "--extender-max-body-mib=1",
            "--http-header-timeout=2s",
            "--http-body-timeout=2s",
            "--api-rate-limit=1",
            "--api-rate-burst=2",
            "--rpc-rate-limit=1",
            "--rpc-rate-burst=2",
        ],
    )
    .await;
    let c = &env.coordinator;

    // The extender: the body limit, then a body that stalls; a normal call served meanwhile.
    let big = vec![b' '; (1 << 20) + 1];
    let answer = request(c.extender_addr, "POST", "/scheduler/filter", &big).await;
    assert_eq!(status(&answer), "413", "{answer}");
    let mut slow = TcpStream::connect(c.extender_addr).await.unwrap();
    slow.write_all(
        b"POST /scheduler/filter HTTP/1.1\r\nhost: test\r\ncontent-length: 1000\r\n\r\n{\"Pod\":",
    )
    .await
    .unwrap();
    let answer = request(c.extender_addr, "POST", "/scheduler/filter", NAMES_BODY).await;
    assert_eq!(status(&answer), "200", "{answer}");
    let answer = read_all(&mut slow).await;
    assert_eq!(status(&answer), "408", "{answer}");

    // The JSON API: no body is needed, so a large one is refused.
    let answer = request(c.api_addr, "GET", "/api/v1/nodes", &[b' '; 17 << 10]).await;
    assert_eq!(status(&answer), "413", "{answer}");
    // /rpc: 1 MiB at most.
    let answer = request(c.api_addr, "POST", "/rpc", &vec![b' '; (1 << 20) + 1]).await;
    assert_eq!(status(&answer), "413", "{answer}");

    // Rates: two at once, then one a second. Ten calls in a row cannot all be allowed unless
    // they took eight seconds.
    for (path, method, body) in [
        ("/api/v1/nodes", "GET", &b""[..]),
        (
            "/rpc",
            "POST",
            &br#"{"method":"action.Get","params":[{"actionId":"x","namespace":"ul"}],"id":"1"}"#[..],
        ),
    ] {
        let mut answers = Vec::new();
        for _ in 0..10 {
            answers.push(request(c.api_addr, method, path, body).await);
        }
        let limited: Vec<&String> = answers.iter().filter(|a| status(a) == "429").collect();
        assert!(!limited.is_empty(), "{path}: {answers:?}");
        // The 413 above took one of the burst's two.
        assert_ne!(status(&answers[0]), "429", "{path}: the burst is allowed");
        let retry = limited[0]
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("retry-after: ")
                    .map(str::to_owned)
            })
            .unwrap();
        assert_eq!(retry.trim(), "1", "{}", limited[0]);
    }

    // The health port: headers that never end are cut off; /metrics still answers.
    let mut slow = TcpStream::connect(c.http_addr).await.unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\nhost: te")
        .await
        .unwrap();
    assert_eq!(read_all(&mut slow).await, "", "closed without an answer");

    let text = eventually("every refusal counted", Duration::from_secs(10), || async {
        let text = metrics(c.http_addr).await;
        (refused(&text, "Http", "HeaderTimeout") >= 1).then_some(text)
    })
    .await;
    assert_eq!(refused(&text, "Extender", "BodyTooLarge"), 1, "{text}");
    assert_eq!(refused(&text, "Extender", "BodyTimeout"), 1, "{text}");
    assert_eq!(refused(&text, "Api", "BodyTooLarge"), 1, "{text}");
    assert_eq!(refused(&text, "Rpc", "BodyTooLarge"), 1, "{text}");
    assert!(refused(&text, "Api", "RateLimited") >= 1, "{text}");
    assert!(refused(&text, "Rpc", "RateLimited") >= 1, "{text}");
}
