//! Command-line groups shared by every Telemesh binary (`#[command(flatten)]` them in).

use std::path::PathBuf;

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, for log pipelines.
    Json,
}

/// Flags every binary takes.
#[derive(Debug, Clone, clap::Args)]
pub struct CommonArgs {
    /// Path to a kubeconfig; else in-cluster config, else $KUBECONFIG.
    #[arg(long, env = "TELEMESH_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Log line format.
    #[arg(long, env = "TELEMESH_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}
