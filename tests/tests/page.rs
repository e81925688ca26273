//! The coordinator's live cluster page in headless Chromium (Debian's `chromium`, driven over
//! the DevTools protocol with chromiumoxide, so no npm), against real agents and a coordinator
//! on sim with TAS's example policy installed:
//!
//! - the page lists every node;
//! - one node's telemetry is scripted past the policy's `labeling` rule (node_metric > 100), and
//!   the same page, not reloaded, shows that node violating with the labels the policy puts on
//!   it, fed by the server-sent events;
//! - choosing `node_metric` in the select box shows its values as text, and each node is
//!   coloured by what the policy makes of it, not by its value: the node at 150 labelled, one at
//!   50 fine and, once scripted to 5 (under the dontschedule target, `LessThan 10`), another
//!   refused (the old heat map coloured 5 green and 150 red);
//! - a filter call that removes a node (that refused node) appears among the recent decisions
//!   with that node and the reason;
//! - a `Scale` workload action sent to `/rpc` appears in the action queue and ends Succeeded
//!   with its steps;
//! - a screenshot of the page is written to `target/telemesh-page.png` for people to look at.
//!
//! Without a chromium binary (`TELEMESH_CHROMIUM`, else `chromium` on PATH) the test prints
//! SKIPPED and passes; scripts/test.sh installs Debian's `chromium` when it runs as root.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::handler::viewport::Viewport;
use chromiumoxide::page::ScreenshotParams;
use futures::StreamExt as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use serde_json::json;
use telemesh_tests::cluster::{
    ClusterParts, POLICY_NAMESPACE, create_deployment, install_example_policy,
};
use telemesh_tests::mesh::Mesh;
use telemesh_tests::{SimEnv, eventually, rpc};

const NODES: [&str; 3] = ["sim-node-0", "sim-node-1", "sim-node-2"];
const VIOLATOR: &str = "sim-node-1";
/// Scripted under the policy's dontschedule target (node_metric < 10) later on.
const REFUSED: &str = "sim-node-2";
/// Stays at 50, which no rule of the policy objects to.
const FINE: &str = "sim-node-0";
/// The states' background colours in the page's CSS (`.state-*`), as computed styles give them.
const REFUSED_COLOUR: &str = "rgb(244, 163, 155)";
const LABELLED_COLOUR: &str = "rgb(185, 211, 243)";
const FINE_COLOUR: &str = "rgb(191, 227, 198)";
/// Bounds a broken run; not a timing goal.
const WAIT: Duration = Duration::from_secs(60);

/// The chromium binary: `TELEMESH_CHROMIUM`, else `chromium` on PATH.
fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("TELEMESH_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("chromium"))
        .find(|p| p.is_file())
}

/// `target/` (the test executable is `target/<profile>/deps/<test>-<hash>`).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .expect("the test executable lives in target/<profile>/deps")
}

/// Waits until `js`, evaluated in the page, gives a string satisfying `pred`; returns it.
async fn wait_text(
    page: &chromiumoxide::Page,
    what: &str,
    js: &str,
    pred: impl Fn(&str) -> bool,
) -> String {
    let pred = &pred;
    eventually(what, WAIT, || async move {
        let text: String = eval(page, js).await?;
        pred(&text).then_some(text)
    })
    .await
}

/// JS giving `node`'s cell as `<value text> | <data-state> | <computed background colour>`.
fn cell_js(node: &str) -> String {
    format!(
        "(() => {{ const c = document.querySelector('#nodes [data-node=\"{node}\"]'); \
         return c ? [c.querySelector('.value').textContent, c.dataset.state, \
                     getComputedStyle(c).backgroundColor].join(' | ') : ''; }})()"
    )
}

/// Waits until `node`'s cell shows `value` as text; returns its state and colour as
/// `<state> | <colour>`, judged by the server from the same document as the value.
async fn cell_state(page: &chromiumoxide::Page, node: &str, value: &str) -> String {
    let shown = wait_text(
        page,
        &format!("the page to show {node} at {value}"),
        &cell_js(node),
        |t| t.starts_with(&format!("{value} | ")),
    )
    .await;
    shown[value.len() + 3..].to_owned()
}

/// Evaluates `js` in the page; `None` when it fails or is not a `T`.
async fn eval<T: serde::de::DeserializeOwned>(page: &chromiumoxide::Page, js: &str) -> Option<T> {
    page.evaluate(js).await.ok()?.into_value().ok()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_page_shows_a_node_violating_a_policy_with_its_labels() {
    let Some(chromium) = chromium() else {
        eprintln!(
            "SKIPPED: the live page browser test needs chromium (apt-get install chromium, \
             or set TELEMESH_CHROMIUM to its path)"
        );
        return;
    };
    telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
    let env = SimEnv::start(NODES.len()).await;
    let parts = ClusterParts::start(&env, NODES.len()).await;
    let client = env.client().await;
    let crd: CustomResourceDefinition =
        serde_yaml_ng::from_str(telemesh_core::action::crd::CRD_YAML).unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    install_example_policy(&client).await;
    let nodes: Vec<(&str, &str)> = NODES.iter().map(|n| (*n, "node_metric 50\n")).collect();
    let mesh = Mesh::start_with(&env, &nodes, &[], &["--leader-lease-duration=3s"], 1).await;
    parts
        .start_scheduler(&env, &mesh.coordinators[0].url_prefix())
        .await;
    let url = format!("http://{}/", mesh.coordinators[0].api);

    let profile = tempfile::tempdir().unwrap();
    let config = BrowserConfig::builder()
        .chrome_executable(&chromium)
        .no_sandbox()
        .user_data_dir(profile.path())
        .window_size(1280, 900)
        .viewport(Viewport {
            width: 1280,
            height: 900,
            ..Viewport::default()
        })
        .args([
            "disable-gpu",
            "disable-quic",
            "no-first-run",
            "disable-background-networking",
            "disable-component-update",
            "disable-sync",
        ])
        .build()
        .unwrap();
    let (mut browser, mut handler) = Browser::launch(config)
        .await
        .unwrap_or_else(|e| panic!("launching {}: {e}", chromium.display()));
    let events = tokio::spawn(async move { while handler.next().await.is_some() {} });
    let page = browser.new_page(url.as_str()).await.unwrap();

    let shown = eventually("the page to list every node", WAIT, || {
        let page = &page;
        async move {
            let n: usize = eval(
                page,
                "document.querySelectorAll('#nodes [data-node]').length",
            )
            .await?;
            (n == NODES.len()).then_some(n)
        }
    })
    .await;
    assert_eq!(shown, NODES.len());
    let none: String = eval(&page, "document.getElementById('violations').textContent")
        .await
        .unwrap();
    assert!(none.contains("No node violates"), "{none}");
    // Marks this page load: still there at the end means the page updated itself.
    let _: Option<u8> = eval(&page, "window.telemeshLoad = 7").await;

    let scripted = std::time::Instant::now();
    mesh.script(VIOLATOR, "node_metric 150\n");
    let policy = format!("{POLICY_NAMESPACE}/scheduling-policy");
    let labels = eventually(
        &format!("the page to show {VIOLATOR} violating {policy} with its labels"),
        WAIT,
        || {
            let (page, policy) = (&page, &policy);
            async move {
                let js = format!(
                    "(() => {{ const r = document.querySelector('#violations tr[data-node=\"{VIOLATOR}\"][data-policy=\"{policy}\"]'); \
                     return r ? r.querySelector('.labels').textContent : ''; }})()"
                );
                let labels: String = eval(page, &js).await?;
                labels.contains("label1=foo").then_some(labels)
            }
        },
    )
    .await;
    // A figure for people, not an assertion: the agents' policy interval, gossip and the
    // feed's interval all lie between the textfile and the page.
    eprintln!(
        "the page showed {VIOLATOR} violating {:.1} s after its textfile changed",
        scripted.elapsed().as_secs_f64()
    );
    assert_eq!(
        labels,
        "telemetry.aware.scheduling.scheduling-policy/label1=foo, \
         telemetry.aware.scheduling.scheduling-policy/label2=bar"
    );
    let others: usize = eval(
        &page,
        "document.querySelectorAll('#violations tr[data-node]').length",
    )
    .await
    .unwrap();
    assert_eq!(others, 1, "only {VIOLATOR} violates");
    let load: Option<u8> = eval(&page, "window.telemeshLoad").await;
    assert_eq!(
        load,
        Some(7),
        "the page was reloaded instead of updating itself"
    );

    // The select box picks the metric shown as text; the colour is the node's state.
    let js = "(() => { const s = document.getElementById('metric'); s.value = 'node_metric'; \
              s.dispatchEvent(new Event('change')); return s.value; })()";
    let chosen: String = eval(&page, js).await.unwrap();
    assert_eq!(chosen, "node_metric");

    // Under the dontschedule target: refused, and coloured so, however low the value.
    mesh.script(REFUSED, "node_metric 5\n");
    mesh.wait_metric(REFUSED, "node_metric", 5.0).await;
    assert_eq!(
        cell_state(&page, REFUSED, "5.00").await,
        format!("refused | {REFUSED_COLOUR}"),
        "5 breaks dontschedule: node_metric LessThan 10"
    );
    assert_eq!(
        cell_state(&page, VIOLATOR, "150").await,
        format!("labelled | {LABELLED_COLOUR}"),
        "150 passes the labeling rule (> 100) and no other"
    );
    assert_eq!(
        cell_state(&page, FINE, "50.00").await,
        format!("fine | {FINE_COLOUR}"),
        "no rule objects to 50"
    );
    let legend: String = eval(&page, "document.getElementById('legend').textContent")
        .await
        .unwrap();
    assert!(
        legend.contains("low node_metric is worse"),
        "the scale follows the rules: {legend}"
    );
    let swatch: String = eval(
        &page,
        "getComputedStyle(document.querySelector('#states [data-state=\"refused\"] .swatch')).backgroundColor",
    )
    .await
    .unwrap();
    assert_eq!(
        swatch, REFUSED_COLOUR,
        "the legend shows the refused colour"
    );

    // A filter that removes a node: recorded among the recent decisions with its reason.
    let filter = json!({
        "Pod": {"metadata": {"name": "probe", "namespace": POLICY_NAMESPACE,
                             "labels": {"telemetry-policy": "scheduling-policy"}}},
        "NodeNames": NODES,
    });
    let url = format!("{}/filter", mesh.coordinators[0].url_prefix());
    telemesh_sim::cluster::http::request(
        http::Method::POST,
        &url,
        Some(serde_json::to_vec(&filter).unwrap()),
    )
    .await
    .unwrap();
    let probe = format!("{POLICY_NAMESPACE}/probe");
    let js = format!(
        "[...document.querySelectorAll('#decisions tr[data-verb=\"filter\"]')]\
         .map(r => r.textContent).find(t => t.includes('{probe}')) || ''"
    );
    let decision = wait_text(
        &page,
        "the page to show the probe's filter decision",
        &js,
        |t| !t.is_empty(),
    )
    .await;
    assert!(decision.contains("kept 2 of 3 nodes"), "{decision}");
    assert!(
        decision.contains(&format!(
            "{REFUSED}: policy {policy} dontschedule: node_metric LessThan 10 (value 5)"
        )),
        "{decision}"
    );

    // A workload action: in the queue, then Succeeded with its steps.
    create_deployment(&client, POLICY_NAMESPACE, "web", 1).await;
    let reply = rpc::call(
        mesh.coordinators[0].api,
        None,
        "action.Scale",
        json!({"workload": {"namespace": POLICY_NAMESPACE, "kind": "Deployment", "name": "web"},
               "replicas": 2}),
    )
    .await;
    let id = reply["result"]["actionId"]
        .as_str()
        .unwrap_or_else(|| panic!("Scale refused: {reply}"));
    let js = format!(
        "(() => {{ const r = document.querySelector('#actions tr[data-action=\"{POLICY_NAMESPACE}/{id}\"]'); \
         return r ? [...r.cells].map(c => c.textContent).join(' | ') : ''; }})()"
    );
    let action = wait_text(&page, "the page to show the action Succeeded", &js, |t| {
        t.contains("| Succeeded |")
    })
    .await;
    assert!(action.contains("| Scale |"), "{action}");
    assert!(action.contains("(Done)"), "its steps are listed: {action}");

    let shot = target_dir().join("telemesh-page.png");
    page.save_screenshot(ScreenshotParams::builder().full_page(true).build(), &shot)
        .await
        .unwrap_or_else(|e| panic!("writing {}: {e}", shot.display()));
    eprintln!("screenshot of the live page: {}", shot.display());

    browser.close().await.unwrap();
    let _ = browser.wait().await;
    events.abort();
}
