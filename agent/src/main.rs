//! `telemesh-agent`: parse flags, start logging, validate the configuration before binding any
//! port, run the agent until SIGTERM or Ctrl-C, and leave the gossip cleanly.

use std::process::ExitCode;

use clap::Parser as _;
use telemesh_agent::config::{Cli, Config};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    telemesh_core::telemetry::init(cli.common.log_format, "info");
    let config = match Config::try_from(cli) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "invalid configuration");
            return ExitCode::from(64); // EX_USAGE
        }
    };
    let stop = CancellationToken::new();
    let agent = match telemesh_agent::start(config, stop.clone()).await {
        Ok(a) => a,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "agent failed to start");
            return ExitCode::FAILURE;
        }
    };
    telemesh_core::shutdown::wait_for_signal().await;
    tracing::info!("stopping: leaving the gossip");
    agent.shutdown().await;
    ExitCode::SUCCESS
}
