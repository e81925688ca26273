//! Sealing and opening gossip datagrams with ChaCha20-Poly1305 (ring).
//!
//! Frame: `version(1) | nonce(12) | ciphertext | tag(16)`, 29 bytes over the plaintext, the same
//! framing as memberlist/Serf's encryption version 1. Version 1 means ChaCha20-Poly1305 with a
//! random 96-bit nonce from the operating system. The cluster id is the additional
//! authenticated data, so a datagram from another cluster opens with no key even when the keys
//! match. The primary key seals; opening tries every key of the keyring in order.
//!
//! Replays are not detected: chitchat's versions and heartbeats are monotonic, so a replayed
//! datagram carries nothing new (Serf makes the same argument). Random nonces stay safe while a
//! key seals fewer than about 2^32 datagrams in the whole cluster; rotate keys well before that
//! (see the report in `benches/gossip.rs` for datagram rates).

use std::sync::{Arc, RwLock};

use ring::aead::{Aad, NONCE_LEN, Nonce};
use ring::rand::{SecureRandom, SystemRandom};

use super::keyring::Keyring;

/// The frame version this build writes and reads.
pub const FRAME_VERSION: u8 = 1;

/// Tag length of ChaCha20-Poly1305.
pub const TAG_LEN: usize = 16;

/// Bytes a sealed frame adds to its plaintext.
pub const OVERHEAD: usize = 1 + NONCE_LEN + TAG_LEN;

/// Largest UDP payload over IPv4, and so the largest frame sent.
pub const MAX_DATAGRAM: usize = 65_507;

/// Why a datagram was not opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// Shorter than a frame with an empty plaintext.
    #[error("datagram of {len} bytes is shorter than a sealed frame ({OVERHEAD} bytes)")]
    TooShort {
        /// Its length.
        len: usize,
    },
    /// A frame version this build does not know.
    #[error(
        "sealed frame version {version} is unknown (this build reads {FRAME_VERSION}); upgrade the member"
    )]
    BadVersion {
        /// The version byte.
        version: u8,
    },
    /// No key of the keyring authenticates it: a wrong key, another cluster, or tampering.
    #[error(
        "no key of the keyring opens the datagram; check that every member has the same key file and cluster id"
    )]
    NoKeyOpens,
}

/// Why a datagram was not sealed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// The frame would exceed one UDP datagram.
    #[error("sealed frame of {len} bytes exceeds one UDP datagram ({MAX_DATAGRAM} bytes)")]
    TooLarge {
        /// Length the frame would have.
        len: usize,
    },
    /// The random generator failed to produce a nonce.
    #[error("the system random generator failed to make a nonce; check getrandom availability")]
    Random,
}

/// Seals with the primary key, opens with any key. Clones share the keyring, so replacing it on
/// one clone replaces it for all (a key rotation without restart).
#[derive(Clone)]
pub struct Sealer {
    keyring: Arc<RwLock<Keyring>>,
    aad: Arc<[u8]>,
    rng: SystemRandom,
}

// === impl Sealer ===

impl Sealer {
    /// Creates a sealer; `aad` (the cluster id) is authenticated with every frame.
    pub fn new(keyring: Keyring, aad: impl Into<Vec<u8>>) -> Self {
        Self {
            keyring: Arc::new(RwLock::new(keyring)),
            aad: aad.into().into(),
            rng: SystemRandom::new(),
        }
    }

    /// Replaces the keyring for this sealer and all its clones.
    pub fn replace_keyring(&self, keyring: Keyring) {
        *self.keyring.write().unwrap_or_else(|e| e.into_inner()) = keyring;
    }

    /// Returns the current keyring.
    pub fn keyring(&self) -> Keyring {
        self.keyring
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Seals `plaintext` into `out` (cleared first) as one frame.
    pub fn seal(&self, plaintext: &[u8], out: &mut Vec<u8>) -> Result<(), SealError> {
        let len = plaintext.len() + OVERHEAD;
        if len > MAX_DATAGRAM {
            return Err(SealError::TooLarge { len });
        }
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).map_err(|_| SealError::Random)?;
        out.clear();
        out.reserve(len);
        out.push(FRAME_VERSION);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(plaintext);
        let tag = self
            .keyring()
            .primary()
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&*self.aad),
                &mut out[1 + NONCE_LEN..],
            )
            // ChaCha20-Poly1305 fails only past 256 GiB; the length is checked above.
            .map_err(|_| SealError::TooLarge { len })?;
        out.extend_from_slice(tag.as_ref());
        Ok(())
    }

    /// Opens `frame` into `out` (cleared first) and returns the plaintext.
    pub fn open<'a>(&self, frame: &[u8], out: &'a mut Vec<u8>) -> Result<&'a [u8], OpenError> {
        if frame.len() < OVERHEAD {
            return Err(OpenError::TooShort { len: frame.len() });
        }
        let (&version, rest) = frame
            .split_first()
            .ok_or(OpenError::TooShort { len: frame.len() })?;
        if version != FRAME_VERSION {
            return Err(OpenError::BadVersion { version });
        }
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let mut nonce_bytes = [0u8; NONCE_LEN];
        nonce_bytes.copy_from_slice(nonce);
        let keyring = self.keyring();
        for key in keyring.openers() {
            // Opening overwrites the buffer even when it fails, so each try starts from a copy.
            out.clear();
            out.extend_from_slice(sealed);
            let opened = key
                .open_in_place(
                    Nonce::assume_unique_for_key(nonce_bytes),
                    Aad::from(&*self.aad),
                    out,
                )
                .map(|plain| plain.len());
            if let Ok(len) = opened {
                out.truncate(len);
                return Ok(out);
            }
        }
        out.clear();
        Err(OpenError::NoKeyOpens)
    }
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer")
            .field("keyring", &self.keyring())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ring_of(keys: &[u8]) -> Keyring {
        let keys: Vec<[u8; 32]> = keys.iter().map(|k| [*k; 32]).collect();
        Keyring::from_keys(&keys).unwrap()
    }

    #[test]
    fn sealed_frames_open_to_the_plaintext() {
        let sealer = Sealer::new(ring_of(&[1]), "mesh");
        for len in [0usize, 1, 1400, MAX_DATAGRAM - OVERHEAD] {
            let plain: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut frame = Vec::new();
            sealer.seal(&plain, &mut frame).unwrap();
            assert_eq!(frame.len(), len + OVERHEAD);
            assert_eq!(frame[0], FRAME_VERSION);
            let mut out = Vec::new();
            assert_eq!(sealer.open(&frame, &mut out).unwrap(), &plain[..]);
        }
    }

    #[test]
    fn nonces_differ_between_frames() {
        let sealer = Sealer::new(ring_of(&[1]), "mesh");
        let (mut a, mut b) = (Vec::new(), Vec::new());
        sealer.seal(b"same", &mut a).unwrap();
        sealer.seal(b"same", &mut b).unwrap();
        assert_ne!(a[1..13], b[1..13]);
        assert_ne!(a, b);
    }

    #[test]
    fn oversize_plaintexts_are_refused() {
        let sealer = Sealer::new(ring_of(&[1]), "mesh");
        let plain = vec![0u8; MAX_DATAGRAM - OVERHEAD + 1];
        assert_eq!(
            sealer.seal(&plain, &mut Vec::new()),
            Err(SealError::TooLarge {
                len: MAX_DATAGRAM + 1
            })
        );
    }

    #[test]
    fn tampered_frames_do_not_open() {
        let sealer = Sealer::new(ring_of(&[1]), "mesh");
        let mut frame = Vec::new();
        sealer.seal(b"heartbeat 42", &mut frame).unwrap();
        let mut out = Vec::new();
        for i in 1..frame.len() {
            let mut bad = frame.clone();
            bad[i] ^= 0x01;
            assert_eq!(
                sealer.open(&bad, &mut out),
                Err(OpenError::NoKeyOpens),
                "byte {i}"
            );
        }
        let mut bad = frame.clone();
        bad[0] = 2;
        assert_eq!(
            sealer.open(&bad, &mut out),
            Err(OpenError::BadVersion { version: 2 })
        );
    }

    #[test]
    fn truncated_frames_do_not_open() {
        let sealer = Sealer::new(ring_of(&[1]), "mesh");
        let mut frame = Vec::new();
        sealer.seal(b"x", &mut frame).unwrap();
        let mut out = Vec::new();
        for len in 0..OVERHEAD {
            assert_eq!(
                sealer.open(&frame[..len], &mut out),
                Err(OpenError::TooShort { len })
            );
        }
        assert_eq!(
            sealer.open(&frame[..frame.len() - 1], &mut out),
            Err(OpenError::NoKeyOpens)
        );
    }

    #[test]
    fn wrong_key_or_cluster_does_not_open() {
        let mut frame = Vec::new();
        Sealer::new(ring_of(&[1]), "mesh")
            .seal(b"x", &mut frame)
            .unwrap();
        let mut out = Vec::new();
        assert_eq!(
            Sealer::new(ring_of(&[2]), "mesh").open(&frame, &mut out),
            Err(OpenError::NoKeyOpens)
        );
        assert_eq!(
            Sealer::new(ring_of(&[1]), "other").open(&frame, &mut out),
            Err(OpenError::NoKeyOpens)
        );
    }

    #[test]
    fn every_key_opens_and_only_the_primary_seals() {
        let rotating = Sealer::new(ring_of(&[2, 1]), "mesh");
        let old = Sealer::new(ring_of(&[1]), "mesh");
        let new = Sealer::new(ring_of(&[2]), "mesh");
        let mut out = Vec::new();
        let mut frame = Vec::new();
        old.seal(b"from old", &mut frame).unwrap();
        assert_eq!(rotating.open(&frame, &mut out).unwrap(), b"from old");
        rotating.seal(b"from rotating", &mut frame).unwrap();
        assert_eq!(new.open(&frame, &mut out).unwrap(), b"from rotating");
        assert_eq!(old.open(&frame, &mut out), Err(OpenError::NoKeyOpens));
    }

    #[test]
    fn replacing_the_keyring_reaches_every_clone() {
        let a = Sealer::new(ring_of(&[1]), "mesh");
        let b = a.clone();
        a.replace_keyring(ring_of(&[2]));
        let mut frame = Vec::new();
        b.seal(b"x", &mut frame).unwrap();
        assert!(
            Sealer::new(ring_of(&[2]), "mesh")
                .open(&frame, &mut Vec::new())
                .is_ok()
        );
    }
}
