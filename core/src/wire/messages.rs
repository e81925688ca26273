//! The request and response types of protocol version 1.
//!
//! postcard writes an enum variant as its index, so the order of variants and of fields is part
//! of the format: append nothing, reorder nothing here without a new version (see [`super`]).

use super::{Message, WireError, decode_body, unsupported};
use crate::pod::PodFigures;

/// What the coordinator asks an agent. Each QUIC stream carries one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Request {
    /// Liveness and identity check; sent right after connecting.
    Ping {
        /// Echoed in the [`Response::Pong`].
        nonce: u64,
    },
    /// The latest per-pod figures of the agent's node.
    PodTelemetry,
}

/// What an agent answers.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Response {
    /// Answer to [`Request::Ping`].
    Pong {
        /// The nonce of the ping.
        nonce: u64,
        /// The node the agent runs on.
        node_name: String,
        /// The agent's build version.
        agent_version: String,
    },
    /// Answer to [`Request::PodTelemetry`].
    PodTelemetry {
        /// The node the figures are from.
        node_name: String,
        /// One entry per pod on the node.
        pods: Vec<PodFigures>,
    },
    /// The request could not be served (malformed, unsupported version, agent not ready).
    Error {
        /// Why, for a human.
        message: String,
    },
}

impl Request {
    /// The variant's name, for logs and errors.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Ping { .. } => "Ping",
            Self::PodTelemetry => "PodTelemetry",
        }
    }
}

impl Response {
    /// The variant's name, for logs and errors.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Pong { .. } => "Pong",
            Self::PodTelemetry { .. } => "PodTelemetry",
            Self::Error { .. } => "Error",
        }
    }
}

impl Message for Request {
    const NAME: &'static str = "request";

    fn decode(version: u8, body: &[u8]) -> Result<Self, WireError> {
        match version {
            1 => decode_body(version, body, Self::NAME),
            // When version 2 lands: `1 => decode_upgraded::<v1::Request, Self>(...)`.
            other => Err(unsupported(other)),
        }
    }
}

impl Message for Response {
    const NAME: &'static str = "response";

    fn decode(version: u8, body: &[u8]) -> Result<Self, WireError> {
        match version {
            1 => decode_body(version, body, Self::NAME),
            // The N-1 arm, exercised by a test-only version 0 until a real version 2 exists.
            #[cfg(test)]
            0 => super::decode_upgraded::<super::tests::v0::Response, Self>(
                version,
                body,
                Self::NAME,
            ),
            other => Err(unsupported(other)),
        }
    }
}
