//! Optional HTTPS: a self-signed certificate for the listen address and its rustls (ring)
//! acceptor; [`crate::faults::serve`] serves the connections.

use std::net::IpAddr;
use std::sync::Arc;

use anyhow::Context as _;
use tokio_rustls::TlsAcceptor;

/// The server's certificate, its key, and the CA that signed it (what clients trust), PEM encoded.
#[derive(Debug, Clone)]
pub struct CertPair {
    /// The CA certificate clients trust (goes into the kubeconfig).
    pub ca_pem: String,
    /// The server certificate, signed by the CA.
    pub cert_pem: String,
    /// The server's private key.
    pub key_pem: String,
}

/// Makes a throwaway CA and a server certificate it signs, valid for `ip`, 127.0.0.1 and
/// localhost. (rustls refuses a CA certificate used as the server's own.)
pub fn self_signed(ip: IpAddr) -> anyhow::Result<CertPair> {
    let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    if !ip.is_unspecified() && ip.to_string() != "127.0.0.1" {
        names.push(ip.to_string());
    }
    let ca_key = rcgen::KeyPair::generate().context("generating the sim's CA key")?;
    let mut ca_params =
        rcgen::CertificateParams::new(Vec::<String>::new()).context("CA parameters")?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "telemesh-sim CA");
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    let ca =
        rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).context("signing the sim's CA")?;
    let key = rcgen::KeyPair::generate().context("generating the sim's TLS key")?;
    let mut params = rcgen::CertificateParams::new(names).context("certificate names")?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "telemesh-sim");
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params
        .signed_by(&key, &ca)
        .context("signing the sim's certificate")?;
    Ok(CertPair {
        ca_pem: ca.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// Builds a TLS acceptor offering HTTP/2 and HTTP/1.1.
pub fn acceptor(pair: &CertPair) -> anyhow::Result<TlsAcceptor> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = vec![
        CertificateDer::from_pem_slice(pair.cert_pem.as_bytes())
            .context("reading the certificate")?,
    ];
    let key = PrivateKeyDer::from_pem_slice(pair.key_pem.as_bytes()).context("reading the key")?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS versions")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("TLS certificate")?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
