//! The gossip keyring: the symmetric keys that seal gossip datagrams, read from a file mounted
//! from a Kubernetes Secret.
//!
//! The file holds one base64 32-byte key per line, primary first. Blank lines and lines starting
//! with `#` are skipped. The primary seals; every key opens. Rotating without downtime takes
//! three steps, each rolled out to every member before the next: **install** the new key second
//! (`old`, `new`), **use** it by moving it first (`new`, `old`), **remove** the old one (`new`).
//! Each step can talk to the one before it. Keep a single key outside rotations: a datagram that
//! opens with no key costs one trial decryption per key.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use ring::aead::{CHACHA20_POLY1305, LessSafeKey, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

/// Length of a key in bytes.
pub const KEY_LEN: usize = 32;

/// Most keys a keyring may hold.
pub const MAX_KEYS: usize = 8;

/// Why a keyring could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum KeyringError {
    /// The file could not be read.
    #[error(
        "cannot read gossip key file {path}: {source}; mount the Secret or pass --insecure-gossip"
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// No key line at all.
    #[error("gossip key file {path} holds no key; expected one base64 line per key, primary first")]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// A line that is not base64.
    #[error(
        "gossip key file {path} line {line} is not base64: {source}; \
         make a key with `head -c 32 /dev/urandom | base64`"
    )]
    Base64 {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The decoding error.
        #[source]
        source: base64::DecodeError,
    },
    /// A line that decodes to the wrong number of bytes.
    #[error(
        "gossip key file {path} line {line} decodes to {len} bytes; each key must be exactly \
         {KEY_LEN} bytes: make one with `head -c 32 /dev/urandom | base64`"
    )]
    KeyLength {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// Decoded length.
        len: usize,
    },
    /// The same key twice.
    #[error(
        "gossip key file {path} line {line} repeats the key on line {first}; list each key once"
    )]
    Duplicate {
        /// The file.
        path: PathBuf,
        /// 1-based line number of the repeat.
        line: usize,
        /// 1-based line number of the first occurrence.
        first: usize,
    },
    /// More than [`MAX_KEYS`] keys.
    #[error(
        "gossip key file {path} holds {count} keys; keep at most {MAX_KEYS} \
         (more than one is only needed during a rotation)"
    )]
    TooMany {
        /// The file.
        path: PathBuf,
        /// How many keys it holds.
        count: usize,
    },
    /// The operating system's random generator failed.
    #[error("the system random generator failed; check that /dev/urandom (getrandom) is available")]
    Random,
}

/// Results of this module.
pub type Result<T, E = KeyringError> = std::result::Result<T, E>;

impl KeyringError {
    /// A bounded label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Read { .. } => "read",
            Self::Empty { .. } => "empty",
            Self::Base64 { .. } => "base64",
            Self::KeyLength { .. } => "key_length",
            Self::Duplicate { .. } => "duplicate",
            Self::TooMany { .. } => "too_many",
            Self::Random => "random",
        }
    }
}

/// One key, ready for ChaCha20-Poly1305.
struct Key {
    aead: LessSafeKey,
    fingerprint: String,
}

/// The keys that seal and open gossip datagrams, primary first. Cheap to clone.
#[derive(Clone)]
pub struct Keyring {
    keys: Arc<[Key]>,
}

// === impl Keyring ===

impl Keyring {
    /// Reads a key file (a mounted Secret).
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| KeyringError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses key-file text; `origin` names the file in errors.
    pub fn parse(text: &str, origin: impl AsRef<Path>) -> Result<Self> {
        let path = || origin.as_ref().to_owned();
        let mut raw: Vec<(usize, Vec<u8>)> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line_no = i + 1;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(line)
                .map_err(|source| KeyringError::Base64 {
                    path: path(),
                    line: line_no,
                    source,
                })?;
            if bytes.len() != KEY_LEN {
                return Err(KeyringError::KeyLength {
                    path: path(),
                    line: line_no,
                    len: bytes.len(),
                });
            }
            if let Some((first, _)) = raw.iter().find(|(_, b)| *b == bytes) {
                return Err(KeyringError::Duplicate {
                    path: path(),
                    line: line_no,
                    first: *first,
                });
            }
            raw.push((line_no, bytes));
        }
        if raw.is_empty() {
            return Err(KeyringError::Empty { path: path() });
        }
        if raw.len() > MAX_KEYS {
            return Err(KeyringError::TooMany {
                path: path(),
                count: raw.len(),
            });
        }
        Self::build(raw.iter().map(|(_, b)| b.as_slice()), &path())
    }

    /// Builds a keyring from raw keys, primary first (tests and generated dev keys).
    pub fn from_keys(keys: &[[u8; KEY_LEN]]) -> Result<Self> {
        let text: String = keys
            .iter()
            .map(|k| base64::engine::general_purpose::STANDARD.encode(k) + "\n")
            .collect();
        Self::parse(&text, "<in-memory keyring>")
    }

    fn build<'a>(keys: impl Iterator<Item = &'a [u8]>, path: &Path) -> Result<Self> {
        let keys = keys
            .map(|bytes| {
                let unbound = UnboundKey::new(&CHACHA20_POLY1305, bytes).map_err(|_| {
                    KeyringError::KeyLength {
                        path: path.to_owned(),
                        line: 0,
                        len: bytes.len(),
                    }
                })?;
                Ok(Key {
                    aead: LessSafeKey::new(unbound),
                    fingerprint: fingerprint(bytes),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { keys: keys.into() })
    }

    /// Makes a fresh random key as a key-file line (the dev cluster generates its own keys).
    pub fn generate_line() -> Result<String> {
        let mut key = [0u8; KEY_LEN];
        SystemRandom::new()
            .fill(&mut key)
            .map_err(|_| KeyringError::Random)?;
        Ok(base64::engine::general_purpose::STANDARD.encode(key))
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Always false: a keyring holds at least one key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Short fingerprints of the keys, primary first, safe to log (first 8 hex digits of the
    /// key's SHA-256).
    pub fn fingerprints(&self) -> Vec<&str> {
        self.keys.iter().map(|k| k.fingerprint.as_str()).collect()
    }

    /// The key that seals.
    pub(crate) fn primary(&self) -> &LessSafeKey {
        // A keyring is never empty: `parse` refuses that and `keys` is never changed after.
        &self.keys[0].aead
    }

    /// Every key, primary first: the ones tried when opening.
    pub(crate) fn openers(&self) -> impl Iterator<Item = &LessSafeKey> {
        self.keys.iter().map(|k| &k.aead)
    }
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyring")
            .field("fingerprints", &self.fingerprints())
            .finish()
    }
}

fn fingerprint(key: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, key);
    digest.as_ref()[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const K1: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    const K2: &str = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=";

    fn parse(text: &str) -> Result<Keyring> {
        Keyring::parse(text, "/etc/telemesh/gossip.keys")
    }

    #[test]
    fn keys_are_read_primary_first_skipping_blanks_and_comments() {
        let ring = parse(&format!("# rotation 2026-11\n\n  {K2}  \n{K1}\n")).unwrap();
        assert_eq!(ring.len(), 2);
        let only_k2 = parse(K2).unwrap();
        assert_eq!(ring.fingerprints()[0], only_k2.fingerprints()[0]);
        assert!(
            !format!("{ring:?}").contains(K2),
            "Debug must not print keys"
        );
    }

    #[test]
    fn an_empty_file_says_what_to_put_in_it() {
        let err = parse("# nothing yet\n\n").unwrap_err();
        assert_eq!(err.kind(), "empty");
        assert_eq!(
            err.to_string(),
            "gossip key file /etc/telemesh/gossip.keys holds no key; expected one base64 line per \
             key, primary first"
        );
    }

    #[test]
    fn bad_lines_are_named() {
        let err = parse(&format!("{K1}\nnot base64!\n")).unwrap_err();
        assert!(matches!(err, KeyringError::Base64 { line: 2, .. }), "{err}");
        assert!(err.to_string().contains("head -c 32 /dev/urandom | base64"));

        let short = base64::engine::general_purpose::STANDARD.encode([7u8; 16]);
        let err = parse(&short).unwrap_err();
        assert!(
            matches!(
                err,
                KeyringError::KeyLength {
                    line: 1,
                    len: 16,
                    ..
                }
            ),
            "{err}"
        );

        let err = parse(&format!("{K1}\n{K2}\n{K1}\n")).unwrap_err();
        assert!(
            matches!(
                err,
                KeyringError::Duplicate {
                    line: 3,
                    first: 1,
                    ..
                }
            ),
            "{err}"
        );

        let many: Vec<[u8; KEY_LEN]> = (0..=MAX_KEYS as u8).map(|i| [i; KEY_LEN]).collect();
        assert_eq!(Keyring::from_keys(&many).unwrap_err().kind(), "too_many");
    }

    #[test]
    fn a_missing_file_says_to_mount_the_secret() {
        let err = Keyring::load("/nonexistent/gossip.keys").unwrap_err();
        assert_eq!(err.kind(), "read");
        assert!(
            err.to_string()
                .ends_with("mount the Secret or pass --insecure-gossip")
        );
    }

    #[test]
    fn generated_lines_parse() {
        let line = Keyring::generate_line().unwrap();
        assert_eq!(parse(&line).unwrap().len(), 1);
        assert_ne!(line, Keyring::generate_line().unwrap());
    }

    #[test]
    fn load_reads_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys");
        std::fs::write(&path, format!("{K1}\n{K2}\n")).unwrap();
        assert_eq!(Keyring::load(&path).unwrap().len(), 2);
    }
}
