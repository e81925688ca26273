//! Each limit against a real loopback connection: the offending client is refused or cut off
//! while a well-behaved one, at the same time, is served.

#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;

use axum::body::Bytes;
use axum::routing::post;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::*;

/// Generous for a loaded machine: a well-behaved client here sends everything at once.
const DEADLINE: Duration = Duration::from_secs(2);

struct Server {
    addr: SocketAddr,
    metrics: DoorMetrics,
    _stop: tokio_util::sync::DropGuard,
}

async fn server(limits: Limits) -> Server {
    let metrics = DoorMetrics::default();
    let door = Door::new(DoorName::Api, limits, metrics.clone());
    let router = door.guard(Router::new().route(
        "/echo",
        post(|body: Bytes| async move { body.len().to_string() }),
    ));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let connections = Connections {
        door: DoorName::Api,
        header_timeout: DEADLINE,
        metrics: metrics.clone(),
    };
    tokio::spawn(serve(
        listener,
        router,
        connections,
        stop.clone(),
        TaskTracker::new(),
    ));
    Server {
        addr,
        metrics,
        _stop: stop.drop_guard(),
    }
}

fn limits() -> Limits {
    Limits {
        max_body: 1024,
        body_timeout: DEADLINE,
        rate: None,
    }
}

/// Connects from `from` (any 127.0.0.0/8 address) to `to`.
async fn connect(from: &str, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    socket.connect(to).await.unwrap()
}

/// Reads until the server closes; returns what it sent (empty when it sent nothing).
async fn read_all(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut out));
    match read.await {
        Ok(Ok(_)) => {}
        // A reset after the server's answer still leaves what was read.
        Ok(Err(_)) => {}
        Err(_) => panic!("the server kept the connection open for 60 s"),
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A complete POST of `body` from `from`; returns the whole response.
async fn post_from(from: &str, to: SocketAddr, body: &[u8]) -> String {
    let mut stream = connect(from, to).await;
    let head = format!(
        "POST /echo HTTP/1.1\r\nhost: test\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    read_all(&mut stream).await
}

fn status(response: &str) -> &str {
    response.split(' ').nth(1).unwrap_or("(no answer)")
}

#[tokio::test]
async fn body_over_the_limit_gets_413_and_is_counted() {
    let s = server(limits()).await;
    assert_eq!(
        status(&post_from("127.0.0.1", s.addr, &[b'x'; 1024]).await),
        "200"
    );
    // Declared too large: refused before reading.
    assert_eq!(
        status(&post_from("127.0.0.1", s.addr, &[b'x'; 1025]).await),
        "413"
    );
    // Chunked, no length declared: refused once the limit is passed while reading.
    let mut stream = connect("127.0.0.1", s.addr).await;
    stream
        .write_all(b"POST /echo HTTP/1.1\r\nhost: test\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    for _ in 0..3 {
        stream.write_all(b"200\r\n").await.unwrap();
        stream.write_all(&[b'y'; 0x200]).await.unwrap();
        stream.write_all(b"\r\n").await.unwrap();
    }
    stream.write_all(b"0\r\n\r\n").await.unwrap();
    assert_eq!(status(&read_all(&mut stream).await), "413");
    assert_eq!(s.metrics.count(DoorName::Api, Reason::BodyTooLarge), 2);
}

#[tokio::test]
async fn a_client_still_sending_a_refused_body_reads_the_413() {
    // The door answers 413 from the declared length, before the body is read; the client
    // goes on writing all 8 MiB and only then reads. Without the lingering close its writes
    // meet a reset and the answer is lost.
    let s = server(limits()).await;
    for _ in 0..5 {
        let response = post_from("127.0.0.1", s.addr, &vec![b'x'; 8 << 20]).await;
        assert_eq!(status(&response), "413", "{response}");
    }
}

#[tokio::test]
async fn slow_body_gets_408_while_a_normal_client_is_served() {
    let s = server(limits()).await;
    let mut slow = connect("127.0.0.1", s.addr).await;
    slow.write_all(b"POST /echo HTTP/1.1\r\nhost: test\r\ncontent-length: 100\r\n\r\nonly ten b")
        .await
        .unwrap();
    // The slow client stalls; another is served meanwhile.
    assert_eq!(
        status(&post_from("127.0.0.1", s.addr, b"hello").await),
        "200"
    );
    let answer = read_all(&mut slow).await;
    assert_eq!(status(&answer), "408", "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    assert_eq!(s.metrics.count(DoorName::Api, Reason::BodyTimeout), 1);
}

#[tokio::test]
async fn slow_headers_are_cut_off_while_a_normal_client_is_served() {
    let s = server(limits()).await;
    let mut slow = connect("127.0.0.1", s.addr).await;
    slow.write_all(b"POST /echo HTTP/1.1\r\nhost: te")
        .await
        .unwrap();
    let mut idle = connect("127.0.0.1", s.addr).await;
    assert_eq!(
        status(&post_from("127.0.0.1", s.addr, b"hello").await),
        "200"
    );
    // Both are closed without an answer: one never finished its headers, one never began.
    assert_eq!(read_all(&mut slow).await, "");
    assert_eq!(read_all(&mut idle).await, "");
    crate::testing::eventually(
        "both header timeouts counted",
        Duration::from_secs(10),
        async || (s.metrics.count(DoorName::Api, Reason::HeaderTimeout) == 2).then_some(()),
    )
    .await;
}

#[tokio::test]
async fn a_client_over_its_rate_gets_429_with_retry_after_and_others_are_served() {
    let s = server(Limits {
        // One call a minute, two at once: the third call within the test is over the rate.
        rate: Some(Rate {
            period: Duration::from_secs(60),
            burst: NonZeroU32::new(2).unwrap(),
        }),
        ..limits()
    })
    .await;
    assert_eq!(status(&post_from("127.0.0.1", s.addr, b"1").await), "200");
    assert_eq!(status(&post_from("127.0.0.1", s.addr, b"2").await), "200");
    let refused = post_from("127.0.0.1", s.addr, b"3").await;
    assert_eq!(status(&refused), "429", "{refused}");
    let retry_after: u64 = refused
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("retry-after: ")
                .map(str::to_owned)
        })
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!((59..=60).contains(&retry_after), "{refused}");
    // Another client address has its own allowance.
    assert_eq!(status(&post_from("127.0.0.2", s.addr, b"4").await), "200");
    assert_eq!(s.metrics.count(DoorName::Api, Reason::RateLimited), 1);
}

#[test]
fn a_zero_rate_means_no_limit() {
    assert_eq!(Rate::per_second(0, 10), None);
    let five = Rate::per_second(5, 0).unwrap();
    assert_eq!(
        (five.period, five.burst.get()),
        (Duration::from_millis(200), 1)
    );
}
