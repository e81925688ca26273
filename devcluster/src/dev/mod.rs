//! `telemesh-sim dev`: the local dev cluster in one command, as `vault server -dev` is. It starts
//! sim with N simulated nodes (kubelet stand-ins, scheduler — or the real kube-scheduler with
//! `--kube-scheduler` — and controllers), one real agent process
//! per node and two coordinator replicas behind a Service stand-in, everything on loopback with
//! gossip sealed and QUIC under mutual TLS (keys and certificates generated into the state
//! directory); applies the TAS policy examples and a demo Deployment; plays the scenario and tells
//! the story as it is observed. Headless (`--for`), it exits 0 only if every step was seen.
//! With `--control-plane real` the API server, controllers and scheduler are the upstream
//! programs instead, Telemesh is installed from the chart's manifest and each process
//! authenticates as its own service account ([`real`]).
//!
//! It lives in the binary, not the library: it prints to the terminal, which libraries here do not.

mod actions;
mod binaries;
mod ports;
mod real;
mod rewards;
mod secret_file;
mod startup;
mod story;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt as _};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use telemesh_core::policy::TASPolicy;
use telemesh_runtime::gossip::keyring::Keyring;
use telemesh_runtime::quic::tls::DevCa;
use telemesh_sim::cluster::kubelet::{CRASH_BACKOFF, Kubelet};
use telemesh_sim::cluster::machines::{self, Machine};
use telemesh_sim::cluster::scenario::{Scenario, Telemetry};
use telemesh_sim::cluster::scheduler::upstream::{self, Render};
use telemesh_sim::cluster::scheduler::{self, config::SchedulerConfiguration};
use telemesh_sim::cluster::workload::Workloads;
use telemesh_sim::control_plane::ControlPlane;
use telemesh_sim::{Sim, SimConfig};

use self::binaries::binary;
use self::ports::{Member, Plan, Pool};
use self::real::{Chart, ComponentPods, ControlPlaneKind, Credential};
use self::rewards::Placements;
use self::story::{Story, StoryKind};
use telemesh_sim::processes::Processes;

/// The reward half-life in the dev cluster: short, so the rewards story shows recovery within
/// minutes (production default: 10m).
const DEV_REWARD_HALF_LIFE: Duration = Duration::from_secs(60);

/// Coordinator replicas, behind the Service stand-ins.
const COORDINATORS: usize = 2;

const DEFAULT_SCENARIO: &str = include_str!("../../dev/scenario.yaml");
const DEMO_DEPLOYMENT: &str = include_str!("../../dev/demo.yaml");
const DEV_SCHEDULER_CONFIG: &str =
    include_str!("../../../deploy/scheduler/kube-scheduler-config.dev.yaml");
const POLICIES: [&str; 2] = [
    include_str!("../../../deploy/examples/scheduling-policy.yaml"),
    include_str!("../../../deploy/examples/multirules-policy.yaml"),
];

/// `telemesh-sim dev` flags.
#[derive(Debug, clap::Args)]
pub struct DevArgs {
    /// Simulated nodes, one agent each (at least 2: evicted pods need somewhere to go).
    #[arg(long, env = "TELEMESH_DEV_NODES", default_value_t = 4, value_parser = clap::value_parser!(u8).range(2..=50))]
    nodes: u8,
    /// Run headless for at most this long (`90s`, `2m`): exit 0 once every step of the story is
    /// observed, 1 if the time runs out first. Without it, run until Ctrl-C.
    #[arg(long = "for", env = "TELEMESH_DEV_FOR", value_parser = telemesh_runtime::cli::parse_duration)]
    run_for: Option<Duration>,
    /// Where the API server listens (kubectl reaches it through the written kubeconfig). With
    /// `--control-plane real` and port 0: a random 127.a.b.c address of its own, port 6443.
    #[arg(long, env = "TELEMESH_DEV_LISTEN", default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// The control plane: `sim` (sim's in-memory API server with its scheduler stand-in and
    /// workload controllers) or `real` (etcd, kube-apiserver, kube-controller-manager and
    /// kube-scheduler v1.33+ from $TELEMESH_CONTROL_PLANE, else unpacked from
    /// ../shared/tools/control-plane/; their logs in control-plane/logs/). With `real`, Telemesh
    /// is installed from deploy/manifests/telemesh.yaml unchanged (RBAC, service accounts, the
    /// agent's node-scope admission policy), the coordinator Deployment scaled to 2, and each
    /// agent and coordinator process authenticates with its service account's token bound to
    /// the chart's pod it acts as (files in credentials/).
    #[arg(
        long,
        env = "TELEMESH_DEV_CONTROL_PLANE",
        value_enum,
        default_value = "sim"
    )]
    control_plane: ControlPlaneKind,
    /// State directory: kubeconfig, keys, certificates, node telemetry, logs. Emptied at start.
    #[arg(long, env = "TELEMESH_DEV_DIR", default_value = "target/dev")]
    dir: PathBuf,
    /// KubeSchedulerConfiguration whose extenders the scheduler calls; the coordinator Service
    /// stand-in listens at the first extender's address. Default: the dev registration in
    /// deploy/scheduler/ (http://127.0.0.1:9001/scheduler).
    #[arg(long, env = "TELEMESH_DEV_SCHEDULER_CONFIG")]
    scheduler_config: Option<PathBuf>,
    /// Where people and scripts reach the coordinators' JSON API: a Service stand-in that
    /// spreads connections over both replicas, as the extender's does. Fixed by default, like
    /// the API server's 6443, so the curl calls in the README work run after run.
    #[arg(
        long,
        env = "TELEMESH_DEV_API_SERVICE",
        default_value = "127.0.0.1:9080"
    )]
    api_service: SocketAddr,
    /// A scenario file instead of the built-in story's (devcluster/dev/scenario.yaml); the story's
    /// checklist is then only "cluster up" and "demo running", the rest is narrated as it comes.
    #[arg(long, env = "TELEMESH_DEV_SCENARIO")]
    scenario: Option<PathBuf>,
    /// Which story to tell: `health` (TAS policies), `rewards` (kubeRL's demo, measured),
    /// `rewards-start` (the same with nodes that cannot start the pods: no sandbox, no pull),
    /// `actions` (WAM's demo objects and the seed's calls through `/rpc`, each outcome checked)
    /// or `actions-objects` (WAM's demo objects only: send the calls yourself, e.g.
    /// scripts/actions-curl.sh).
    #[arg(long, env = "TELEMESH_DEV_STORY", value_enum, default_value = "health")]
    story: StoryKind,
    /// Give the agents and coordinators consecutive loopback ports from this one, the same on
    /// every run: coordinator-0 gets PORT (gossip), +1 (extender), +2 (API), +3 (HTTP),
    /// coordinator-1 the next four, then sim-node-i gets PORT+8+3i (gossip), +1 (HTTP), +2
    /// (QUIC). These are the ports asked for, not checked beforehand: a child that finds one
    /// taken is restarted on random free ports, and the dev cluster says so. Default: random
    /// free ports below the kernel's ephemeral range, never one twice.
    #[arg(long, env = "TELEMESH_DEV_FIRST_PORT")]
    first_port: Option<u16>,
    /// Where telemesh-agent and telemesh-coordinator are; default: beside telemesh-sim.
    #[arg(long, env = "TELEMESH_DEV_BIN_DIR")]
    bin_dir: Option<PathBuf>,
    /// Run this kube-scheduler binary (e.g. ../shared/tools/kube-scheduler, v1.32) with the
    /// scheduler configuration in place of sim's stand-in, to watch the real thing place pods.
    /// Its log is logs/kube-scheduler.log. Not with `--control-plane real`, which runs the
    /// control plane's own kube-scheduler.
    #[arg(long, env = "TELEMESH_DEV_KUBE_SCHEDULER")]
    kube_scheduler: Option<PathBuf>,
}

/// Runs the dev cluster; returns whether the story was complete (headless) or `true` after
/// Ctrl-C.
pub async fn run(args: DevArgs) -> anyhow::Result<bool> {
    let agent_bin = binary(args.bin_dir.as_deref(), "telemesh-agent")?;
    let coordinator_bin = binary(args.bin_dir.as_deref(), "telemesh-coordinator")?;
    let scheduler_text = match &args.scheduler_config {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("reading the scheduler configuration {}", path.display()))?,
        None => DEV_SCHEDULER_CONFIG.to_owned(),
    };
    let scheduler_config = SchedulerConfiguration::parse(&scheduler_text).with_context(|| {
        args.scheduler_config.as_ref().map_or_else(
            || "in the built-in dev configuration".to_owned(),
            |p| format!("in {}", p.display()),
        )
    })?;
    if let Some(path) = &args.kube_scheduler {
        anyhow::ensure!(
            args.control_plane == ControlPlaneKind::Sim,
            "--kube-scheduler replaces sim's scheduler stand-in; --control-plane real runs the \
             control plane's own kube-scheduler: drop one of the two"
        );
        anyhow::ensure!(
            path.is_file(),
            "--kube-scheduler {}: no such file",
            path.display()
        );
    }
    // sim's stand-in reports each placement; any other scheduler is read through the API.
    let stand_in_scheduler =
        args.control_plane == ControlPlaneKind::Sim && args.kube_scheduler.is_none();
    let chart = match args.control_plane {
        ControlPlaneKind::Sim => None,
        ControlPlaneKind::Real => Some(Chart::parse()?),
    };
    let service_addr = extender_address(&scheduler_config)?;
    let extender_url = scheduler_config
        .extenders
        .first()
        .map(|e| e.url_prefix.clone())
        .unwrap_or_default();
    let (scenario, built_in) = match &args.scenario {
        Some(path) => (Scenario::load(path)?, false),
        None => (Scenario::parse(DEFAULT_SCENARIO)?, true),
    };
    let nodes: Vec<String> = (0..args.nodes).map(|i| format!("sim-node-{i}")).collect();
    let dir = prepare_dir(&args.dir)?;
    let stop = CancellationToken::new();
    let mut processes = Processes::default();
    // Kept out here so the API server outlives every client of it during shutdown.
    let mut sim_slot = None;
    let mut plane_slot: Option<tokio::sync::Mutex<ControlPlane>> = None;
    let mut tasks = Vec::new();
    let outcome = async {
        let story = Story::new(args.run_for.is_none(), args.story, built_in, &nodes);
        story.say(&format!(
            "starting a dev cluster of {} nodes in {}{}",
            nodes.len(),
            dir.display(),
            match args.control_plane {
                ControlPlaneKind::Sim => "",
                ControlPlaneKind::Real => " on a real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)",
            }
        ));
        let service = tokio::net::TcpListener::bind(service_addr)
            .await
            .with_context(|| format!("the coordinator Service address {service_addr} (from the scheduler configuration) is taken; free it or pass --scheduler-config"))?;
        let api_service = tokio::net::TcpListener::bind(args.api_service)
            .await
            .with_context(|| format!("the coordinators' API Service address {} is taken; free it or pass --api-service", args.api_service))?;
        let api_service_addr = api_service.local_addr()?;
        let (client, workloads) = match args.control_plane {
            ControlPlaneKind::Sim => {
                let sim = sim_slot.insert(start_sim(&args, &dir).await?);
                let client = sim.client().await?;
                install_sim_prerequisites(&client).await?;
                (client, sim.workloads.clone())
            }
            ControlPlaneKind::Real => {
                let plane = real::start(args.listen, &dir).await?;
                let client = plane.client().await?;
                story.say(&format!(
                    "the control plane is up at {}; its logs: {}",
                    plane.url(),
                    plane.dir().join("logs").display()
                ));
                plane_slot = Some(tokio::sync::Mutex::new(plane));
                let machines: Vec<Machine> = nodes.iter().map(|n| Machine::standard(n)).collect();
                machines::register(&client, &machines).await?;
                tasks.push(tokio::spawn(machines::heartbeat(client.clone(), machines, stop.clone())));
                // sim serves its kubelets' ledger; here it lives in this process only.
                (client, Workloads::default())
            }
        };
        let kubeconfig = dir.join("kubeconfig");
        let telemetry = scenario.prepare(&dir.join("nodes"), &nodes)?;
        let (faults, faults_rx) = watch::channel(Vec::new());
        let (decisions, _) = broadcast::channel(1024);
        let pool = match args.first_port {
            Some(first) => Pool::loopback().consecutive(first),
            None => Pool::loopback(),
        };
        let mut plan = Plan::new(pool, COORDINATORS, nodes.len())?;
        // The real kube-scheduler, or sim's stand-in with the same configuration.
        let stand_in = stand_in_scheduler.then_some(scheduler_config);
        // Each kubelet keeps its pods' emptyDirs under its node's host root, where the agent reads.
        let kubelets = nodes
            .iter()
            .enumerate()
            .map(|(i, node)| Kubelet {
                node: node.clone(),
                index: u8::try_from(i).unwrap_or(u8::MAX),
                backoff: CRASH_BACKOFF,
                host_root: Some(dir.join("nodes").join(node)),
                workloads: workloads.clone(),
            })
            .collect();
        tasks.extend(start_kubelets(&client, kubelets, faults_rx, &stop));
        if args.control_plane == ControlPlaneKind::Sim {
            tasks.extend(start_sim_cluster(&client, stand_in, decisions.clone(), &stop));
        }
        if let Some(plane) = &plane_slot {
            let config = render_scheduler_config(&scheduler_text, &kubeconfig, &dir)?;
            let mut plane = plane.lock().await;
            plane.start_scheduler(&config)?;
            story.say(&format!(
                "the control plane's kube-scheduler places pods with {}; its log: {}",
                config.display(),
                plane.dir().join("logs/kube-scheduler.log").display()
            ));
        }
        if let Some(binary) = &args.kube_scheduler {
            let config = render_scheduler_config(&scheduler_text, &kubeconfig, &dir)?;
            let args = upstream::args(&config, &dir.join("tls/kube-scheduler"), 0);
            processes.spawn("kube-scheduler", binary, &args, &dir.join("logs/kube-scheduler.log"))?;
            story.say(&format!(
                "the real kube-scheduler ({}) places pods with {}; its log: {}",
                binary.display(),
                config.display(),
                dir.join("logs/kube-scheduler.log").display()
            ));
        }

        let keys = dir.join("gossip.keys");
        let key_line = Keyring::generate_line()?;
        secret_file::write(&keys, &format!("{key_line}\n"))?;
        let identities = match (&plane_slot, &chart) {
            (Some(plane), Some(chart)) => {
                let pods = install_telemesh(&story, &client, chart, &key_line, &nodes, COORDINATORS).await?;
                let (identities, credentials) = real_identities(&story, &client, &*plane.lock().await, chart, &pods, &nodes, &dir).await?;
                tasks.push(tokio::spawn(real::renew_tokens(client.clone(), credentials, stop.clone())));
                identities
            }
            _ => Identities::shared(&kubeconfig, nodes.len(), COORDINATORS),
        };
        let ca = DevCa::create(&dir.join("tls"), "telemesh-dev-ca")?;
        let agent_tls = nodes
            .iter()
            .map(|node| ca.issue(node, &[node.as_str(), "127.0.0.1"]))
            .collect::<Result<Vec<_>, _>>()?;
        let coordinator_tls = ca.issue("coordinator", &["telemesh-coordinator", "127.0.0.1"])?;
        for node in &nodes {
            // The node's own /proc is the machine's: collectors report this host's figures.
            let _ = std::os::unix::fs::symlink("/proc", dir.join("nodes").join(node).join("proc"));
        }
        let child_args = |plan: &Plan, member: Member| match member {
            Member::Agent(i) => agent_args(plan, i, &nodes[i], &dir, &identities.agents[i], &keys, &agent_tls[i]),
            Member::Coordinator(r) => {
                let mut args = coordinator_args(plan, r, &identities.coordinators[r], &keys, &coordinator_tls);
                args.extend(identities.coordinator_flags.iter().cloned());
                args
            }
        };
        // Coordinators first: their gossip addresses are the agents' seeds, and their
        // extender and API ports the Services' backends, so these settle (a child that cannot
        // bind restarted on fresh ports) before anything refers to them.
        let coordinator_specs: Vec<startup::Spec> = (0..COORDINATORS)
            .map(|r| startup::Spec {
                member: Member::Coordinator(r),
                name: format!("coordinator-{r}"),
                program: coordinator_bin.clone(),
                log: dir.join(format!("logs/coordinator-{r}.log")),
            })
            .collect();
        let agent_specs: Vec<startup::Spec> = nodes
            .iter()
            .enumerate()
            .map(|(i, node)| startup::Spec {
                member: Member::Agent(i),
                name: node.clone(),
                program: agent_bin.clone(),
                log: dir.join(format!("logs/agent-{node}.log")),
            })
            .collect();
        let start_children = async {
            startup::start(&mut processes, &mut plan, &coordinator_specs, child_args, |s| story.say(s)).await?;
            startup::start(&mut processes, &mut plan, &agent_specs, child_args, |s| story.say(s)).await
        };
        // Ctrl-C while they start stops those started so far too (below, after this block).
        tokio::select! {
            r = start_children => r?,
            () = interrupted() => {
                story.say("interrupted while starting: stopping every process this command started");
                return Ok(args.run_for.is_none());
            }
        }
        if !stand_in_scheduler {
            story.follow_filter_metrics(plan.coordinator_metrics());
        }
        let backends = plan.coordinators.iter().map(|c| c.extender).collect();
        tokio::spawn(telemesh_sim::cluster::service::serve(service, backends, stop.clone()));
        let backends = plan.coordinators.iter().map(|c| c.api).collect();
        tokio::spawn(telemesh_sim::cluster::service::serve(api_service, backends, stop.clone()));
        story.say(&format!(
            "{} agents (gossip sealed with a generated key, QUIC with mutual TLS) and 2 coordinators; \
             logs in {}",
            nodes.len(),
            dir.join("logs").display()
        ));
        story.say(&format!(
            "the coordinators' extender Service: {extender_url} (filter, prioritize, preempt; the scheduler calls it)"
        ));
        story.say(&format!(
            "the coordinators' JSON API Service: http://{api_service_addr} (curl http://{api_service_addr}/api/v1/nodes)"
        ));
        story.say(&format!(
            "the live cluster page: http://{api_service_addr}/ (open it in a browser; it updates itself)"
        ));

        story.say(&format!(
            "the API server is up: kubectl --kubeconfig {} get nodes,pods -A --show-labels",
            kubeconfig.display()
        ));
        story.say(&format!(
            "kubectl telemesh (docs/kubectl-plugin.md): PATH=\"{}:$PATH\" kubectl telemesh --kubeconfig {} --coordinator http://{api_service_addr} top nodes (also why POD -n NS, rewards, actions -w, move, swap, scale, jobs)",
            coordinator_bin.parent().unwrap_or(Path::new(".")).display(),
            kubeconfig.display()
        ));
        let deadline = args.run_for.map(|d| tokio::time::Instant::now() + d);
        // The measured stories pass only when they say so; a run the deadline cut short fails.
        let mut measured_met = args.story == StoryKind::Health;
        let play = async {
            story.wait_cluster_up(&plan.coordinator_apis(), &mut processes).await?;
            match args.story {
                StoryKind::Health => {
                    apply_demo(&client, args.control_plane == ControlPlaneKind::Sim).await?;
                    story.wait_demo_running(&client).await?;
                    let (happened, happened_rx) = broadcast::channel(64);
                    tokio::spawn(play_scenario(scenario, telemetry, faults, happened, stop.clone()));
                    story.follow(&client, happened_rx, decisions.subscribe(), &mut processes).await
                }
                StoryKind::Rewards | StoryKind::RewardsStart => {
                    let mut placed = if stand_in_scheduler {
                        Placements::Decisions(decisions.subscribe())
                    } else {
                        Placements::Api
                    };
                    let apis: Vec<_> = plan.coordinators.iter().map(|c| c.api).collect();
                    measured_met = if args.story == StoryKind::Rewards {
                        rewards::play(&story, &client, &faults, &mut placed, &mut processes, DEV_REWARD_HALF_LIFE, &apis).await?
                    } else {
                        rewards::play_start(&story, &client, &faults, &mut placed, &mut processes, DEV_REWARD_HALF_LIFE, &apis).await?
                    };
                    story.say("the story is complete");
                    if args.run_for.is_none() {
                        story.say("still running: Ctrl-C stops every process this command started");
                        std::future::pending::<()>().await;
                    }
                    Ok(true)
                }
                StoryKind::Actions => {
                    measured_met = actions::play(&story, &client, api_service_addr, nodes.len(), &mut processes).await?;
                    story.say(if measured_met {
                        "the story is complete: every action ended as it should"
                    } else {
                        "the story is complete, but not every action ended as it should (FAILED above)"
                    });
                    if args.run_for.is_none() {
                        story.say("still running: Ctrl-C stops every process this command started");
                        std::future::pending::<()>().await;
                    }
                    Ok(true)
                }
                StoryKind::ActionsObjects => {
                    measured_met = actions::objects_only(&story, &client, api_service_addr, nodes.len(), &kubeconfig).await?;
                    if args.run_for.is_none() {
                        story.say("still running: Ctrl-C stops every process this command started");
                        std::future::pending::<()>().await;
                    }
                    Ok(true)
                }
            }
        };
        let plane = plane_slot.as_ref();
        let complete = match deadline {
            Some(at) => tokio::select! {
                r = tokio::time::timeout_at(at, play) => r.unwrap_or(Ok(false))?,
                () = interrupted() => false,
                e = control_plane_exit(plane) => return Err(e),
            },
            None => {
                tokio::select! {
                    r = play => { r?; }
                    () = interrupted() => {}
                    e = control_plane_exit(plane) => return Err(e),
                }
                true
            }
        };
        if args.run_for.is_some() {
            Ok(story.report()? && measured_met)
        } else {
            story.say("interrupted: stopping every process this command started");
            Ok(complete)
        }
    }
    .await;
    stop.cancel();
    processes.stop_all().await;
    for task in tasks {
        if tokio::time::timeout(Duration::from_secs(2), task)
            .await
            .is_err()
        {
            tracing::debug!("an in-process component did not stop within 2s");
        }
    }
    if let Some(plane) = plane_slot {
        plane.into_inner().stop().await;
    }
    drop(sim_slot);
    outcome
}

/// Pending while the real control plane runs (or there is none); its error once one of its
/// programs exits.
async fn control_plane_exit(plane: Option<&tokio::sync::Mutex<ControlPlane>>) -> anyhow::Error {
    match plane {
        Some(plane) => real::watch_exit(plane).await,
        None => std::future::pending().await,
    }
}

/// Who each agent and coordinator process is to the API server.
struct Identities {
    /// Each node's agent's kubeconfig, in node order.
    agents: Vec<PathBuf>,
    coordinators: Vec<CoordinatorIdentity>,
    /// Flags every coordinator gets on top of the dev cluster's own.
    coordinator_flags: Vec<String>,
}

struct CoordinatorIdentity {
    kubeconfig: PathBuf,
    /// `--replica-name`: the pod it acts as on a real control plane (as the chart passes
    /// `$(POD_NAME)`), else `coordinator-<r>`.
    replica: String,
}

impl Identities {
    /// sim mode: everyone uses the admin kubeconfig (sim authorizes every request).
    fn shared(kubeconfig: &Path, agents: usize, coordinators: usize) -> Self {
        Self {
            agents: vec![kubeconfig.to_owned(); agents],
            coordinators: (0..coordinators)
                .map(|r| CoordinatorIdentity {
                    kubeconfig: kubeconfig.to_owned(),
                    replica: format!("coordinator-{r}"),
                })
                .collect(),
            coordinator_flags: Vec::new(),
        }
    }
}

/// Real mode: installs Telemesh from the chart (and the gossip key Secret it needs) and waits
/// until its pods run, one per process the dev cluster starts.
async fn install_telemesh(
    story: &Story,
    client: &Client,
    chart: &Chart,
    key_line: &str,
    nodes: &[String],
    coordinators: usize,
) -> anyhow::Result<ComponentPods> {
    real::install(client, chart, key_line, coordinators).await?;
    story.say(&format!(
        "installed Telemesh from deploy/manifests/telemesh.yaml (applied unchanged), the gossip \
         key Secret, and scaled Deployment {}/{} to {coordinators} (one pod per coordinator process)",
        chart.coordinator.namespace, chart.coordinator.name
    ));
    let pods = real::wait_component_pods(client, chart, nodes, coordinators).await?;
    story.say(&format!(
        "the chart's pods run (kubelet stand-ins; no container runs): agents {}; coordinators {}",
        pods.agents
            .iter()
            .map(|(n, p)| format!("{p} on {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        pods.coordinators.join(", ")
    ));
    Ok(pods)
}

/// Real mode: each process's kubeconfig, with its service account's token bound to the chart's
/// pod it acts as; and the credentials, for their renewal.
async fn real_identities(
    story: &Story,
    client: &Client,
    plane: &ControlPlane,
    chart: &Chart,
    pods: &ComponentPods,
    nodes: &[String],
    dir: &Path,
) -> anyhow::Result<(Identities, Vec<Credential>)> {
    let mut credentials = Vec::new();
    let mut agents = Vec::new();
    for node in nodes {
        let pod = pods
            .agents
            .get(node)
            .with_context(|| format!("no agent pod on {node}"))?;
        let credential = Credential::new(dir, &format!("agent-{node}"), &chart.agent, pod);
        credential.issue(client, plane).await?;
        agents.push(credential.kubeconfig.clone());
        credentials.push(credential);
    }
    let mut replicas = Vec::new();
    for (r, pod) in pods.coordinators.iter().enumerate() {
        let credential = Credential::new(dir, &format!("coordinator-{r}"), &chart.coordinator, pod);
        credential.issue(client, plane).await?;
        replicas.push(CoordinatorIdentity {
            kubeconfig: credential.kubeconfig.clone(),
            replica: pod.clone(),
        });
        credentials.push(credential);
    }
    story.say(&format!(
        "each agent authenticates as {}/{} and each coordinator as {}/{}, with a token bound to its pod ({})",
        chart.agent.namespace,
        chart.agent.service_account,
        chart.coordinator.namespace,
        chart.coordinator.service_account,
        dir.join("credentials").display()
    ));
    let identities = Identities {
        agents,
        coordinators: replicas,
        // The chart's leader Lease flags: its Role lets the coordinators write that Lease, in
        // that namespace, and no other (the coordinator's default namespace is `default`).
        coordinator_flags: chart
            .coordinator
            .args
            .iter()
            .filter(|a| a.starts_with("--leader-lease"))
            .cloned()
            .collect(),
    };
    Ok((identities, credentials))
}

/// Writes the scheduler configuration rendered for this dev cluster (`kubeconfig`, leader
/// election off) to `<dir>/kube-scheduler.yaml` and returns its path.
fn render_scheduler_config(
    template: &str,
    kubeconfig: &Path,
    dir: &Path,
) -> anyhow::Result<PathBuf> {
    let rendered = Render {
        kubeconfig: kubeconfig.to_owned(),
        ..Render::default()
    }
    .apply(template)?;
    let config = dir.join("kube-scheduler.yaml");
    std::fs::write(&config, rendered).with_context(|| format!("writing {}", config.display()))?;
    Ok(config)
}

/// Ctrl-C or SIGTERM: either way the dev cluster stops its children before it exits (they run
/// in their own process group, so nothing else stops them).
async fn interrupted() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch SIGTERM; only Ctrl-C stops the dev cluster cleanly");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

async fn play_scenario(
    scenario: Scenario,
    telemetry: Telemetry,
    faults: watch::Sender<Vec<telemesh_sim::cluster::kubelet::FaultRule>>,
    happened: broadcast::Sender<telemesh_sim::cluster::scenario::Happened>,
    stop: CancellationToken,
) {
    if let Err(e) = scenario.play(telemetry, faults, happened, stop).await {
        tracing::error!(error = format!("{e:#}"), "the scenario stopped");
    }
}

/// Empties the state directory of a previous run (only what a dev cluster writes there).
fn prepare_dir(dir: &Path) -> anyhow::Result<PathBuf> {
    for sub in ["nodes", "logs", "tls", "control-plane", "credentials"] {
        let path = dir.join(sub);
        if path.exists() {
            std::fs::remove_dir_all(&path)
                .with_context(|| format!("clearing {} from a previous run", path.display()))?;
        }
    }
    std::fs::create_dir_all(dir.join("logs"))
        .with_context(|| format!("creating {}", dir.display()))?;
    std::path::absolute(dir).with_context(|| format!("resolving {}", dir.display()))
}

fn extender_address(config: &SchedulerConfiguration) -> anyhow::Result<SocketAddr> {
    let Some(extender) = config.extenders.first() else {
        bail!(
            "the scheduler configuration registers no extender; the dev cluster needs the coordinator's"
        );
    };
    let uri: http::Uri = extender.url_prefix.parse().context("extender urlPrefix")?;
    let host = uri.host().unwrap_or("127.0.0.1");
    let port = uri.port_u16().unwrap_or(80);
    format!("{host}:{port}").parse().with_context(|| {
        format!(
            "the extender urlPrefix {} must name a loopback IP and port",
            extender.url_prefix
        )
    })
}

async fn start_sim(args: &DevArgs, dir: &Path) -> anyhow::Result<Sim> {
    let sim = Sim::start(SimConfig {
        listen: args.listen,
        tls: true,
        ..SimConfig::default()
    })
    .await?;
    // Nodes big enough for the demo; every node is its own kubelet's.
    telemesh_sim::nodes::create_nodes(&sim.server, usize::from(args.nodes))
        .map_err(|e| anyhow::anyhow!(e.message))
        .context("creating the simulated nodes")?;
    sim.write_kubeconfig(&dir.join("kubeconfig"))
        .context("writing the kubeconfig")?;
    Ok(sim)
}

/// A task per kubelet stand-in.
fn start_kubelets(
    client: &Client,
    kubelets: Vec<Kubelet>,
    faults: watch::Receiver<Vec<telemesh_sim::cluster::kubelet::FaultRule>>,
    stop: &CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    kubelets
        .into_iter()
        .map(|kubelet| tokio::spawn(kubelet.run(client.clone(), faults.clone(), stop.clone())))
        .collect()
}

/// What sim lacks of a control plane: its scheduler stand-in (unless the real kube-scheduler
/// runs) and the workload controllers.
fn start_sim_cluster(
    client: &Client,
    config: Option<SchedulerConfiguration>,
    decisions: broadcast::Sender<scheduler::Decision>,
    stop: &CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    if let Some(config) = config {
        let settings = scheduler::Settings {
            config,
            ..scheduler::Settings::default()
        };
        let (client2, stop2) = (client.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            if let Err(e) = scheduler::run(client2, settings, decisions, stop2).await {
                tracing::error!(error = format!("{e:#}"), "the scheduler stopped");
            }
        }));
    }
    tasks.push(tokio::spawn(telemesh_sim::cluster::controllers::run(
        client.clone(),
        stop.clone(),
    )));
    tasks
}

/// Installs one of our CRDs from its manifest.
async fn install_crd(client: &Client, yaml: &str, kind: &str) -> anyhow::Result<()> {
    let crd: CustomResourceDefinition =
        serde_yaml_ng::from_str(yaml).with_context(|| format!("the {kind} CRD"))?;
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .with_context(|| format!("installing the {kind} CRD"))?;
    Ok(())
}

/// What the coordinators need before they start, which on a real control plane the chart
/// installs: the WorkloadAction CRD (their executor watches WorkloadActions), the ScavengerJob
/// CRD (their ScavengerJob controller watches them) and the scavengers' PriorityClass.
async fn install_sim_prerequisites(client: &Client) -> anyhow::Result<()> {
    install_crd(
        client,
        telemesh_core::action::crd::CRD_YAML,
        "WorkloadAction",
    )
    .await?;
    install_crd(
        client,
        telemesh_core::scavenge::crd::CRD_YAML,
        "ScavengerJob",
    )
    .await?;
    let class: k8s_openapi::api::scheduling::v1::PriorityClass =
        serde_yaml_ng::from_str(telemesh_core::scavenge::crd::PRIORITY_CLASS_YAML)
            .context("the scavengers' PriorityClass")?;
    Api::<k8s_openapi::api::scheduling::v1::PriorityClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await
        .context("creating the scavengers' PriorityClass")?;
    Ok(())
}

/// Installs the TASPolicy CRD (unless `install_policy_crd` is false: the chart installed it),
/// the seed's two policy files and the demo Deployment.
async fn apply_demo(client: &Client, install_policy_crd: bool) -> anyhow::Result<()> {
    if install_policy_crd {
        install_crd(client, telemesh_core::policy::crd::CRD_YAML, "TASPolicy").await?;
    }
    let ns: Namespace = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "health-metric-demo"}
    }))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .context("creating namespace health-metric-demo")?;
    for text in POLICIES {
        let policy: TASPolicy = serde_yaml_ng::from_str(text).context("a TAS example policy")?;
        let namespace = policy.namespace().unwrap_or_default();
        Api::<TASPolicy>::namespaced(client.clone(), &namespace)
            .create(&PostParams::default(), &policy)
            .await
            .with_context(|| format!("applying TASPolicy {}", policy.name_any()))?;
    }
    let demo: Deployment =
        serde_yaml_ng::from_str(DEMO_DEPLOYMENT).context("the demo Deployment")?;
    Api::<Deployment>::namespaced(client.clone(), "health-metric-demo")
        .create(&PostParams::default(), &demo)
        .await
        .context("creating the demo Deployment")?;
    Ok(())
}

/// An agent's flags: its ports from `plan`, the coordinators (started and settled before any
/// agent) as its gossip seeds.
fn agent_args(
    plan: &Plan,
    i: usize,
    node: &str,
    dir: &Path,
    kubeconfig: &Path,
    keys: &Path,
    tls: &telemesh_runtime::quic::tls::TlsFiles,
) -> Vec<String> {
    let ports = &plan.agents[i];
    let host_root = dir.join("nodes").join(node);
    vec![
        format!("--node-name={node}"),
        format!("--host-root={}", host_root.display()),
        "--textfile-dir=/textfile".into(),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--gossip-listen={}", ports.gossip),
        format!("--gossip-seeds={}", plan.seeds()),
        format!("--gossip-key-file={}", keys.display()),
        format!("--http-listen={}", ports.http),
        format!("--quic-listen={}", ports.quic),
        format!("--quic-ca={}", tls.ca.display()),
        format!("--quic-cert={}", tls.cert_chain.display()),
        format!("--quic-key={}", tls.key.display()),
        // Quicker than production defaults so the stories fit in minutes.
        "--policy-interval=1s".into(),
        "--reward-interval=1s".into(),
        "--reward-start-grace=5s".into(),
        format!("--reward-half-life={}s", DEV_REWARD_HALF_LIFE.as_secs()),
        format!(
            "--reward-state-file={}",
            host_root.join("rewards").display()
        ),
        "--violation-grace=2s".into(),
        "--min-pod-age=5s".into(),
    ]
}

/// Coordinator replica `r`'s flags: its ports from `plan`. Its only gossip seed is itself (which
/// overrides any `TELEMESH_GOSSIP_SEEDS` it would inherit): the coordinators are the agents'
/// seeds, so each hears of every member, the other replica included, from the first agent that
/// reaches it; and a seed naming the other replica could go stale when that one is restarted on
/// fresh ports.
fn coordinator_args(
    plan: &Plan,
    r: usize,
    identity: &CoordinatorIdentity,
    keys: &Path,
    tls: &telemesh_runtime::quic::tls::TlsFiles,
) -> Vec<String> {
    let ports = &plan.coordinators[r];
    vec![
        format!("--replica-name={}", identity.replica),
        format!("--kubeconfig={}", identity.kubeconfig.display()),
        format!("--gossip-listen={}", ports.gossip),
        format!("--gossip-seeds={}", ports.gossip),
        format!("--gossip-key-file={}", keys.display()),
        format!("--extender-listen={}", ports.extender),
        format!("--api-listen={}", ports.api),
        // The seed's curl calls carry no token; the dev cluster says so on /readyz.
        "--api-auth=none".into(),
        format!("--http-listen={}", ports.http),
        format!("--quic-ca={}", tls.ca.display()),
        format!("--quic-cert={}", tls.cert_chain.display()),
        format!("--quic-key={}", tls.key.display()),
        format!("--reward-half-life={}s", DEV_REWARD_HALF_LIFE.as_secs()),
    ]
}
