//! `telemesh-coordinator`: parses flags, starts logging, validates the configuration before
//! binding anything, runs the coordinator until SIGTERM/SIGINT.

use std::process::ExitCode;

use clap::Parser as _;
use telemesh_coordinator::config::{Cli, Config};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    telemesh_runtime::telemetry::init(cli.common.log_format, "info");
    let config = match Config::try_from(cli) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("invalid configuration: {e}");
            return ExitCode::from(64);
        }
    };
    let stop = CancellationToken::new();
    let coordinator = match telemesh_coordinator::start(config, stop.clone()).await {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "coordinator did not start");
            return ExitCode::FAILURE;
        }
    };
    telemesh_runtime::shutdown::wait_for_signal().await;
    tracing::info!("stopping");
    stop.cancel();
    coordinator.shutdown().await;
    ExitCode::SUCCESS
}
