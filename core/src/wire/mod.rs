//! Binary messages between coordinator and agent, in a versioned envelope.
//!
//! A frame is `u32 length (big endian) | version u8 | postcard body`. `length` counts the version
//! byte and the body, so it is at least 1, and it may not exceed [`MAX_FRAME_LEN`]; readers check
//! it from the 4-byte header before they allocate anything ([`frame_len`]).
//!
//! postcard is not self-describing: a body only decodes with exactly the types that wrote it. So
//! the version byte says which types those were, and the rules are:
//! - the current types are version [`VERSION`]; receivers also decode version N-1 (down to
//!   [`OLDEST_VERSION`]) and convert it to the current types, in the `decode(version, body)` of
//!   each message type ([`Message::decode`]), which is the one place that dispatches on versions;
//! - any change to a message (a field, a variant, an order) is a new version, never
//!   `#[serde(default)]`: the old types are then frozen in a module of their own with a `From`
//!   conversion, and [`decode_upgraded`] is the N-1 arm;
//! - a body must be consumed exactly: trailing bytes are an error, not silently ignored, so a
//!   mislabelled version cannot decode by accident.

mod messages;

pub use messages::{Request, Response};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The protocol version this build writes.
pub const VERSION: u8 = 1;

/// The oldest protocol version this build still reads (N-1 once there is an N-1).
pub const OLDEST_VERSION: u8 = 1;

/// Bytes of the length header in front of every frame.
pub const HEADER_LEN: usize = 4;

/// The largest `length` a frame may declare (version byte plus body): 16 MiB.
pub const MAX_FRAME_LEN: u32 = 16 * 1024 * 1024;

/// What can be wrong with a frame, or with a message that should become one.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The header declares more bytes than the reader accepts.
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// Declared (or, when encoding, actual) length.
        len: u64,
        /// The limit in force.
        max: u32,
    },
    /// The header declares a length of zero: not even a version byte.
    #[error("empty frame: a frame holds at least its version byte")]
    Empty,
    /// Fewer bytes than the header declares.
    #[error("truncated frame: {needed} bytes needed, {got} present")]
    Truncated {
        /// Bytes the frame needs, header included.
        needed: usize,
        /// Bytes that were there.
        got: usize,
    },
    /// A version this build cannot read.
    #[error(
        "unsupported protocol version {got}: this build reads versions {oldest} to {current}; \
         upgrade the older side"
    )]
    UnsupportedVersion {
        /// The version byte received.
        got: u8,
        /// [`OLDEST_VERSION`].
        oldest: u8,
        /// [`VERSION`].
        current: u8,
    },
    /// The body does not decode as the types of its version.
    #[error("malformed version {version} {what}: {source}")]
    Decode {
        /// Version byte of the frame.
        version: u8,
        /// Which message was expected.
        what: &'static str,
        /// postcard's complaint.
        source: postcard::Error,
    },
    /// The body decoded but left bytes over.
    #[error("malformed version {version} {what}: {extra} trailing bytes")]
    TrailingBytes {
        /// Version byte of the frame.
        version: u8,
        /// Which message was expected.
        what: &'static str,
        /// Bytes left over.
        extra: usize,
    },
    /// The message could not be serialized.
    #[error("cannot encode a {what}: {source}")]
    Encode {
        /// Which message.
        what: &'static str,
        /// postcard's complaint.
        source: postcard::Error,
    },
}

/// A message type that travels in frames: it encodes at [`VERSION`] and decodes every version
/// from [`OLDEST_VERSION`] on.
pub trait Message: Sized + Serialize {
    /// What to call it in errors (`"request"`).
    const NAME: &'static str;

    /// Decodes a body written at `version`, converting older versions to the current types.
    fn decode(version: u8, body: &[u8]) -> Result<Self, WireError>;

    /// Encodes a whole frame (header, version, body) at [`VERSION`].
    fn encode(&self) -> Result<Vec<u8>, WireError> {
        encode_frame(VERSION, self, Self::NAME)
    }
}

/// Encodes `value` as a frame labelled `version`. Fails if the frame would exceed
/// [`MAX_FRAME_LEN`].
pub fn encode_frame<T: Serialize>(
    version: u8,
    value: &T,
    what: &'static str,
) -> Result<Vec<u8>, WireError> {
    let mut buf = Vec::with_capacity(64);
    buf.extend_from_slice(&[0; HEADER_LEN]);
    buf.push(version);
    let mut buf =
        postcard::to_extend(value, buf).map_err(|source| WireError::Encode { what, source })?;
    let len = buf.len() - HEADER_LEN;
    let declared = u32::try_from(len)
        .ok()
        .filter(|&l| l <= MAX_FRAME_LEN)
        .ok_or(WireError::TooLarge {
            len: len as u64,
            max: MAX_FRAME_LEN,
        })?;
    buf[..HEADER_LEN].copy_from_slice(&declared.to_be_bytes());
    Ok(buf)
}

/// Reads the length a frame header declares, rejecting zero and anything above `max` (at most
/// [`MAX_FRAME_LEN`]) before the caller allocates for the rest.
pub fn frame_len(header: [u8; HEADER_LEN], max: u32) -> Result<usize, WireError> {
    let max = max.min(MAX_FRAME_LEN);
    let len = u32::from_be_bytes(header);
    if len == 0 {
        return Err(WireError::Empty);
    }
    if len > max {
        return Err(WireError::TooLarge {
            len: u64::from(len),
            max,
        });
    }
    // A u32 of at most 16 MiB fits a usize on every platform we build for.
    usize::try_from(len).map_err(|_| WireError::TooLarge {
        len: u64::from(len),
        max,
    })
}

/// Splits what follows a header (`length` bytes) into version and body and decodes it.
pub fn decode_payload<M: Message>(payload: &[u8]) -> Result<M, WireError> {
    match payload.split_first() {
        Some((&version, body)) => M::decode(version, body),
        None => Err(WireError::Empty),
    }
}

/// Decodes the first frame in `bytes`; returns the message and how many bytes it took.
pub fn decode_frame<M: Message>(bytes: &[u8]) -> Result<(M, usize), WireError> {
    let header: [u8; HEADER_LEN] = bytes
        .get(..HEADER_LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or(WireError::Truncated {
            needed: HEADER_LEN,
            got: bytes.len(),
        })?;
    let len = frame_len(header, MAX_FRAME_LEN)?;
    let end = HEADER_LEN + len;
    let payload = bytes.get(HEADER_LEN..end).ok_or(WireError::Truncated {
        needed: end,
        got: bytes.len(),
    })?;
    Ok((decode_payload(payload)?, end))
}

/// Decodes a body as `T`, requiring every byte to be used.
pub fn decode_body<T: DeserializeOwned>(
    version: u8,
    body: &[u8],
    what: &'static str,
) -> Result<T, WireError> {
    let (value, rest) =
        postcard::take_from_bytes::<T>(body).map_err(|source| WireError::Decode {
            version,
            what,
            source,
        })?;
    if rest.is_empty() {
        Ok(value)
    } else {
        Err(WireError::TrailingBytes {
            version,
            what,
            extra: rest.len(),
        })
    }
}

/// The N-1 arm of a `decode`: decodes a body with the frozen older types `Old` and converts it
/// to the current types.
pub fn decode_upgraded<Old, New>(
    version: u8,
    body: &[u8],
    what: &'static str,
) -> Result<New, WireError>
where
    Old: DeserializeOwned + Into<New>,
{
    decode_body::<Old>(version, body, what).map(Into::into)
}

/// The error for a version byte no arm of a `decode` handles.
pub fn unsupported(version: u8) -> WireError {
    WireError::UnsupportedVersion {
        got: version,
        oldest: OLDEST_VERSION,
        current: VERSION,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::pod::PodFigures;

    fn pods(n: usize) -> Vec<PodFigures> {
        (0..n)
            .map(|i| PodFigures {
                namespace: "default".into(),
                name: format!("pod-{i}"),
                uid: format!("uid-{i}"),
                at_unix_ms: 1_700_000_000_000 + i as u64,
                cpu_usage_usec: Some(1000 * i as u64),
                memory_bytes: if i % 2 == 0 { Some(4096) } else { None },
                cpu_pressure_some_avg10: Some(0.25),
                ..PodFigures::default()
            })
            .collect()
    }

    fn samples() -> (Vec<Request>, Vec<Response>) {
        (
            vec![Request::Ping { nonce: u64::MAX }, Request::PodTelemetry],
            vec![
                Response::Pong {
                    nonce: 7,
                    node_name: "node-a".into(),
                    agent_version: "0.1.0".into(),
                },
                Response::PodTelemetry {
                    node_name: "node-a".into(),
                    pods: pods(3),
                },
                Response::PodTelemetry {
                    node_name: String::new(),
                    pods: vec![],
                },
                Response::Error {
                    message: "no figures yet".into(),
                },
            ],
        )
    }

    #[test]
    fn messages_round_trip() {
        let (requests, responses) = samples();
        for r in requests {
            let frame = r.encode().unwrap();
            assert_eq!(frame[HEADER_LEN], VERSION);
            assert_eq!(
                u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize,
                frame.len() - HEADER_LEN
            );
            assert_eq!(decode_frame::<Request>(&frame).unwrap(), (r, frame.len()));
        }
        for r in responses {
            let frame = r.encode().unwrap();
            assert_eq!(decode_frame::<Response>(&frame).unwrap(), (r, frame.len()));
        }
    }

    #[test]
    fn ping_frame_is_byte_exact() {
        // Pins the format: header, version, variant index 0, varint nonce.
        let frame = Request::Ping { nonce: 300 }.encode().unwrap();
        assert_eq!(frame, [0, 0, 0, 4, 1, 0, 0xac, 0x02]);
        assert_eq!(Request::PodTelemetry.encode().unwrap(), [0, 0, 0, 2, 1, 1]);
    }

    #[test]
    fn frames_decode_back_to_back() {
        let mut bytes = Request::Ping { nonce: 1 }.encode().unwrap();
        bytes.extend(Request::PodTelemetry.encode().unwrap());
        let (first, used) = decode_frame::<Request>(&bytes).unwrap();
        let (second, _) = decode_frame::<Request>(&bytes[used..]).unwrap();
        assert_eq!(first, Request::Ping { nonce: 1 });
        assert_eq!(second, Request::PodTelemetry);
    }

    #[test]
    fn oversized_frames_are_rejected_from_the_header() {
        let header = (MAX_FRAME_LEN + 1).to_be_bytes();
        assert!(matches!(
            frame_len(header, MAX_FRAME_LEN),
            Err(WireError::TooLarge { len, .. }) if len == u64::from(MAX_FRAME_LEN) + 1
        ));
        // A smaller limit (the server's for requests) applies too; a larger one is capped.
        assert!(frame_len(100u32.to_be_bytes(), 64).is_err());
        assert!(frame_len(u32::MAX.to_be_bytes(), u32::MAX).is_err());
        // Only the header is there: the error comes before any attempt to read the body.
        let mut bytes = header.to_vec();
        bytes.push(VERSION);
        assert!(matches!(
            decode_frame::<Request>(&bytes),
            Err(WireError::TooLarge { .. })
        ));
        assert!(matches!(
            frame_len([0; 4], MAX_FRAME_LEN),
            Err(WireError::Empty)
        ));
    }

    #[test]
    fn oversized_messages_are_not_encoded() {
        let big = Response::Error {
            message: "x".repeat(MAX_FRAME_LEN as usize),
        };
        assert!(matches!(big.encode(), Err(WireError::TooLarge { .. })));
    }

    #[test]
    fn truncated_frames_are_rejected() {
        let frame = Response::PodTelemetry {
            node_name: "node-a".into(),
            pods: pods(3),
        }
        .encode()
        .unwrap();
        for cut in 0..frame.len() {
            let err = decode_frame::<Response>(&frame[..cut]).unwrap_err();
            assert!(
                matches!(err, WireError::Truncated { .. } | WireError::Empty),
                "cut at {cut}: {err}"
            );
        }
        // A header that claims fewer bytes than the body needs: the body is cut short.
        let mut short = frame.clone();
        let len = u32::try_from(frame.len() - HEADER_LEN - 1).unwrap();
        short[..4].copy_from_slice(&len.to_be_bytes());
        assert!(matches!(
            decode_frame::<Response>(&short),
            Err(WireError::Decode { version: 1, .. })
        ));
    }

    #[test]
    fn trailing_bytes_are_rejected() {
        let mut frame = Request::PodTelemetry.encode().unwrap();
        frame.push(0);
        frame[..4].copy_from_slice(&3u32.to_be_bytes());
        let err = decode_frame::<Request>(&frame).unwrap_err();
        assert!(
            matches!(err, WireError::TrailingBytes { extra: 1, .. }),
            "{err}"
        );
    }

    #[test]
    fn unknown_versions_are_rejected_clearly() {
        let mut frame = Request::Ping { nonce: 1 }.encode().unwrap();
        frame[HEADER_LEN] = 9;
        let err = decode_frame::<Request>(&frame).unwrap_err();
        assert!(matches!(err, WireError::UnsupportedVersion { got: 9, .. }));
        assert_eq!(
            err.to_string(),
            "unsupported protocol version 9: this build reads versions 1 to 1; upgrade the older side"
        );
        let mut frame = Response::Error {
            message: "m".into(),
        }
        .encode()
        .unwrap();
        frame[HEADER_LEN] = 2;
        assert!(matches!(
            decode_frame::<Response>(&frame),
            Err(WireError::UnsupportedVersion { got: 2, .. })
        ));
    }

    #[test]
    fn garbage_bodies_are_errors_not_panics() {
        for body in [
            &[][..],
            &[7],
            &[0],
            &[0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        ] {
            assert!(Request::decode(VERSION, body).is_err());
        }
        for body in [&[][..], &[9], &[1, 0x80], &[1, 5, b'a'], &[0, 1, 0xff]] {
            assert!(Response::decode(VERSION, body).is_err());
        }
        // A claimed vector of a billion pods in a few bytes fails without allocating for them.
        let body = [1, 0, 0xff, 0xff, 0xff, 0xff, 0x03];
        assert!(Response::decode(VERSION, &body).is_err());
    }

    /// A version 0 that never shipped, to show the N-1 arm is wired: its `Pong` lacked
    /// `agent_version`. [`Response::decode`] has a `#[cfg(test)]` arm for it.
    pub(crate) mod v0 {
        use crate::pod::PodFigures;

        /// Frozen version-0 response.
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        pub(crate) enum Response {
            Pong {
                nonce: u64,
                node_name: String,
            },
            PodTelemetry {
                node_name: String,
                pods: Vec<PodFigures>,
            },
            Error {
                message: String,
            },
        }

        impl From<Response> for super::Response {
            fn from(old: Response) -> Self {
                match old {
                    Response::Pong { nonce, node_name } => Self::Pong {
                        nonce,
                        node_name,
                        agent_version: "unknown (protocol version 0)".into(),
                    },
                    Response::PodTelemetry { node_name, pods } => {
                        Self::PodTelemetry { node_name, pods }
                    }
                    Response::Error { message } => Self::Error { message },
                }
            }
        }
    }

    #[test]
    fn older_versions_decode_through_the_compatibility_arm() {
        let old = v0::Response::Pong {
            nonce: 42,
            node_name: "node-a".into(),
        };
        let frame = encode_frame(0, &old, "response").unwrap();
        let (decoded, _) = decode_frame::<Response>(&frame).unwrap();
        assert_eq!(
            decoded,
            Response::Pong {
                nonce: 42,
                node_name: "node-a".into(),
                agent_version: "unknown (protocol version 0)".into(),
            }
        );
        let old = v0::Response::PodTelemetry {
            node_name: "node-b".into(),
            pods: pods(2),
        };
        let (decoded, _) =
            decode_frame::<Response>(&encode_frame(0, &old, "response").unwrap()).unwrap();
        assert_eq!(
            decoded,
            Response::PodTelemetry {
                node_name: "node-b".into(),
                pods: pods(2),
            }
        );
        // Why the label matters: the same version-0 bytes read as version 1 do not decode.
        let mut mislabelled = encode_frame(
            0,
            &v0::Response::Pong {
                nonce: 42,
                node_name: "node-a".into(),
            },
            "response",
        )
        .unwrap();
        mislabelled[HEADER_LEN] = 1;
        assert!(decode_frame::<Response>(&mislabelled).is_err());
    }
}
