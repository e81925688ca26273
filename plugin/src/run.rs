//! Runs a parsed command line: fetches what the subcommand needs (Kubernetes objects through
//! the kubeconfig, the view from the coordinators' API), hands it to the pure modules and
//! writes their answer.

use std::io::Write;
use std::time::Duration;

use anyhow::Context as _;
use futures::{StreamExt as _, TryStreamExt as _};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::{Resource, ResourceExt as _};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use telemesh_core::action::WorkloadAction;
use telemesh_core::policy::TASPolicy;
use telemesh_core::scavenge::crd::ScavengerJob;

use crate::cli::{Cli, Command, GlobalArgs, Output, Top, WaitArgs};
use crate::coordinator::{CallError, Coordinator};
use crate::{act, actions, jobs, kubeconf, output, rewards, top, why};

/// How a command ended when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// As asked.
    Done,
    /// An action waited for ended other than Succeeded, or did not end in time.
    Unsuccessful,
}

/// Runs `cli`, writing its answer to `out` and warnings to `err`.
pub async fn run(cli: Cli, out: &mut dyn Write, err: &mut dyn Write) -> anyhow::Result<Outcome> {
    let ctx = Ctx::new(cli.global).await?;
    let mut io = Io { out, err };
    match cli.command {
        Command::Top {
            what: Top::Nodes { metrics },
        } => top_nodes(&ctx, &mut io, &metrics).await,
        Command::Why { pod } => why(&ctx, &mut io, &pod).await,
        Command::Rewards { pod_type } => rewards(&ctx, &mut io, pod_type.as_deref()).await,
        Command::Actions { watch } => list_actions(&ctx, &mut io, watch).await,
        Command::Move { pod, to, wait } => {
            let params = act::move_params(&ctx.namespace, &pod, &to);
            let what = format!("Move Pod {}/{pod} to {to}", ctx.namespace);
            act(&ctx, &mut io, "action.Move", params, &what, &wait).await
        }
        Command::Swap { x, y, wait } => {
            let params = act::swap_params(&ctx.namespace, &x, &y);
            let what = format!("Swap Pods {ns}/{x} and {ns}/{y}", ns = ctx.namespace);
            act(&ctx, &mut io, "action.Swap", params, &what, &wait).await
        }
        Command::Scale {
            workload,
            replicas,
            wait,
        } => {
            let (kind, name) = act::workload(&workload).with_context(|| {
                format!("{workload:?} is not deployment/NAME or statefulset/NAME")
            })?;
            let params = act::scale_params(&ctx.namespace, kind, name, replicas);
            let what = format!("Scale {kind} {}/{name} to {replicas}", ctx.namespace);
            act(&ctx, &mut io, "action.Scale", params, &what, &wait).await
        }
        Command::Jobs => list_jobs(&ctx, &mut io).await,
    }
}

/// Where the answer and the warnings go.
struct Io<'a> {
    out: &'a mut dyn Write,
    err: &'a mut dyn Write,
}

impl Io<'_> {
    fn print(&mut self, text: &str) -> anyhow::Result<()> {
        self.out
            .write_all(text.as_bytes())
            .context("writing the answer")?;
        self.out.flush().context("writing the answer")
    }

    fn warn(&mut self, text: &str) {
        // Nothing to do if stderr is gone.
        let _ = writeln!(self.err, "warning: {text}");
    }

    /// Prints `value` as `-o json|yaml` asks; false for the table format.
    fn serialized(&mut self, format: Output, value: &Value) -> anyhow::Result<bool> {
        match output::serialize(format, value)? {
            Some(text) => self.print(&text).map(|()| true),
            None => Ok(false),
        }
    }
}

/// The kubeconfig (loaded once, if there is one) and the coordinator client.
struct Ctx {
    args: GlobalArgs,
    config: Result<kube::Config, String>,
    namespace: String,
    coordinator: Coordinator,
}

impl Ctx {
    async fn new(args: GlobalArgs) -> anyhow::Result<Self> {
        // Commands that only read the view work without a kubeconfig (the dev cluster's API
        // takes no token); an explicitly named kubeconfig or context must load.
        let config = match kubeconf::config(&args).await {
            Ok(c) => Ok(c),
            Err(e) if args.kubeconfig.is_some() || args.context.is_some() => return Err(e),
            Err(e) => Err(format!("{e:#}")),
        };
        let namespace = kubeconf::namespace(&args, config.as_ref().ok());
        let token = kubeconf::bearer_token(&args, config.as_ref().ok());
        let coordinator = Coordinator::new(&args.coordinator, token)?;
        Ok(Self {
            args,
            config,
            namespace,
            coordinator,
        })
    }

    fn client(&self) -> anyhow::Result<kube::Client> {
        let config = self.config.clone().map_err(anyhow::Error::msg)?;
        kube::Client::try_from(config).context("building the Kubernetes client")
    }

    /// `Api` in the namespace, or across all with `-A`.
    fn api<K>(&self) -> anyhow::Result<Api<K>>
    where
        K: Resource<Scope = kube::core::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        let client = self.client()?;
        Ok(if self.args.all_namespaces {
            Api::all(client)
        } else {
            Api::namespaced(client, &self.namespace)
        })
    }

    /// Adds where the coordinator Service is to an unreachable error, when it can be found.
    async fn explain(&self, e: CallError) -> anyhow::Error {
        match e {
            CallError::Unreachable { url, cause, .. } => {
                let hint = match self.client() {
                    Ok(client) => kubeconf::port_forward_hint(&client, &self.namespace).await,
                    Err(_) => String::new(),
                };
                CallError::Unreachable { url, cause, hint }.into()
            }
            other => other.into(),
        }
    }

    async fn get(&self, path: &str) -> anyhow::Result<Value> {
        match self.coordinator.get(path).await {
            Ok(v) => Ok(v),
            Err(e) => Err(self.explain(e).await),
        }
    }

    async fn rpc(&self, method: &str, params: Value, extra: Duration) -> anyhow::Result<Value> {
        match self.coordinator.rpc(method, params, extra).await {
            Ok(v) => Ok(v),
            Err(e) => Err(self.explain(e).await),
        }
    }
}

/// A listing, or nothing when the kind is not installed (its CRD absent: 404).
async fn list_or_none<K>(api: &Api<K>) -> anyhow::Result<Vec<K>>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.list(&ListParams::default()).await {
        Ok(list) => Ok(list.items),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Vec::new()),
        Err(e) => Err(e).context("listing"),
    }
}

/// `No resources found in NS namespace.`, as kubectl says on stderr.
fn nothing_found(ctx: &Ctx, io: &mut Io) {
    let where_ = if ctx.args.all_namespaces {
        String::new()
    } else {
        format!(" in {} namespace", ctx.namespace)
    };
    let _ = writeln!(io.err, "No resources found{where_}.");
}

fn to_values<T: Serialize>(items: &[T]) -> anyhow::Result<Vec<Value>> {
    items
        .iter()
        .map(|i| serde_json::to_value(i).context("serializing"))
        .collect()
}

async fn top_nodes(ctx: &Ctx, io: &mut Io<'_>, metrics: &[String]) -> anyhow::Result<Outcome> {
    let body = ctx.get("/api/v1/nodes").await?;
    if body["synced"] == false {
        io.warn(
            "the coordinator's view has not synced with the gossip yet; figures may be missing",
        );
    }
    if !io.serialized(ctx.args.output, &body)? {
        io.print(&top::nodes_table(&body, metrics).render())?;
    }
    Ok(Outcome::Done)
}

async fn why(ctx: &Ctx, io: &mut Io<'_>, name: &str) -> anyhow::Result<Outcome> {
    let client = ctx.client()?;
    let ns = ctx.namespace.as_str();
    let pod = Api::<Pod>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .with_context(|| format!("reading pod {ns}/{name}"))?;
    let events = list_or_none(&Api::<Event>::namespaced(client.clone(), ns))
        .await
        .context("reading the namespace's Events")?;
    let actions = list_or_none(&Api::<WorkloadAction>::namespaced(client.clone(), ns))
        .await
        .context("reading the namespace's WorkloadActions")?;
    let node_name = pod
        .as_ref()
        .and_then(|p| p.spec.as_ref()?.node_name.clone());
    let node = match &node_name {
        Some(n) => Api::<Node>::all(client.clone())
            .get_opt(n)
            .await
            .ok()
            .flatten(),
        None => None,
    };
    let policy_name = pod.as_ref().and_then(|p| {
        p.labels()
            .get(telemesh_core::policy::POLICY_LINK_LABEL)
            .cloned()
    });
    let policy = match &policy_name {
        // Absent CRD or policy alike: the report says the policy was not found.
        Some(p) => Api::<TASPolicy>::namespaced(client.clone(), ns)
            .get_opt(p)
            .await
            .ok()
            .flatten(),
        None => None,
    };
    let view = match ctx.get("/api/v1/nodes").await {
        Ok(v) => Some(v),
        Err(e) => {
            io.warn(&format!("{e:#}; the view's part is left out"));
            None
        }
    };
    let rewards = match (&pod, &view) {
        (Some(p), Some(_)) => {
            let ty = telemesh_core::reward::pod_type(p);
            ctx.get(&format!("/api/v1/rewards?podType={ty}")).await.ok()
        }
        _ => None,
    };
    let now = Timestamp::now();
    let report = why::report(&why::Evidence {
        namespace: ns,
        name,
        pod: pod.as_ref(),
        events: &events,
        actions: &actions,
        node: node.as_ref(),
        view: view.as_ref(),
        policy: policy.as_ref(),
        rewards: rewards.as_ref(),
    });
    anyhow::ensure!(
        report.exists || !report.actions.is_empty() || !report.events.is_empty(),
        "pods {name:?} not found in namespace {ns}, and no action or Event names it"
    );
    let value = serde_json::to_value(&report).context("serializing the report")?;
    if !io.serialized(ctx.args.output, &value)? {
        io.print(&why::render(&report, now))?;
    }
    Ok(Outcome::Done)
}

async fn rewards(ctx: &Ctx, io: &mut Io<'_>, pod_type: Option<&str>) -> anyhow::Result<Outcome> {
    let (body, table) = match pod_type {
        Some(arg) => {
            let ty = rewards::pod_type(arg, &ctx.namespace);
            let body = ctx.get(&format!("/api/v1/rewards?podType={ty}")).await?;
            let table = rewards::type_table(&body);
            if table.is_empty() {
                io.warn(&format!("no node has learned a reward for {ty} yet"));
            }
            (body, table)
        }
        None => {
            let body = ctx.get("/api/v1/rewards").await?;
            let ns = (!ctx.args.all_namespaces).then_some(ctx.namespace.as_str());
            let table = rewards::all_types_table(&body, ns);
            (body, table)
        }
    };
    if !io.serialized(ctx.args.output, &body)? && !table.is_empty() {
        io.print(&table.render())?;
    }
    Ok(Outcome::Done)
}

async fn list_actions(ctx: &Ctx, io: &mut Io<'_>, watch: bool) -> anyhow::Result<Outcome> {
    let api = ctx.api::<WorkloadAction>()?;
    let list = api
        .list(&ListParams::default())
        .await
        .context("listing WorkloadActions (is the CRD installed? deploy/crds/)")?;
    let version = list.metadata.resource_version.clone().unwrap_or_default();
    let mut items = list.items;
    actions::sort(&mut items);
    let all = ctx.args.all_namespaces;
    let table = actions::actions_table(&items, Timestamp::now(), all);
    let mut widths = table.widths();
    match ctx.args.output {
        Output::Table if table.is_empty() => {
            if !watch {
                nothing_found(ctx, io);
            }
        }
        Output::Table => io.print(&table.render())?,
        // A watch prints one object per change, as kubectl -w -o json does.
        format if watch => {
            for a in &items {
                io.serialized(format, &serde_json::to_value(a)?)?;
            }
        }
        format => {
            io.serialized(format, &output::list(to_values(&items)?))?;
        }
    }
    if !watch {
        return Ok(Outcome::Done);
    }
    if ctx.args.output == Output::Table && table.is_empty() {
        // Nothing listed: the header alone, its columns widened for the rows to come (an action
        // id or a target is longer than its header).
        widths = actions::table(all).widths().iter().map(|w| w + 8).collect();
        io.print(&actions::table(all).header_line(&widths))?;
    }
    watch_actions(ctx, io, &api, version, &widths).await
}

/// Prints each change to WorkloadActions after `version`, until stopped (Ctrl-C), re-watching
/// from the last version seen when the API server ends a watch, as kubectl -w does.
async fn watch_actions(
    ctx: &Ctx,
    io: &mut Io<'_>,
    api: &Api<WorkloadAction>,
    mut version: String,
    widths: &[usize],
) -> anyhow::Result<Outcome> {
    let all = ctx.args.all_namespaces;
    loop {
        let params = WatchParams::default().timeout(290);
        let mut stream = api
            .watch(&params, &version)
            .await
            .context("watching WorkloadActions")?
            .boxed();
        while let Some(event) = stream
            .try_next()
            .await
            .context("watching WorkloadActions")?
        {
            let action = match event {
                WatchEvent::Added(a) | WatchEvent::Modified(a) | WatchEvent::Deleted(a) => a,
                WatchEvent::Bookmark(b) => {
                    version = b.metadata.resource_version;
                    continue;
                }
                WatchEvent::Error(e) if e.code == 410 => {
                    // Too old a version: start again from now, as a fresh listing would.
                    version = api
                        .list(&ListParams::default().limit(1))
                        .await
                        .context("listing WorkloadActions")?
                        .metadata
                        .resource_version
                        .unwrap_or_default();
                    break;
                }
                WatchEvent::Error(e) => anyhow::bail!("watching WorkloadActions: {}", e.message),
            };
            if let Some(v) = action.resource_version() {
                version = v;
            }
            match ctx.args.output {
                Output::Table => io.print(&crate::table::line(
                    &actions::row(&action, Timestamp::now(), all),
                    widths,
                ))?,
                format => {
                    io.serialized(format, &serde_json::to_value(&action)?)?;
                }
            }
        }
    }
}

async fn act(
    ctx: &Ctx,
    io: &mut Io<'_>,
    method: &str,
    params: Value,
    what: &str,
    wait: &WaitArgs,
) -> anyhow::Result<Outcome> {
    let accepted = ctx.rpc(method, params, Duration::ZERO).await?;
    if !io.serialized(ctx.args.output, &accepted)? {
        io.print(&act::created_line(&accepted, what))?;
    }
    if !wait.wait {
        return Ok(Outcome::Done);
    }
    let id = accepted["actionId"].as_str().unwrap_or_default().to_owned();
    let namespace = accepted["namespace"]
        .as_str()
        .unwrap_or(&ctx.namespace)
        .to_owned();
    let deadline = tokio::time::Instant::now() + wait.timeout;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let seconds = left.as_secs().max(1);
        let result = ctx
            .rpc(
                "action.Wait",
                act::wait_params(&id, &namespace, seconds),
                Duration::from_secs(seconds.min(300)),
            )
            .await?;
        if let Some((succeeded, line)) = act::ended(&result) {
            if !io.serialized(ctx.args.output, &result)? {
                io.print(&line)?;
            }
            return Ok(if succeeded {
                Outcome::Done
            } else {
                Outcome::Unsuccessful
            });
        }
        if tokio::time::Instant::now() >= deadline {
            let phase = result["phase"].as_str().unwrap_or("Pending");
            io.print(&format!(
                "workloadaction.telemesh.io/{id} still {phase} after {:?}\n",
                wait.timeout
            ))?;
            return Ok(Outcome::Unsuccessful);
        }
    }
}

async fn list_jobs(ctx: &Ctx, io: &mut Io<'_>) -> anyhow::Result<Outcome> {
    let api = ctx.api::<ScavengerJob>()?;
    let mut items = api
        .list(&ListParams::default())
        .await
        .context("listing ScavengerJobs (is the CRD installed? deploy/crds/)")?
        .items;
    items.sort_by_key(|j| (j.namespace(), j.name_any()));
    let unsaved = match ctx.get("/api/v1/nodes").await {
        Ok(view) => Some(jobs::unsaved_by_job(&view)),
        Err(e) => {
            io.warn(&format!("{e:#}; unsaved work is unknown"));
            None
        }
    };
    match ctx.args.output {
        Output::Table if items.is_empty() => nothing_found(ctx, io),
        Output::Table => {
            let all = ctx.args.all_namespaces;
            let table = jobs::jobs_table(&items, unsaved.as_ref(), Timestamp::now(), all);
            io.print(&table.render())?;
        }
        format => {
            let mut values = to_values(&items)?;
            for (value, job) in values.iter_mut().zip(&items) {
                let key = format!("{}/{}", job.namespace().unwrap_or_default(), job.name_any());
                // The view's figure beside the object, as kubectl-telemesh's own field.
                value["unsaved"] = match &unsaved {
                    Some(map) => serde_json::to_value(map.get(&key).copied().unwrap_or_default())?,
                    None => Value::Null,
                };
            }
            io.serialized(format, &output::list(values))?;
        }
    }
    Ok(Outcome::Done)
}
