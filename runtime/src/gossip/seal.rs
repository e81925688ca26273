//! Sealing and opening gossip datagrams with ChaCha20-Poly1305 (ring).
//!
//! Frame version 2 (written by default):
//! `version(1) = 2 | sent_ms(8, big-endian Unix ms) | nonce(12) | ciphertext | tag(16)`, 37 bytes
//! over the plaintext. The nonce is 96 random bits from the operating system; the additional
//! authenticated data is the cluster id, then the version byte and the send time, so a
//! datagram from another cluster opens with no key even when the keys match, and nobody can
//! change the time without the key. The send time and the nonce are what replay protection
//! ([`super::replay`]) and clock-skew estimation ([`super::clock`]) read.
//!
//! Frame version 1 (the earlier builds'): `version(1) = 1 | nonce(12) | ciphertext | tag(16)`,
//! the cluster id as additional data, as memberlist/Serf's encryption version 1. It carries no
//! time, so it cannot be checked for replays.
//!
//! **Rolling upgrade** ([`V1Frames`], `--gossip-v1-frames`). Members that read only version 1
//! drop version 2 (`bad_version`), so an upgrade from them takes three rollouts, the same
//! install/use/remove steps as a key rotation, each rolled out to every member before the next:
//! `send` (write v1, read both: old and new members talk), `accept` (write v2, read both: old
//! members are gone), then `refuse` (the default: v2 only, every datagram replay-checked).
//! While v1 frames are accepted, captured v1 datagrams can be replayed; they are counted
//! (`telemesh_*_gossip_v1_frames_total`) so operators see when the last old member is gone.
//!
//! The primary key seals; opening tries every key of the keyring in order. Random nonces stay
//! safe while a key seals fewer than about 2^32 datagrams in the whole cluster; rotate keys well
//! before that (see the report in `benches/gossip.rs` for datagram rates).

use std::sync::{Arc, RwLock};

use ring::aead::{Aad, NONCE_LEN, Nonce};
use ring::rand::{SecureRandom, SystemRandom};

use super::keyring::Keyring;

/// The frame version this build writes by default.
pub const FRAME_VERSION: u8 = 2;

/// The earlier frame version, without send time (see [`V1Frames`]).
pub const FRAME_VERSION_V1: u8 = 1;

/// Tag length of ChaCha20-Poly1305.
pub const TAG_LEN: usize = 16;

/// Bytes of the send time in a version 2 frame.
pub const TIME_LEN: usize = 8;

/// Bytes a version 2 frame adds to its plaintext.
pub const OVERHEAD: usize = 1 + TIME_LEN + NONCE_LEN + TAG_LEN;

/// Bytes a version 1 frame adds to its plaintext.
pub const OVERHEAD_V1: usize = 1 + NONCE_LEN + TAG_LEN;

/// Largest UDP payload over IPv4, and so the largest frame sent.
pub const MAX_DATAGRAM: usize = 65_507;

/// What a member does with version 1 frames (a rolling upgrade from builds without replay
/// protection; see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum V1Frames {
    /// Write version 2, drop version 1 (the default).
    #[default]
    Refuse,
    /// Write version 2, open version 1 too (second upgrade step).
    Accept,
    /// Write version 1, open both (first upgrade step: old members read what this one sends).
    Send,
}

/// Why a datagram was not opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// Shorter than a frame with an empty plaintext.
    #[error("datagram of {len} bytes is shorter than a sealed frame")]
    TooShort {
        /// Its length.
        len: usize,
    },
    /// A frame version this build does not know, or version 1 while it is refused.
    #[error(
        "sealed frame version {version} is not read here (this build reads {FRAME_VERSION}, and 1 \
         with --gossip-v1-frames accept or send); upgrade the member or finish the rollout"
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

/// The replay-relevant header of an opened version 2 frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// When the sender sealed it, in Unix ms by the sender's clock.
    pub sent_ms: u64,
    /// Its nonce, unique per datagram.
    pub nonce: u128,
}

/// An opened frame.
#[derive(Debug, PartialEq, Eq)]
pub struct Opened<'a> {
    /// The plaintext.
    pub plain: &'a [u8],
    /// Send time and nonce; `None` for a version 1 frame.
    pub stamp: Option<Stamp>,
}

/// Seals with the primary key, opens with any key. Clones share the keyring, so replacing it on
/// one clone replaces it for all (a key rotation without restart).
#[derive(Clone)]
pub struct Sealer {
    keyring: Arc<RwLock<Keyring>>,
    aad: Arc<[u8]>,
    rng: SystemRandom,
    v1: V1Frames,
}

// === impl Sealer ===

impl Sealer {
    /// Creates a sealer; `aad` (the cluster id) is authenticated with every frame. Version 1
    /// frames are refused.
    pub fn new(keyring: Keyring, aad: impl Into<Vec<u8>>) -> Self {
        Self {
            keyring: Arc::new(RwLock::new(keyring)),
            aad: aad.into().into(),
            rng: SystemRandom::new(),
            v1: V1Frames::Refuse,
        }
    }

    /// The same sealer with another treatment of version 1 frames.
    pub fn with_v1_frames(mut self, v1: V1Frames) -> Self {
        self.v1 = v1;
        self
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

    /// Seals `plaintext` sent at `sent_ms` (Unix ms, the local clock) into `out` (cleared
    /// first) as one frame: version 2, or version 1 with [`V1Frames::Send`].
    pub fn seal(&self, plaintext: &[u8], sent_ms: u64, out: &mut Vec<u8>) -> Result<(), SealError> {
        let v1 = self.v1 == V1Frames::Send;
        let header_len = if v1 { 1 } else { 1 + TIME_LEN };
        let len = plaintext.len() + header_len + NONCE_LEN + TAG_LEN;
        if len > MAX_DATAGRAM {
            return Err(SealError::TooLarge { len });
        }
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).map_err(|_| SealError::Random)?;
        out.clear();
        out.reserve(len);
        if v1 {
            out.push(FRAME_VERSION_V1);
        } else {
            out.push(FRAME_VERSION);
            out.extend_from_slice(&sent_ms.to_be_bytes());
        }
        let aad = self.aad_for(&out[..header_len]);
        out.extend_from_slice(&nonce);
        let body = header_len + NONCE_LEN;
        out.extend_from_slice(plaintext);
        let tag = self
            .keyring()
            .primary()
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&aad),
                &mut out[body..],
            )
            // ChaCha20-Poly1305 fails only past 256 GiB; the length is checked above.
            .map_err(|_| SealError::TooLarge { len })?;
        out.extend_from_slice(tag.as_ref());
        Ok(())
    }

    /// Additional data of a frame: the cluster id, then (version 2) the version and send time.
    fn aad_for(&self, header: &[u8]) -> Vec<u8> {
        let mut aad = Vec::with_capacity(self.aad.len() + header.len());
        aad.extend_from_slice(&self.aad);
        if header.len() > 1 {
            aad.extend_from_slice(header);
        }
        aad
    }

    /// Opens `frame` into `out` (cleared first) and returns the plaintext with its stamp.
    pub fn open<'a>(&self, frame: &[u8], out: &'a mut Vec<u8>) -> Result<Opened<'a>, OpenError> {
        let too_short = OpenError::TooShort { len: frame.len() };
        if frame.len() < OVERHEAD_V1 {
            return Err(too_short);
        }
        let &version = frame.first().ok_or(too_short)?;
        let header_len = match version {
            FRAME_VERSION => 1 + TIME_LEN,
            FRAME_VERSION_V1 if self.v1 != V1Frames::Refuse => 1,
            _ => return Err(OpenError::BadVersion { version }),
        };
        if frame.len() < header_len + NONCE_LEN + TAG_LEN {
            return Err(too_short);
        }
        let (header, rest) = frame.split_at(header_len);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let mut nonce_bytes = [0u8; NONCE_LEN];
        nonce_bytes.copy_from_slice(nonce);
        let stamp = (version == FRAME_VERSION).then(|| {
            let mut time = [0u8; TIME_LEN];
            time.copy_from_slice(&header[1..]);
            let mut wide = [0u8; 16];
            wide[16 - NONCE_LEN..].copy_from_slice(&nonce_bytes);
            Stamp {
                sent_ms: u64::from_be_bytes(time),
                nonce: u128::from_be_bytes(wide),
            }
        });
        let aad = self.aad_for(header);
        let keyring = self.keyring();
        for key in keyring.openers() {
            // Opening overwrites the buffer even when it fails, so each try starts from a copy.
            out.clear();
            out.extend_from_slice(sealed);
            let opened = key
                .open_in_place(
                    Nonce::assume_unique_for_key(nonce_bytes),
                    Aad::from(&aad),
                    out,
                )
                .map(|plain| plain.len());
            if let Ok(len) = opened {
                out.truncate(len);
                return Ok(Opened { plain: out, stamp });
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

    const T: u64 = 1_767_225_600_123;

    fn ring_of(keys: &[u8]) -> Keyring {
        let keys: Vec<[u8; 32]> = keys.iter().map(|k| [*k; 32]).collect();
        Keyring::from_keys(&keys).unwrap()
    }

    fn open_plain(sealer: &Sealer, frame: &[u8]) -> Result<Vec<u8>, OpenError> {
        let mut out = Vec::new();
        sealer.open(frame, &mut out).map(|o| o.plain.to_vec())
    }

    #[test]
    fn sealed_frames_open_to_the_plaintext_with_their_stamp() {
        let sealer = Sealer::new(ring_of(&[1]), "mesh");
        for len in [0usize, 1, 1400, MAX_DATAGRAM - OVERHEAD] {
            let plain: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut frame = Vec::new();
            sealer.seal(&plain, T, &mut frame).unwrap();
            assert_eq!(frame.len(), len + OVERHEAD);
            assert_eq!(frame[0], FRAME_VERSION);
            let mut out = Vec::new();
            let opened = sealer.open(&frame, &mut out).unwrap();
            assert_eq!(opened.plain, &plain[..]);
            let stamp = opened.stamp.unwrap();
            assert_eq!(stamp.sent_ms, T);
            assert_eq!(stamp.nonce.to_be_bytes()[4..], frame[9..21]);
        }
    }

    #[test]
    fn nonces_differ_between_frames() {
        let sealer = Sealer::new(ring_of(&[1]), "mesh");
        let (mut a, mut b) = (Vec::new(), Vec::new());
        sealer.seal(b"same", T, &mut a).unwrap();
        sealer.seal(b"same", T, &mut b).unwrap();
        assert_ne!(a[9..21], b[9..21]);
        assert_ne!(a, b);
    }

    #[test]
    fn oversize_plaintexts_are_refused() {
        let sealer = Sealer::new(ring_of(&[1]), "mesh");
        let plain = vec![0u8; MAX_DATAGRAM - OVERHEAD + 1];
        assert_eq!(
            sealer.seal(&plain, T, &mut Vec::new()),
            Err(SealError::TooLarge {
                len: MAX_DATAGRAM + 1
            })
        );
    }

    #[test]
    fn tampered_frames_and_times_do_not_open() {
        let sealer = Sealer::new(ring_of(&[1]), "mesh");
        let mut frame = Vec::new();
        sealer.seal(b"heartbeat 42", T, &mut frame).unwrap();
        for i in 1..frame.len() {
            let mut bad = frame.clone();
            bad[i] ^= 0x01;
            assert_eq!(
                open_plain(&sealer, &bad),
                Err(OpenError::NoKeyOpens),
                "byte {i}"
            );
        }
        let mut bad = frame.clone();
        bad[0] = 3;
        assert_eq!(
            open_plain(&sealer, &bad),
            Err(OpenError::BadVersion { version: 3 })
        );
    }

    #[test]
    fn truncated_frames_do_not_open() {
        let sealer = Sealer::new(ring_of(&[1]), "mesh");
        let mut frame = Vec::new();
        sealer.seal(b"x", T, &mut frame).unwrap();
        for len in 0..OVERHEAD {
            assert_eq!(
                open_plain(&sealer, &frame[..len]),
                Err(OpenError::TooShort { len })
            );
        }
        assert_eq!(
            open_plain(&sealer, &frame[..frame.len() - 1]),
            Err(OpenError::NoKeyOpens)
        );
    }

    #[test]
    fn wrong_key_or_cluster_does_not_open() {
        let mut frame = Vec::new();
        Sealer::new(ring_of(&[1]), "mesh")
            .seal(b"x", T, &mut frame)
            .unwrap();
        assert_eq!(
            open_plain(&Sealer::new(ring_of(&[2]), "mesh"), &frame),
            Err(OpenError::NoKeyOpens)
        );
        assert_eq!(
            open_plain(&Sealer::new(ring_of(&[1]), "other"), &frame),
            Err(OpenError::NoKeyOpens)
        );
    }

    #[test]
    fn every_key_opens_and_only_the_primary_seals() {
        let rotating = Sealer::new(ring_of(&[2, 1]), "mesh");
        let old = Sealer::new(ring_of(&[1]), "mesh");
        let new = Sealer::new(ring_of(&[2]), "mesh");
        let mut frame = Vec::new();
        old.seal(b"from old", T, &mut frame).unwrap();
        assert_eq!(open_plain(&rotating, &frame).unwrap(), b"from old");
        rotating.seal(b"from rotating", T, &mut frame).unwrap();
        assert_eq!(open_plain(&new, &frame).unwrap(), b"from rotating");
        assert_eq!(open_plain(&old, &frame), Err(OpenError::NoKeyOpens));
    }

    #[test]
    fn replacing_the_keyring_reaches_every_clone() {
        let a = Sealer::new(ring_of(&[1]), "mesh");
        let b = a.clone();
        a.replace_keyring(ring_of(&[2]));
        let mut frame = Vec::new();
        b.seal(b"x", T, &mut frame).unwrap();
        assert!(open_plain(&Sealer::new(ring_of(&[2]), "mesh"), &frame).is_ok());
    }

    /// A version 1 frame as the earlier builds sealed it: no time, the cluster id as the only
    /// additional data.
    fn v1_frame(key: u8, plain: &[u8]) -> Vec<u8> {
        let sealer = Sealer::new(ring_of(&[key]), "mesh").with_v1_frames(V1Frames::Send);
        let mut frame = Vec::new();
        sealer.seal(plain, T, &mut frame).unwrap();
        frame
    }

    #[test]
    fn version_1_frames_keep_the_earlier_layout() {
        let frame = v1_frame(1, b"old");
        assert_eq!(frame[0], FRAME_VERSION_V1);
        assert_eq!(frame.len(), 3 + OVERHEAD_V1);
        // Opened by hand as the earlier builds did: nonce after the version, aad = cluster id.
        let key = ring_of(&[1]);
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&frame[1..13]);
        let mut body = frame[13..].to_vec();
        let plain = key
            .primary()
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(b"mesh"),
                &mut body,
            )
            .unwrap();
        assert_eq!(plain, b"old");
    }

    #[test]
    fn version_1_frames_open_only_while_the_upgrade_allows_them() {
        let frame = v1_frame(1, b"old member");
        let refuse = Sealer::new(ring_of(&[1]), "mesh");
        assert_eq!(
            open_plain(&refuse, &frame),
            Err(OpenError::BadVersion { version: 1 })
        );
        for mode in [V1Frames::Accept, V1Frames::Send] {
            let sealer = refuse.clone().with_v1_frames(mode);
            let mut out = Vec::new();
            let opened = sealer.open(&frame, &mut out).unwrap();
            assert_eq!(opened.plain, b"old member");
            assert_eq!(opened.stamp, None);
        }
        // Accepting members still write version 2, and sending ones read it.
        let mut v2 = Vec::new();
        refuse
            .clone()
            .with_v1_frames(V1Frames::Accept)
            .seal(b"new", T, &mut v2)
            .unwrap();
        assert_eq!(v2[0], FRAME_VERSION);
        let sending = refuse.with_v1_frames(V1Frames::Send);
        assert_eq!(open_plain(&sending, &v2).unwrap(), b"new");
    }
}
