//! The extender's HTTP(S) server: POST routes for the verbs at configurable paths, JSON error
//! replies for everything else (never an empty body), and TLS with an optional client
//! certificate check, served with tokio-rustls and hyper-util. Plumbing only: the decisions are
//! in [`super::Extender`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use http::StatusCode;
use http::header::CONTENT_TYPE;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use telemesh_runtime::door::Connections;
use telemesh_runtime::tls_reload::{
    self, CertResolver, ClientVerifier, MaterialError, Peer, Pem, TlsMaterial,
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Extender, Handled, Reply, error_object};
use crate::metrics::{ExtenderMetrics, Outcome, Verb};

/// Where the verbs are served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// filter, default `/scheduler/filter`.
    pub filter: String,
    /// prioritize, default `/scheduler/prioritize`.
    pub prioritize: String,
    /// preempt, default `/scheduler/preempt`.
    pub preempt: String,
}

impl Default for Paths {
    fn default() -> Self {
        Self {
            filter: "/scheduler/filter".into(),
            prioritize: "/scheduler/prioritize".into(),
            preempt: "/scheduler/preempt".into(),
        }
    }
}

struct Shared {
    extender: Extender,
    metrics: ExtenderMetrics,
}

/// The extender's routes. Bodies up to `max_body` bytes are read (full-node requests of
/// thousands of nodes are tens of megabytes); the door in front
/// ([`crate::doors::Doors::extender`]) enforces the same limit before the body is read.
pub fn router(
    extender: Extender,
    metrics: ExtenderMetrics,
    paths: &Paths,
    max_body: usize,
) -> Router {
    let shared = Arc::new(Shared { extender, metrics });
    Router::new()
        .route(&paths.filter, post(filter))
        .route(&paths.prioritize, post(prioritize))
        .route(&paths.preempt, post(preempt))
        .method_not_allowed_fallback(|| async {
            reply(StatusCode::METHOD_NOT_ALLOWED, error_object("extender verbs take POST"))
        })
        .fallback(|uri: http::Uri| async move {
            reply(
                StatusCode::NOT_FOUND,
                error_object(&format!(
                    "no extender verb at {}; check the urlPrefix and verbs in the scheduler configuration",
                    uri.path()
                )),
            )
        })
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(shared)
}

async fn filter(State(s): State<Arc<Shared>>, body: Result<Bytes, BytesRejection>) -> Response {
    serve(&s, Verb::Filter, body, |e, b| e.filter(b))
}

async fn prioritize(State(s): State<Arc<Shared>>, body: Result<Bytes, BytesRejection>) -> Response {
    serve(&s, Verb::Prioritize, body, |e, b| e.prioritize(b))
}

async fn preempt(State(s): State<Arc<Shared>>, body: Result<Bytes, BytesRejection>) -> Response {
    serve(&s, Verb::Preempt, body, |e, b| e.preempt(b))
}

fn serve(
    s: &Shared,
    verb: Verb,
    body: Result<Bytes, BytesRejection>,
    handle: impl FnOnce(&Extender, &[u8]) -> Handled,
) -> Response {
    // One span per call, at debug: on the scheduler's hot path a disabled span costs a
    // level check.
    let _call = tracing::debug_span!("extender_call", verb = ?verb).entered();
    let started = Instant::now();
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            s.metrics
                .observe(verb, Outcome::Malformed, started.elapsed());
            let status = rejection.status();
            return reply(
                status,
                error_object(&format!(
                    "cannot read the request body: {}; raise --extender-max-body-mib if the scheduler sends more",
                    rejection.body_text()
                )),
            );
        }
    };
    let handled = handle(&s.extender, &body);
    s.metrics.observe(verb, handled.outcome, started.elapsed());
    if verb == Verb::Filter {
        s.metrics.filtered(handled.passed, handled.failed);
    }
    if let Some(effect) = handled.reward {
        s.metrics.rewarded(verb, effect);
    }
    if let Some(effect) = &handled.ranked {
        s.metrics.ranked(effect);
    }
    let status = StatusCode::from_u16(handled.reply.status).unwrap_or(StatusCode::BAD_REQUEST);
    reply(status, handled.reply)
}

fn reply(status: StatusCode, reply: Reply) -> Response {
    (status, [(CONTENT_TYPE, "application/json")], reply.body).into_response()
}

/// The extender's TLS files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// Certificate chain (PEM).
    pub cert: PathBuf,
    /// Private key (PEM).
    pub key: PathBuf,
    /// When set, clients must present a certificate chaining to this CA (PEM).
    pub client_ca: Option<PathBuf>,
}

/// Why the extender's TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or parsed.
    #[error(
        "cannot read the extender {role} from {path}: {source}; pass a PEM file with --extender-{flag}"
    )]
    Pem {
        /// What the file should hold.
        role: &'static str,
        /// The flag naming it.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: rustls::pki_types::pem::Error,
    },
    /// The client CA could not be used.
    #[error(
        "cannot verify client certificates against {path}: {reason}; pass the CA that signs the scheduler's client certificate"
    )]
    ClientCa {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// Certificate and key do not go together.
    #[error("the extender certificate {cert} and key {key} cannot be used together: {source}")]
    CertKey {
        /// Certificate file.
        cert: PathBuf,
        /// Key file.
        key: PathBuf,
        /// Why.
        source: rustls::Error,
    },
}

fn certs(
    path: &Path,
    role: &'static str,
    flag: &'static str,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = |source| TlsError::Pem {
        role,
        flag,
        path: path.to_owned(),
        source,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(pem)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem)?;
    if certs.is_empty() {
        return Err(pem(rustls::pki_types::pem::Error::NoItemsFound));
    }
    Ok(certs)
}

/// Builds the server configuration: TLS 1.2 and 1.3 (kube-scheduler speaks both), HTTP/1.1 only
/// in ALPN (see below), and a client-certificate check when `client_ca` is set. Certificate, key
/// and client CA are reloaded when their files change (cert-manager rotations), from the next
/// handshake on, without a restart and without touching open connections
/// ([`telemesh_runtime::tls_reload`]).
pub fn server_config(files: &TlsFiles) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut paths = vec![files.cert.clone(), files.key.clone()];
    paths.extend(files.client_ca.clone());
    let (loaded_files, loaded_provider) = (files.clone(), provider.clone());
    let tls = tls_reload::reloading("extender TLS files", paths, move || {
        load_material(&loaded_files, &loaded_provider)
    })?;
    let builder = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|source| TlsError::CertKey {
            cert: files.cert.clone(),
            key: files.key.clone(),
            source,
        })?;
    let builder = match &files.client_ca {
        Some(_) => builder.with_client_cert_verifier(Arc::new(ClientVerifier(tls.clone()))),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(Arc::new(CertResolver(tls)));
    tls_reload::no_resumption(&mut config);
    // HTTP/1.1 only. kube-scheduler's extender client (Go net/http with HTTP/2 configured)
    // takes h2 when offered and then sends every call over one multiplexed connection: at 500
    // nodes it scheduled 321 pods/s over h2 against 512 over HTTP/1.1 with the same TLS, while
    // this server spent 15-25 µs per call either way. Without h2 in ALPN it keeps a pool of
    // HTTP/1.1 connections instead (scripts/scheduler-throughput.sh measures both).
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Reads and checks the extender's files (at start, and at each change).
fn load_material(
    files: &TlsFiles,
    provider: &Arc<rustls::crypto::CryptoProvider>,
) -> Result<TlsMaterial, TlsError> {
    let chain = certs(&files.cert, "certificate", "cert")?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|source| TlsError::Pem {
        role: "private key",
        flag: "key",
        path: files.key.clone(),
        source,
    })?;
    let roots = match &files.client_ca {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in certs(ca, "client CA", "client-ca")? {
                roots.add(cert).map_err(|e| TlsError::ClientCa {
                    path: ca.clone(),
                    reason: e.to_string(),
                })?;
            }
            Some(roots)
        }
        None => None,
    };
    let peer = if roots.is_some() {
        Peer::Clients
    } else {
        Peer::Anonymous
    };
    TlsMaterial::build(Pem { chain, key, roots }, peer, provider).map_err(|e| match e {
        MaterialError::CertKey(source) => TlsError::CertKey {
            cert: files.cert.clone(),
            key: files.key.clone(),
            source,
        },
        other => TlsError::ClientCa {
            path: files.client_ca.clone().unwrap_or_default(),
            reason: other.to_string(),
        },
    })
}

/// Longest a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `router` on `listener` over TLS until `stop`, then lets open connections finish their
/// requests. Connections are tracked by `tasks`; HTTP/1.1 connections are served by
/// `connections` (header deadline, client address). HTTP/2 is served only when the TLS
/// configuration offers it in ALPN, which [`server_config`] never does (the throughput bench
/// does, to compare).
pub async fn serve_tls(
    listener: TcpListener,
    router: Router,
    tls: Arc<rustls::ServerConfig>,
    connections: Connections,
    stop: CancellationToken,
    tasks: TaskTracker,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer): (_, SocketAddr) = match accepted {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(error = %e, "extender accept failed");
                // Out of file descriptors and the like: do not spin.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let (acceptor, router, stop) = (acceptor.clone(), router.clone(), stop.clone());
        let connections = connections.clone();
        tasks.spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::debug!(peer.addr = %peer, error = %e, "extender TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(peer.addr = %peer, "extender TLS handshake timed out");
                    return;
                }
            };
            if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
                connections.serve_connection(tls, peer, router, stop).await;
                return;
            }
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection(TokioIo::new(tls), TowerToHyperService::new(router));
            tokio::pin!(conn);
            let result = tokio::select! {
                r = conn.as_mut() => r,
                _ = stop.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = result {
                tracing::debug!(peer.addr = %peer, error = %e, "extender connection ended with an error");
            }
        });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// kube-scheduler must not get h2 (issue 15: its HTTP/2 client cost 40 % of throughput).
    #[test]
    fn tls_offers_only_http1() {
        let dir = tempfile::tempdir().unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let (cert_path, key_path) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        for client_ca in [None, Some(cert_path.clone())] {
            let config = server_config(&TlsFiles {
                cert: cert_path.clone(),
                key: key_path.clone(),
                client_ca,
            })
            .unwrap();
            assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
        }
    }
}
