//! rustls certificates and trust anchors that follow their files: cert-manager rotates a
//! Secret, kubelet swaps the mounted files, and the next handshake uses them, with no restart.
//! Shared by the extender's HTTPS and by QUIC on both sides.
//!
//! The pieces are rustls's own extension points, each reading the current [`TlsMaterial`] of
//! one [`Reloading`] (which checks the files' signature on every handshake; see
//! [`crate::reload`]):
//! - [`CertResolver`]: this side's certificate and key (`ResolvesServerCert` and
//!   `ResolvesClientCert`);
//! - [`ClientVerifier`]: client certificates checked against the current CA (`ClientCertVerifier`);
//! - [`ServerVerifier`]: the server's certificate checked against the current CA
//!   (`ServerCertVerifier`).
//!
//! Connections already established keep the keys they negotiated and are never interrupted; a
//! certificate from a CA that was replaced is refused from the next handshake on. For that,
//! servers using these pieces turn TLS session resumption off ([`no_resumption`]): a resumed
//! session skips the certificate check, so a client certificate from a replaced CA (or a
//! server certificate from before a renewal) would live on in session tickets. Our clients keep
//! connections open (QUIC per agent, kube-scheduler's HTTP/1.1 pool), so a full handshake is rare. The server
//! sends no CA names in its certificate request (`root_hint_subjects` is empty, which RFC 8446
//! allows: clients then offer the certificate they have), because the names would have to
//! outlive a reload.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::ResolvesClientCert;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};

use crate::reload::Reloading;

/// What one load of the files gives.
#[derive(Debug)]
pub struct TlsMaterial {
    /// This side's certificate chain and signing key.
    pub key: Arc<CertifiedKey>,
    /// Client certificates are checked with this (servers that require them).
    pub client_verifier: Option<Arc<dyn ClientCertVerifier>>,
    /// Server certificates are checked with this (clients).
    pub server_verifier: Option<Arc<dyn ServerCertVerifier>>,
}

/// The parsed PEM contents a [`TlsMaterial`] is built from.
#[derive(Debug)]
pub struct Pem {
    /// Certificate chain, end entity first.
    pub chain: Vec<CertificateDer<'static>>,
    /// Its private key.
    pub key: PrivateKeyDer<'static>,
    /// Trust anchors for the peer's certificates, if the peer is checked.
    pub roots: Option<RootCertStore>,
}

/// Which peer certificate check a side needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// A server that requires client certificates chaining to the roots.
    Clients,
    /// A server that does not ask for client certificates.
    Anonymous,
    /// A client that checks the server's certificate against the roots.
    Server,
}

/// Why PEM contents cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum MaterialError {
    /// The key does not fit the certificate, or the provider cannot use it.
    #[error("the certificate and the key cannot be used together: {0}")]
    CertKey(rustls::Error),
    /// The verifier cannot be built from the roots.
    #[error("cannot verify peers against the CA: {0}")]
    ClientVerifier(#[from] rustls::server::VerifierBuilderError),
    /// The roots are missing where the peer must be checked.
    #[error("no CA to check peers against")]
    NoRoots,
}

impl TlsMaterial {
    /// Builds the signing key and the peer check from `pem` with `provider`.
    pub fn build(
        pem: Pem,
        peer: Peer,
        provider: &Arc<CryptoProvider>,
    ) -> Result<Self, MaterialError> {
        let key =
            CertifiedKey::from_der(pem.chain, pem.key, provider).map_err(MaterialError::CertKey)?;
        let (mut client_verifier, mut server_verifier) = (None, None);
        match peer {
            Peer::Anonymous => {}
            Peer::Clients => {
                let roots = Arc::new(pem.roots.ok_or(MaterialError::NoRoots)?);
                let v =
                    WebPkiClientVerifier::builder_with_provider(roots, provider.clone()).build()?;
                client_verifier = Some(v);
            }
            Peer::Server => {
                let roots = Arc::new(pem.roots.ok_or(MaterialError::NoRoots)?);
                let v = rustls::client::WebPkiServerVerifier::builder_with_provider(
                    roots,
                    provider.clone(),
                )
                .build()
                .map_err(MaterialError::ClientVerifier)?;
                server_verifier = Some(v as Arc<dyn ServerCertVerifier>);
            }
        }
        Ok(Self {
            key: Arc::new(key),
            client_verifier,
            server_verifier,
        })
    }
}

/// Turns session resumption off on a server: no tickets, no session cache (see the module
/// documentation).
pub fn no_resumption(config: &mut rustls::ServerConfig) {
    config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    config.send_tls13_tickets = 0;
}

/// TLS material reloaded from its files.
pub type ReloadingTls = Arc<Reloading<TlsMaterial>>;

/// Loads TLS material from `paths` with `load`, now and whenever the files change.
pub fn reloading<E: std::fmt::Display>(
    what: &'static str,
    paths: Vec<PathBuf>,
    load: impl Fn() -> Result<TlsMaterial, E> + Send + Sync + 'static,
) -> Result<ReloadingTls, E> {
    Reloading::new(what, paths, load).map(Arc::new)
}

/// This side's certificate, as the files hold it now.
#[derive(Debug, Clone)]
pub struct CertResolver(pub ReloadingTls);

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.get().key.clone())
    }
}

impl ResolvesClientCert for CertResolver {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.0.get().key.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// Client certificates checked against the CA the files hold now.
#[derive(Debug, Clone)]
pub struct ClientVerifier(pub ReloadingTls);

impl ClientVerifier {
    fn current(&self) -> Result<Arc<dyn ClientCertVerifier>, rustls::Error> {
        self.0.get().client_verifier.clone().ok_or_else(|| {
            rustls::Error::General("no client CA loaded to verify client certificates".into())
        })
    }
}

impl ClientCertVerifier for ClientVerifier {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.current()?
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current()?.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current()?.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.current()
            .map(|v| v.supported_verify_schemes())
            .unwrap_or_default()
    }
}

/// The server's certificate checked against the CA the files hold now.
#[derive(Debug, Clone)]
pub struct ServerVerifier(pub ReloadingTls);

impl ServerVerifier {
    fn current(&self) -> Result<Arc<dyn ServerCertVerifier>, rustls::Error> {
        self.0.get().server_verifier.clone().ok_or_else(|| {
            rustls::Error::General("no CA loaded to verify server certificates".into())
        })
    }
}

impl ServerCertVerifier for ServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.current()?.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current()?.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current()?.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.current()
            .map(|v| v.supported_verify_schemes())
            .unwrap_or_default()
    }
}
