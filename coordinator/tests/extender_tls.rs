//! The extender's HTTPS follows its Secret: certificates renewed and the client CA replaced
//! while a client keeps calling, with no restart and no failed request; a client certificate
//! from the new CA is accepted and one from the old CA refused after the replacement.

#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use telemesh_coordinator::extender::http::{TlsFiles, serve_tls, server_config};
use telemesh_core::testing::kubelet_swap;
use telemesh_runtime::quic::tls::{DevCa, TlsFiles as Issued, fingerprint, provider};
use telemesh_runtime::testing::eventually;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

fn bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

/// Swaps the extender's Secret (server certificate, key, client CA) as kubelet does.
fn mount(dir: &Path, generation: u32, server: &Issued, client_ca: &[u8]) {
    kubelet_swap(
        dir,
        generation,
        &[
            ("tls.crt", &bytes(&server.cert_chain)),
            ("tls.key", &bytes(&server.key)),
            ("client-ca.crt", client_ca),
        ],
    )
    .unwrap();
}

/// A scheduler-like client: trusts both CAs for the server, presents `cert`.
fn client_config(cas: &[&Path], cert: &Issued) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in cas {
        for c in CertificateDer::pem_file_iter(ca).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
    }
    let chain = CertificateDer::pem_file_iter(&cert.cert_chain)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(&cert.key).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .unwrap();
    Arc::new(config)
}

/// One HTTPS request on a new connection; returns the server certificate's fingerprint.
async fn request(addr: SocketAddr, config: &Arc<rustls::ClientConfig>) -> Result<String, String> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(config.clone())
        .connect(name, tcp)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let served = fingerprint(&tls.get_ref().1.peer_certificates().unwrap()[0]);
    tls.write_all(b"GET /ok HTTP/1.1\r\nHost: extender\r\nConnection: close\r\n\r\n")
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut answer = Vec::new();
    tls.read_to_end(&mut answer)
        .await
        .map_err(|e| format!("read: {e}"))?;
    let answer = String::from_utf8_lossy(&answer);
    if answer.starts_with("HTTP/1.1 200") && answer.ends_with("ok") {
        Ok(served)
    } else {
        Err(format!("answer: {answer}"))
    }
}

fn fingerprint_of(path: &Path) -> String {
    fingerprint(
        &CertificateDer::pem_file_iter(path)
            .unwrap()
            .next()
            .unwrap()
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_and_client_ca_reload_without_a_restart_or_a_failed_request() {
    let dir = tempfile::tempdir().unwrap();
    let ca1 = DevCa::create(&dir.path().join("ca1"), "first CA").unwrap();
    let ca2 = DevCa::create(&dir.path().join("ca2"), "second CA").unwrap();
    let secret = dir.path().join("secret");
    std::fs::create_dir_all(&secret).unwrap();
    mount(
        &secret,
        1,
        &ca1.issue("server-1", &["127.0.0.1"]).unwrap(),
        &bytes(&ca1.ca_path()),
    );
    let files = TlsFiles {
        cert: secret.join("tls.crt"),
        key: secret.join("tls.key"),
        client_ca: Some(secret.join("client-ca.crt")),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let router = Router::new().route("/ok", get(|| async { "ok" }));
    let server = tokio::spawn(serve_tls(
        listener,
        router,
        server_config(&files).unwrap(),
        telemesh_runtime::door::Connections {
            door: telemesh_runtime::door::DoorName::Extender,
            header_timeout: std::time::Duration::from_secs(30),
            metrics: telemesh_runtime::door::DoorMetrics::default(),
        },
        stop.clone(),
        TaskTracker::new(),
    ));
    let cas = [ca1.ca_path(), ca2.ca_path()];
    let cas: Vec<&Path> = cas.iter().map(|p| p.as_path()).collect();
    let old_client = client_config(&cas, &ca1.issue("scheduler-1", &["scheduler"]).unwrap());
    let new_client = client_config(&cas, &ca2.issue("scheduler-2", &["scheduler"]).unwrap());

    // A client calls continuously, each call on a new connection (a new handshake), while the
    // server certificate is renewed twice: every call succeeds, and the next handshake after
    // each renewal presents the renewed certificate.
    let calling = CancellationToken::new();
    let succeeded = Arc::new(AtomicU32::new(0));
    let caller = {
        let (calling, config, succeeded) = (calling.clone(), old_client.clone(), succeeded.clone());
        tokio::spawn(async move {
            let mut failed = Vec::new();
            while !calling.is_cancelled() {
                match request(addr, &config).await {
                    Ok(_) => {
                        succeeded.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => failed.push(e),
                }
            }
            failed
        })
    };
    let some_calls = || {
        let target = succeeded.load(Ordering::Relaxed) + 20;
        let succeeded = succeeded.clone();
        eventually("20 more calls", Duration::from_secs(30), move || {
            let done = succeeded.load(Ordering::Relaxed) >= target;
            async move { done.then_some(()) }
        })
    };
    some_calls().await;
    for generation in 2..=3 {
        let renewed = ca1
            .issue(&format!("server-{generation}"), &["127.0.0.1"])
            .unwrap();
        mount(&secret, generation, &renewed, &bytes(&ca1.ca_path()));
        let served = request(addr, &old_client).await.unwrap();
        assert_eq!(
            served,
            fingerprint_of(&renewed.cert_chain),
            "generation {generation}"
        );
        some_calls().await;
    }
    calling.cancel();
    let failed = caller.await.unwrap();
    let ok = succeeded.load(Ordering::Relaxed);
    println!(
        "calls during two certificate renewals: {ok} succeeded, {} failed",
        failed.len()
    );
    assert!(failed.is_empty(), "failed calls: {failed:?}");
    assert!(ok >= 60, "only {ok} calls made");

    // Before the CA is replaced, only the old CA's client is accepted...
    request(addr, &old_client).await.unwrap();
    assert!(request(addr, &new_client).await.is_err());
    // ...after it, only the new CA's.
    mount(
        &secret,
        4,
        &ca2.issue("server-4", &["127.0.0.1"]).unwrap(),
        &bytes(&ca2.ca_path()),
    );
    request(addr, &new_client).await.unwrap();
    let refused = request(addr, &old_client).await.unwrap_err();
    println!("old CA's client after the replacement: {refused}");

    stop.cancel();
    server.await.unwrap();
}
