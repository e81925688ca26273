//! Logging set-up: tracing with a `RUST_LOG` filter, as text or JSON lines on stderr.

use tracing_subscriber::{EnvFilter, fmt, prelude::*};

use crate::cli::LogFormat;

/// Installs the global tracing subscriber; `default_filter` applies when `RUST_LOG` is unset.
///
/// Calling it twice is harmless (the second call keeps the first subscriber), so tests that
/// start several components in one process may each call it.
pub fn init(format: LogFormat, default_filter: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let registry = tracing_subscriber::registry().with(filter);
    let result = match format {
        LogFormat::Text => registry
            .with(fmt::layer().with_writer(std::io::stderr))
            .try_init(),
        LogFormat::Json => registry
            .with(fmt::layer().json().with_writer(std::io::stderr))
            .try_init(),
    };
    // An error only means a subscriber is already installed: keep it.
    drop(result);
}
