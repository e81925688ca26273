//! The QUIC link end to end on 127.0.0.1: mutual TLS, requests and responses, rejection of
//! strangers, bad frames, concurrency and graceful shutdown.

#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use telemesh_core::pod::PodFigures;
use telemesh_core::wire::{self, Request, Response};
use telemesh_runtime::quic::{
    self, DevCa, Handler, HandlerFuture, QuicClient, QuicError, QuicServer, TlsFiles, tls,
};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const LOCAL: ([u8; 4], u16) = ([127, 0, 0, 1], 0);
/// Upper bound for things that should happen promptly; never a wait in itself.
const BOUND: Duration = Duration::from_secs(20);

struct Pki {
    _dir: tempfile::TempDir,
    ca: DevCa,
    agent: TlsFiles,
    coordinator: TlsFiles,
}

fn pki() -> Pki {
    let dir = tempfile::tempdir().unwrap();
    let ca = DevCa::create(dir.path(), "telemesh test CA").unwrap();
    let agent = ca.issue("node-a", &["node-a", "127.0.0.1"]).unwrap();
    let coordinator = ca.issue("coordinator", &["coordinator"]).unwrap();
    Pki {
        _dir: dir,
        ca,
        agent,
        coordinator,
    }
}

/// Blocks `pod_telemetry` until released, to hold a request in flight.
struct Gate {
    entered: Notify,
    release: Notify,
}

struct TestHandler {
    gate: Option<Arc<Gate>>,
}

fn pods() -> Vec<PodFigures> {
    (0..3)
        .map(|i| PodFigures {
            namespace: "default".into(),
            name: format!("pod-{i}"),
            uid: format!("uid-{i}"),
            at_unix_ms: 1_700_000_000_000,
            cpu_usage_usec: Some(1_000 * i),
            memory_bytes: Some(1 << 20),
            memory_pressure_some_avg10: Some(1.5),
            ..PodFigures::default()
        })
        .collect()
}

impl Handler for TestHandler {
    fn ping(&self, nonce: u64) -> Response {
        Response::Pong {
            nonce,
            node_name: "node-a".into(),
            agent_version: "test-1".into(),
        }
    }

    fn pod_telemetry(&self) -> HandlerFuture<'_> {
        Box::pin(async move {
            if let Some(gate) = &self.gate {
                gate.entered.notify_one();
                gate.release.notified().await;
            }
            Response::PodTelemetry {
                node_name: "node-a".into(),
                pods: pods(),
            }
        })
    }
}

struct Running {
    addr: SocketAddr,
    shutdown: CancellationToken,
    task: JoinHandle<()>,
}

impl Running {
    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(BOUND, self.task)
            .await
            .expect("server stops promptly")
            .unwrap();
    }
}

fn serve(files: &TlsFiles, gate: Option<Arc<Gate>>) -> Running {
    let server = QuicServer::bind(
        LOCAL.into(),
        tls::server_config(files).unwrap(),
        Arc::new(TestHandler { gate }),
    )
    .unwrap();
    let addr = server.local_addr();
    assert!(addr.ip().is_loopback() && addr.port() != 0);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(server.run(shutdown.clone()));
    Running {
        addr,
        shutdown,
        task,
    }
}

fn client(config: Arc<rustls::ClientConfig>) -> QuicClient {
    QuicClient::bind(config, LOCAL.into()).unwrap()
}

fn assert_three_pods(response: Response) {
    match response {
        Response::PodTelemetry { node_name, pods: p } => {
            assert_eq!(node_name, "node-a");
            assert_eq!(p, pods());
        }
        other => panic!("expected PodTelemetry, got {other:?}"),
    }
}

#[tokio::test]
async fn pong_and_pod_telemetry_end_to_end() {
    let pki = pki();
    let server = serve(&pki.agent, None);
    let client = client(tls::client_config(&pki.coordinator).unwrap());

    let conn = client.connect(server.addr, "node-a").await.unwrap();
    assert_eq!(conn.peer().node_name, "node-a");
    assert_eq!(conn.peer().agent_version, "test-1");
    assert_eq!(conn.remote_address(), server.addr);

    match conn.request(&Request::Ping { nonce: 99 }).await.unwrap() {
        Response::Pong { nonce, .. } => assert_eq!(nonce, 99),
        other => panic!("expected Pong, got {other:?}"),
    }
    assert_three_pods(conn.request(&Request::PodTelemetry).await.unwrap());

    // The connection is reused per agent address, by connect and by request alike.
    let again = client.connect(server.addr, "node-a").await.unwrap();
    assert_eq!(again.stable_id(), conn.stable_id());
    assert_three_pods(
        client
            .request(server.addr, "node-a", &Request::PodTelemetry)
            .await
            .unwrap(),
    );
    assert_eq!(
        client
            .connect(server.addr, "node-a")
            .await
            .unwrap()
            .stable_id(),
        conn.stable_id()
    );

    // A closed connection is replaced, not handed out.
    conn.close();
    let fresh = client.connect(server.addr, "node-a").await.unwrap();
    assert_ne!(fresh.stable_id(), conn.stable_id());
    assert!(conn.request(&Request::PodTelemetry).await.is_err());
    assert_three_pods(fresh.request(&Request::PodTelemetry).await.unwrap());

    client.close().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_share_one_connection() {
    let pki = pki();
    let server = serve(&pki.agent, None);
    let client = client(tls::client_config(&pki.coordinator).unwrap());
    let conn = client.connect(server.addr, "node-a").await.unwrap();

    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..64u64 {
        let conn = conn.clone();
        tasks.spawn(async move {
            let request = if i % 2 == 0 {
                Request::PodTelemetry
            } else {
                Request::Ping { nonce: i }
            };
            (i, conn.request(&request).await)
        });
    }
    let mut answered = 0;
    while let Some(joined) = tasks.join_next().await {
        let (i, response) = joined.unwrap();
        match response.unwrap() {
            Response::Pong { nonce, .. } => assert_eq!(nonce, i),
            other => assert_three_pods(other),
        }
        answered += 1;
    }
    assert_eq!(answered, 64);
    assert!(!conn.is_closed());
    assert_eq!(
        client
            .connect(server.addr, "node-a")
            .await
            .unwrap()
            .stable_id(),
        conn.stable_id()
    );

    client.close().await;
    server.stop().await;
}

fn ca_roots(ca: &Path) -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    roots
}

fn assert_rejected(result: Result<quic::Connection, QuicError>, what: &str) -> String {
    match result {
        Ok(_) => panic!("{what}: connected"),
        Err(e) => {
            assert!(
                matches!(e, QuicError::Link { .. }),
                "{what}: expected a link error, got {e:?}"
            );
            e.to_string()
        }
    }
}

#[tokio::test]
async fn client_without_certificate_is_rejected() {
    let pki = pki();
    let server = serve(&pki.agent, None);
    let mut config = rustls::ClientConfig::builder_with_provider(tls::provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(ca_roots(&pki.ca.ca_path()))
        .with_no_client_auth();
    config.alpn_protocols = vec![tls::ALPN.to_vec()];
    let client = client(Arc::new(config));

    // The handshake completes on the client's side; the first request (connect's ping) fails.
    let msg = assert_rejected(
        client.connect(server.addr, "node-a").await,
        "client without certificate",
    );
    assert!(msg.contains("certificate"), "{msg}");

    server.stop().await;
}

#[tokio::test]
async fn client_with_certificate_from_another_ca_is_rejected() {
    let pki = pki();
    let other_dir = tempfile::tempdir().unwrap();
    let other = DevCa::create(other_dir.path(), "some other CA").unwrap();
    let stranger = other.issue("coordinator", &["coordinator"]).unwrap();
    let server = serve(&pki.agent, None);

    // Trusts the right CA (so it accepts the server), but presents the other CA's certificate.
    let files = TlsFiles {
        ca: pki.ca.ca_path(),
        ..stranger
    };
    let client = client(tls::client_config(&files).unwrap());
    let msg = assert_rejected(
        client.connect(server.addr, "node-a").await,
        "client from another CA",
    );
    assert!(msg.contains("handshake failed"), "{msg}");

    server.stop().await;
}

#[tokio::test]
async fn client_refuses_a_server_from_another_ca_or_with_another_name() {
    let pki = pki();
    let server = serve(&pki.agent, None);

    let other_dir = tempfile::tempdir().unwrap();
    let other = DevCa::create(other_dir.path(), "some other CA").unwrap();
    let files = TlsFiles {
        ca: other.ca_path(),
        ..pki.coordinator.clone()
    };
    let distrusting = client(tls::client_config(&files).unwrap());
    let msg = assert_rejected(
        distrusting.connect(server.addr, "node-a").await,
        "server from another CA",
    );
    assert!(msg.contains("TLS handshake"), "{msg}");

    let client = client(tls::client_config(&pki.coordinator).unwrap());
    let msg = assert_rejected(
        client.connect(server.addr, "node-b").await,
        "server with another name",
    );
    assert!(msg.contains("TLS handshake"), "{msg}");
    // The right name on the same client still works.
    client.connect(server.addr, "node-a").await.unwrap();

    client.close().await;
    server.stop().await;
}

/// Sends raw bytes on one stream, finishes it, and decodes the answer.
async fn raw_exchange(conn: &quinn::Connection, bytes: &[u8]) -> Response {
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    send.write_all(bytes).await.unwrap();
    send.finish().unwrap();
    let answer = recv.read_to_end(1 << 20).await.unwrap();
    let (response, used) = wire::decode_frame::<Response>(&answer).unwrap();
    assert_eq!(used, answer.len());
    response
}

fn error_message(response: Response) -> String {
    match response {
        Response::Error { message } => message,
        other => panic!("expected Error, got {other:?}"),
    }
}

#[tokio::test]
async fn bad_frames_get_clear_errors() {
    let pki = pki();
    let server = serve(&pki.agent, None);
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(
        tls::client_config(&pki.coordinator).unwrap(),
    )
    .unwrap();
    let mut endpoint = quinn::Endpoint::client(LOCAL.into()).unwrap();
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    let conn = endpoint
        .connect(server.addr, "node-a")
        .unwrap()
        .await
        .unwrap();

    // An unknown version.
    let mut frame = wire::encode_frame(9, &Request::PodTelemetry, "request").unwrap();
    let msg = error_message(raw_exchange(&conn, &frame).await);
    assert!(msg.contains("unsupported protocol version 9"), "{msg}");

    // Oversized: the header alone is refused (requests are capped far below 16 MiB).
    let msg = error_message(raw_exchange(&conn, &(1u32 << 20).to_be_bytes()).await);
    assert!(msg.contains("exceeds the limit"), "{msg}");
    let msg = error_message(raw_exchange(&conn, &u32::MAX.to_be_bytes()).await);
    assert!(msg.contains("exceeds the limit"), "{msg}");

    // Truncated: the header promises more than the stream carries.
    frame[..4].copy_from_slice(&10u32.to_be_bytes());
    let msg = error_message(raw_exchange(&conn, &frame).await);
    assert!(msg.contains("truncated frame"), "{msg}");
    let msg = error_message(raw_exchange(&conn, &[0, 0]).await);
    assert!(msg.contains("truncated frame"), "{msg}");

    // Garbage body under the right version.
    let msg = error_message(raw_exchange(&conn, &[0, 0, 0, 2, wire::VERSION, 77]).await);
    assert!(msg.contains("malformed version 1 request"), "{msg}");

    // The connection survives all of it.
    assert_three_pods(
        raw_exchange(
            &conn,
            &wire::Message::encode(&Request::PodTelemetry).unwrap(),
        )
        .await,
    );

    conn.close(0u32.into(), b"done");
    endpoint.wait_idle().await;
    server.stop().await;
}

#[tokio::test]
async fn shutdown_lets_requests_in_flight_finish_then_closes() {
    let pki = pki();
    let gate = Arc::new(Gate {
        entered: Notify::new(),
        release: Notify::new(),
    });
    let server = serve(&pki.agent, Some(gate.clone()));
    let client = client(tls::client_config(&pki.coordinator).unwrap());
    let conn = client.connect(server.addr, "node-a").await.unwrap();

    let in_flight = tokio::spawn({
        let conn = conn.clone();
        async move { conn.request(&Request::PodTelemetry).await }
    });
    gate.entered.notified().await;

    let Running { shutdown, task, .. } = server;
    shutdown.cancel();
    gate.release.notify_one();

    assert_three_pods(
        tokio::time::timeout(BOUND, in_flight)
            .await
            .unwrap()
            .unwrap()
            .unwrap(),
    );
    tokio::time::timeout(BOUND, task).await.unwrap().unwrap();

    // The server said goodbye: the client's connection is closed, not left to time out.
    let err = conn.request(&Request::Ping { nonce: 1 }).await.unwrap_err();
    assert!(conn.is_closed(), "{err}");
    assert!(err.to_string().contains("shutting down"), "{err}");
}

/// Reads one issued file's bytes (DevCa writes `stem.crt` and `stem.key` beside its `ca.crt`).
fn bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

/// Swaps `ca`, `tls.crt` and `tls.key` into the Secret directory `dir` as kubelet does.
fn mount(dir: &Path, generation: u32, ca: &[u8], issued: &TlsFiles) {
    telemesh_core::testing::kubelet_swap(
        dir,
        generation,
        &[
            ("ca.crt", ca),
            ("tls.crt", &bytes(&issued.cert_chain)),
            ("tls.key", &bytes(&issued.key)),
        ],
    )
    .unwrap();
}

/// One request over a new connection (a new handshake), as a fresh coordinator would make it.
async fn fresh_request(client: &QuicClient, addr: SocketAddr) -> Result<(), String> {
    let conn = client
        .connect(addr, "node-a")
        .await
        .map_err(|e| e.to_string())?;
    let answer = conn.request(&Request::PodTelemetry).await;
    conn.close();
    match answer {
        Ok(Response::PodTelemetry { .. }) => Ok(()),
        other => Err(format!("{other:?}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_and_cas_reload_on_both_sides_when_the_secrets_rotate() {
    let dir = tempfile::tempdir().unwrap();
    let ca1 = DevCa::create(&dir.path().join("ca1"), "first CA").unwrap();
    let ca2 = DevCa::create(&dir.path().join("ca2"), "second CA").unwrap();
    let (ca1_pem, ca2_pem) = (bytes(&ca1.ca_path()), bytes(&ca2.ca_path()));
    let both = [ca1_pem.clone(), ca2_pem.clone()].concat();
    let (agent_dir, coordinator_dir) = (dir.path().join("agent"), dir.path().join("coordinator"));
    std::fs::create_dir_all(&agent_dir).unwrap();
    std::fs::create_dir_all(&coordinator_dir).unwrap();
    mount(
        &agent_dir,
        1,
        &ca1_pem,
        &ca1.issue("agent-1", &["node-a"]).unwrap(),
    );
    mount(
        &coordinator_dir,
        1,
        &both,
        &ca1.issue("coordinator-1", &["coordinator"]).unwrap(),
    );
    let server = serve(&TlsFiles::in_dir(&agent_dir), None);
    // Its own cache, so each look at the served certificate is a new handshake.
    let probe = client(tls::client_config(&TlsFiles::in_dir(&coordinator_dir)).unwrap());
    let client = Arc::new(client(
        tls::client_config(&TlsFiles::in_dir(&coordinator_dir)).unwrap(),
    ));

    // A client keeps making requests, each over a new handshake, while the agent's certificate
    // is renewed twice (cert-manager renewing from the same CA): none fails.
    let stop = CancellationToken::new();
    let succeeded = Arc::new(AtomicU32::new(0));
    let requester = {
        let (client, stop, addr) = (client.clone(), stop.clone(), server.addr);
        let succeeded = succeeded.clone();
        tokio::spawn(async move {
            let mut failed = Vec::new();
            while !stop.is_cancelled() {
                match fresh_request(&client, addr).await {
                    Ok(()) => {
                        succeeded.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => failed.push(e),
                }
            }
            failed
        })
    };
    let some_requests = || {
        let target = succeeded.load(Ordering::Relaxed) + 20;
        let succeeded = succeeded.clone();
        telemesh_runtime::testing::eventually("20 more requests", BOUND, move || {
            let done = succeeded.load(Ordering::Relaxed) >= target;
            async move { done.then_some(()) }
        })
    };
    some_requests().await;
    for generation in 2..=3 {
        let before = served_certificate(&probe, server.addr).await;
        let renewed = ca1
            .issue(&format!("agent-{generation}"), &["node-a"])
            .unwrap();
        mount(&agent_dir, generation, &ca1_pem, &renewed);
        // The next handshake presents the renewed certificate.
        let served = served_certificate(&probe, server.addr).await;
        assert_eq!(
            served,
            fingerprint_of(&renewed.cert_chain),
            "generation {generation}"
        );
        assert_ne!(served, before);
        some_requests().await;
    }
    stop.cancel();
    let failed = requester.await.unwrap();
    let ok = succeeded.load(Ordering::Relaxed);
    println!(
        "requests during two renewals: {ok} succeeded, {} failed",
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "{} of {} requests failed: {failed:?}",
        failed.len(),
        ok as usize + failed.len()
    );
    assert!(ok >= 60, "only {ok} requests made");

    // The CA is replaced on the agent: the coordinator's certificate from the old CA is
    // refused from the next handshake on...
    mount(
        &agent_dir,
        4,
        &ca2_pem,
        &ca2.issue("agent-4", &["node-a"]).unwrap(),
    );
    let refused = fresh_request(&client, server.addr).await.unwrap_err();
    assert!(
        refused.contains("handshake") || refused.contains("certificate"),
        "{refused}"
    );
    // ...and once the coordinator's Secret holds a certificate from the new CA, it is accepted,
    // by the same running client.
    mount(
        &coordinator_dir,
        2,
        &both,
        &ca2.issue("coordinator-2", &["coordinator"]).unwrap(),
    );
    fresh_request(&client, server.addr).await.unwrap();

    probe.close().await;
    client.close().await;
    server.stop().await;
}

/// The fingerprint of the first certificate in a PEM file.
fn fingerprint_of(path: &Path) -> String {
    let cert = CertificateDer::pem_file_iter(path)
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    tls::fingerprint(&cert)
}

/// The fingerprint of the certificate the agent presents on a new connection now.
async fn served_certificate(client: &QuicClient, addr: SocketAddr) -> String {
    let conn = client.connect(addr, "node-a").await.unwrap();
    let served = conn.peer_fingerprint().unwrap();
    conn.close();
    served
}
