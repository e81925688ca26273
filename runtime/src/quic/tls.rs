//! rustls configurations for the QUIC link, from PEM files, and a dev CA to make those files.
//!
//! Both sides use the ring provider, passed explicitly (never the process default, which panics
//! when a dependency also enables aws-lc-rs), TLS 1.3 only and ALPN [`ALPN`]. Authentication is
//! mutual: the server (agent) requires a client certificate chaining to the CA; the client
//! (coordinator) checks the server's certificate against the CA and the server name it dials
//! (the agent's node name, or an IP address, as a SAN).
//!
//! The files come from a mounted Secret; [`TlsFiles::in_dir`] names the usual layout
//! (`ca.crt`, `tls.crt`, `tls.key`). Both sides reload them when they change (cert-manager
//! rotations), from the next handshake on, through [`crate::tls_reload`].

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig};

use crate::tls_reload::{
    self, CertResolver, ClientVerifier, MaterialError, Peer, Pem, ReloadingTls, ServerVerifier,
    TlsMaterial,
};

/// The ALPN protocol both sides offer; a peer speaking anything else fails the handshake.
pub const ALPN: &[u8] = b"telemesh/1";

/// Where one side's PEM files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// CA certificate(s) that peers' certificates must chain to.
    pub ca: PathBuf,
    /// This side's certificate, followed by any intermediates.
    pub cert_chain: PathBuf,
    /// This side's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

impl TlsFiles {
    /// `ca.crt`, `tls.crt` and `tls.key` in `dir`: a `kubernetes.io/tls` Secret with a CA (as
    /// cert-manager writes it) mounted at `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            ca: dir.join("ca.crt"),
            cert_chain: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        }
    }
}

/// Why certificates could not be loaded or made. Messages name the file and what it should hold.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The file could not be read.
    #[error(
        "cannot read the QUIC {role} from {path}: {source}; mount the QUIC TLS Secret there or \
         pass the path of the right file"
    )]
    Read {
        /// What the file should hold.
        role: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not valid PEM.
    #[error("{path} is not valid PEM ({source}); the QUIC {role} must be PEM text")]
    Pem {
        /// What the file should hold.
        role: &'static str,
        /// The file.
        path: PathBuf,
        /// What the parser found.
        source: pem::Error,
    },
    /// No `CERTIFICATE` block in a file that should hold certificates.
    #[error(
        "{path} holds no PEM CERTIFICATE block; the QUIC {role} must hold at least one \
         (-----BEGIN CERTIFICATE-----)"
    )]
    NoCertificate {
        /// What the file should hold.
        role: &'static str,
        /// The file.
        path: PathBuf,
    },
    /// No private key in the key file.
    #[error(
        "{path} holds no PEM private key; the QUIC private key file must hold a PRIVATE KEY, \
         RSA PRIVATE KEY or EC PRIVATE KEY block"
    )]
    NoKey {
        /// The file.
        path: PathBuf,
    },
    /// A certificate in the CA file cannot serve as a trust anchor.
    #[error(
        "certificate {index} in {path} cannot be a trust anchor: {source}; the QUIC CA file must \
         hold the CA certificate that signed the peers' certificates"
    )]
    BadCa {
        /// The file.
        path: PathBuf,
        /// Position of the certificate in the file, from 0.
        index: usize,
        /// rustls's reason.
        source: rustls::Error,
    },
    /// The client-certificate verifier could not be built from the CA file.
    #[error("cannot verify client certificates against {path}: {source}")]
    Verifier {
        /// The CA file.
        path: PathBuf,
        /// rustls's reason.
        source: rustls::server::VerifierBuilderError,
    },
    /// Certificate and key are unusable or do not belong together.
    #[error(
        "the certificate in {cert} and the key in {key} cannot be used together: {source}; \
         issue them as a pair (same key) with an ECDSA, Ed25519 or RSA key"
    )]
    CertKey {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// rustls's reason.
        source: rustls::Error,
    },
    /// The ring provider does not offer TLS 1.3 (cannot happen with stock ring).
    #[error("TLS 1.3 is unavailable with the ring provider: {0}")]
    Protocol(rustls::Error),
    /// rcgen could not make a dev certificate.
    #[error("cannot generate a dev certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// A dev certificate file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// The crypto provider both sides use: ring.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The server (agent) side: presents `cert_chain`/`key`, requires a client certificate chaining
/// to `ca`; all three are reloaded when they change.
pub fn server_config(files: &TlsFiles) -> Result<Arc<ServerConfig>, TlsError> {
    let tls = reloading(files, Peer::Clients)?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(TlsError::Protocol)?
        .with_client_cert_verifier(Arc::new(ClientVerifier(tls.clone())))
        .with_cert_resolver(Arc::new(CertResolver(tls)));
    tls_reload::no_resumption(&mut config);
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(Arc::new(config))
}

/// The client (coordinator) side: presents `cert_chain`/`key`, trusts only `ca` for the server;
/// all three are reloaded when they change.
pub fn client_config(files: &TlsFiles) -> Result<Arc<ClientConfig>, TlsError> {
    let tls = reloading(files, Peer::Server)?;
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(TlsError::Protocol)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(ServerVerifier(tls.clone())))
        .with_client_cert_resolver(Arc::new(CertResolver(tls)));
    // Every handshake checks the agent's certificate against the CA as the files hold it now.
    config.resumption = rustls::client::Resumption::disabled();
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(Arc::new(config))
}

/// The files' material, loaded now and again whenever they change.
fn reloading(files: &TlsFiles, peer: Peer) -> Result<ReloadingTls, TlsError> {
    let paths = vec![
        files.ca.clone(),
        files.cert_chain.clone(),
        files.key.clone(),
    ];
    let (files, provider) = (files.clone(), provider());
    tls_reload::reloading("QUIC TLS files", paths, move || {
        let material = Material::load(&files)?;
        let pem = Pem {
            chain: material.chain,
            key: material.key,
            roots: Some(material.roots),
        };
        TlsMaterial::build(pem, peer, &provider).map_err(|e| match e {
            MaterialError::CertKey(source) => TlsError::CertKey {
                cert: files.cert_chain.clone(),
                key: files.key.clone(),
                source,
            },
            MaterialError::ClientVerifier(source) => TlsError::Verifier {
                path: files.ca.clone(),
                source,
            },
            MaterialError::NoRoots => TlsError::Verifier {
                path: files.ca.clone(),
                source: rustls::server::VerifierBuilderError::NoRootAnchors,
            },
        })
    })
}

/// SHA-256 of a certificate's DER, as lowercase hex: what the server logs to identify a peer.
/// `openssl x509 -noout -fingerprint -sha256` prints the same bytes (uppercase, with colons).
pub fn fingerprint(cert: &CertificateDer<'_>) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, cert.as_ref());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The parsed contents of a [`TlsFiles`].
struct Material {
    roots: RootCertStore,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl Material {
    fn load(files: &TlsFiles) -> Result<Self, TlsError> {
        let ca = certificates(&files.ca, "CA certificate file")?;
        let mut roots = RootCertStore::empty();
        for (index, cert) in ca.into_iter().enumerate() {
            roots.add(cert).map_err(|source| TlsError::BadCa {
                path: files.ca.clone(),
                index,
                source,
            })?;
        }
        let chain = certificates(&files.cert_chain, "certificate chain file")?;
        let bytes = read(&files.key, "private key file")?;
        let key = match PrivateKeyDer::from_pem_slice(&bytes) {
            Ok(key) => key,
            Err(pem::Error::NoItemsFound) => {
                return Err(TlsError::NoKey {
                    path: files.key.clone(),
                });
            }
            Err(source) => {
                return Err(TlsError::Pem {
                    role: "private key file",
                    path: files.key.clone(),
                    source,
                });
            }
        };
        Ok(Self { roots, chain, key })
    }
}

fn read(path: &Path, role: &'static str) -> Result<Vec<u8>, TlsError> {
    fs::read(path).map_err(|source| TlsError::Read {
        role,
        path: path.to_owned(),
        source,
    })
}

fn certificates(path: &Path, role: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(path, role)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::Pem {
            role,
            path: path.to_owned(),
            source,
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            role,
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

/// A throwaway certificate authority for tests and the dev cluster: it writes `ca.crt` into its
/// directory and issues certificates signed by it. Its key stays in memory. Not for production.
pub struct DevCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    dir: PathBuf,
}

impl std::fmt::Debug for DevCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevCa").field("dir", &self.dir).finish()
    }
}

impl DevCa {
    /// Generates a CA called `common_name` and writes its certificate to `dir/ca.crt`
    /// (creating `dir`).
    pub fn create(dir: &Path, common_name: &str) -> Result<Self, TlsError> {
        fs::create_dir_all(dir).map_err(|source| TlsError::Write {
            path: dir.to_owned(),
            source,
        })?;
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate()?)?;
        let ca = Self {
            issuer,
            dir: dir.to_owned(),
        };
        write_file(&ca.ca_path(), ca.issuer.pem().as_bytes(), false)?;
        Ok(ca)
    }

    /// `dir/ca.crt`.
    pub fn ca_path(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// Issues a certificate for `names` (DNS names; strings that parse as IP addresses become IP
    /// SANs), usable as server and as client, and writes `dir/{stem}.crt` and `dir/{stem}.key`
    /// (mode 0600). Returns the files a side loads, with this CA as its trust anchor.
    pub fn issue(&self, stem: &str, names: &[&str]) -> Result<TlsFiles, TlsError> {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names.clone())?;
        params.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(first) = names.first() {
            params
                .distinguished_name
                .push(DnType::CommonName, first.as_str());
        }
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        let files = TlsFiles {
            ca: self.ca_path(),
            cert_chain: self.dir.join(format!("{stem}.crt")),
            key: self.dir.join(format!("{stem}.key")),
        };
        write_file(&files.cert_chain, cert.pem().as_bytes(), false)?;
        write_file(&files.key, key.serialize_pem().as_bytes(), true)?;
        Ok(files)
    }
}

fn write_file(path: &Path, bytes: &[u8], secret: bool) -> Result<(), TlsError> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = secret;
    options
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|source| TlsError::Write {
            path: path.to_owned(),
            source,
        })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn dev_ca_files_load_into_both_configs() {
        let dir = tempfile::tempdir().unwrap();
        let ca = DevCa::create(dir.path(), "telemesh dev CA").unwrap();
        let agent = ca.issue("node-a", &["node-a", "127.0.0.1"]).unwrap();
        let coordinator = ca.issue("coordinator", &["coordinator"]).unwrap();
        let server = server_config(&agent).unwrap();
        let client = client_config(&coordinator).unwrap();
        assert_eq!(server.alpn_protocols, vec![ALPN.to_vec()]);
        assert_eq!(client.alpn_protocols, vec![ALPN.to_vec()]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&agent.key).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "key readable by others: {mode:o}");
        }
    }

    #[test]
    fn in_dir_names_the_secret_layout() {
        let files = TlsFiles::in_dir(Path::new("/etc/telemesh/quic"));
        assert_eq!(files.ca, Path::new("/etc/telemesh/quic/ca.crt"));
        assert_eq!(files.cert_chain, Path::new("/etc/telemesh/quic/tls.crt"));
        assert_eq!(files.key, Path::new("/etc/telemesh/quic/tls.key"));
    }

    #[test]
    fn errors_name_the_file_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let ca = DevCa::create(dir.path(), "ca").unwrap();
        let good = ca.issue("a", &["a"]).unwrap();

        let missing = TlsFiles {
            ca: dir.path().join("nope.crt"),
            ..good.clone()
        };
        let msg = server_config(&missing).unwrap_err().to_string();
        assert!(
            msg.contains("nope.crt") && msg.contains("CA certificate file"),
            "{msg}"
        );
        assert!(msg.contains("mount the QUIC TLS Secret"), "{msg}");

        // A key where the chain should be.
        let swapped = TlsFiles {
            cert_chain: good.key.clone(),
            ..good.clone()
        };
        let msg = client_config(&swapped).unwrap_err().to_string();
        assert!(
            msg.contains("a.key") && msg.contains("no PEM CERTIFICATE"),
            "{msg}"
        );

        let no_key = TlsFiles {
            key: good.cert_chain.clone(),
            ..good.clone()
        };
        let msg = client_config(&no_key).unwrap_err().to_string();
        assert!(
            msg.contains("a.crt") && msg.contains("no PEM private key"),
            "{msg}"
        );

        // A certificate with someone else's key.
        let other = ca.issue("b", &["b"]).unwrap();
        let mismatched = TlsFiles {
            key: other.key.clone(),
            ..good.clone()
        };
        let msg = server_config(&mismatched).unwrap_err().to_string();
        assert!(msg.contains("a.crt") && msg.contains("b.key"), "{msg}");

        let broken = dir.path().join("broken.crt");
        fs::write(&broken, "-----BEGIN CERTIFICATE-----\n!!!\n").unwrap();
        let msg = server_config(&TlsFiles {
            ca: broken,
            ..good.clone()
        })
        .unwrap_err()
        .to_string();
        assert!(
            msg.contains("broken.crt") && msg.contains("not valid PEM"),
            "{msg}"
        );
    }

    #[test]
    fn fingerprint_is_sha256_hex() {
        let der = CertificateDer::from(vec![1u8, 2, 3]);
        let fp = fingerprint(&der);
        assert_eq!(fp.len(), 64);
        assert_eq!(
            fp,
            "039058c6f2c0cb492c533b0a4d14ef77cc0f78abccced5287d84a1a2011cfb81"
        );
    }
}
