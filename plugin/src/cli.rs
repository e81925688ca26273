//! The command line: kubectl's own flags for the kubeconfig, context and namespace, where the
//! coordinators' API is, and one subcommand per question or action.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Where the coordinators' JSON API answers by default: the dev cluster's API Service
/// (`scripts/dev.sh`), and what `kubectl port-forward svc/<release>-coordinator 9080:api` gives.
pub const DEFAULT_COORDINATOR: &str = "http://127.0.0.1:9080";

/// `kubectl telemesh`: the cluster as Telemesh's coordinators see it, seconds old, and workload
/// actions through their `/rpc` API.
#[derive(Debug, Parser)]
// A flag given twice takes its last value, as kubectl's flags do (scripts append overrides).
#[command(
    name = "kubectl-telemesh",
    bin_name = "kubectl telemesh",
    version,
    args_override_self = true
)]
pub struct Cli {
    /// Flags every subcommand takes.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// kubectl's flags, the output format and the coordinator's address.
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Path to the kubeconfig file (else $KUBECONFIG, else ~/.kube/config, as kubectl).
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (else its current context).
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// Namespace (else the context's, else `default`).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// Every namespace (actions, jobs, rewards).
    #[arg(short = 'A', long, global = true)]
    pub all_namespaces: bool,
    /// Output format.
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// The coordinators' JSON API (`--api-listen`, or its Service through
    /// `kubectl port-forward`).
    #[arg(long, global = true, env = "TELEMESH_COORDINATOR", default_value = DEFAULT_COORDINATOR)]
    pub coordinator: String,
    /// Bearer token for the coordinators' API (else the kubeconfig user's token, if any).
    #[arg(long, global = true, env = "TELEMESH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// `-o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Aligned columns, as kubectl prints.
    Table,
    /// JSON.
    Json,
    /// YAML.
    Yaml,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Live figures from the gossip view.
    Top {
        /// What to show.
        #[command(subcommand)]
        what: Top,
    },
    /// Which policies, filters, rewards and actions touched a pod's placement.
    Why {
        /// The pod (in -n's namespace).
        pod: String,
    },
    /// The learned rewards of a pod type on each node (every type without one).
    Rewards {
        /// `<type>` in -n's namespace, or `<namespace>/<type>`.
        pod_type: Option<String>,
    },
    /// WorkloadActions: what was asked, by whom, and where each stands.
    Actions {
        /// After listing, print each change as it happens.
        #[arg(short = 'w', long)]
        watch: bool,
    },
    /// Moves a pod to a node (`action.Move`): a new replica there, then the pod removed.
    Move {
        /// The pod.
        pod: String,
        /// The node.
        #[arg(long)]
        to: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Swaps two pods' nodes (`action.Swap`).
    Swap {
        /// One pod.
        x: String,
        /// The other pod.
        y: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Sets a workload's replica count (`action.Scale`).
    Scale {
        /// `deployment/NAME` or `statefulset/NAME`.
        workload: String,
        /// The new count.
        #[arg(long)]
        replicas: i32,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// ScavengerJobs: phase, interruptions, running time and unsaved work.
    Jobs,
}

/// `top`'s subjects.
#[derive(Debug, Subcommand)]
pub enum Top {
    /// Every node's figures: CPU, memory, pressure stall (PSI), cache and memory bandwidth
    /// (RDT), and how old they are.
    Nodes {
        /// Also a column for each of these gossiped metrics (`node_health_metric`, ...).
        #[arg(long = "metric", value_delimiter = ',')]
        metrics: Vec<String>,
    },
}

/// Whether an action command waits for the action to end.
#[derive(Debug, Clone, Args)]
pub struct WaitArgs {
    /// Wait until the action ends (exit 1 unless it Succeeded).
    #[arg(long)]
    pub wait: bool,
    /// How long --wait waits at most.
    #[arg(long, value_parser = telemesh_runtime::cli::parse_duration, default_value = "120s")]
    pub timeout: Duration,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use clap::CommandFactory as _;

    use super::*;

    #[test]
    fn cli_definition_is_valid() {
        Cli::command().debug_assert();
    }

    #[test]
    fn kubectl_flags_go_anywhere_and_default_to_the_dev_cluster() {
        let cli = Cli::try_parse_from([
            "kubectl-telemesh",
            "move",
            "web-1",
            "--to",
            "node-2",
            "-n",
            "ul",
            "--context=dev",
            "-o",
            "json",
            "--wait",
        ])
        .unwrap();
        assert_eq!(cli.global.namespace.as_deref(), Some("ul"));
        assert_eq!(cli.global.context.as_deref(), Some("dev"));
        assert_eq!(cli.global.output, Output::Json);
        assert_eq!(cli.global.coordinator, DEFAULT_COORDINATOR);
        let Command::Move { pod, to, wait } = cli.command else {
            panic!("not move")
        };
        assert_eq!((pod.as_str(), to.as_str()), ("web-1", "node-2"));
        assert!(wait.wait);
        assert_eq!(wait.timeout, Duration::from_secs(120));
    }

    #[test]
    fn top_nodes_takes_extra_metrics_and_actions_watch_is_dash_w() {
        let cli =
            Cli::try_parse_from(["k", "top", "nodes", "--metric", "node_health_metric,x"]).unwrap();
        let Command::Top {
            what: Top::Nodes { metrics },
        } = cli.command
        else {
            panic!("not top nodes")
        };
        assert_eq!(metrics, ["node_health_metric", "x"]);
        let cli = Cli::try_parse_from(["k", "actions", "-w", "-A"]).unwrap();
        assert!(matches!(cli.command, Command::Actions { watch: true }));
        assert!(cli.global.all_namespaces);
        assert!(
            Cli::try_parse_from(["k", "move", "p"]).is_err(),
            "--to is required"
        );
    }
}
