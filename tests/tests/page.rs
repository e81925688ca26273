//! The coordinator's live cluster page in headless Chromium (Debian's `chromium`, driven over
//! the DevTools protocol with chromiumoxide, so no npm), against real agents and a coordinator
//! on sim with TAS's example policy installed:
//!
//! - the page lists every node in its heat map;
//! - one node's telemetry is scripted past the policy's `labeling` rule (node_metric > 100), and
//!   the same page, not reloaded, shows that node violating with the labels the policy puts on
//!   it, fed by the server-sent events;
//! - choosing `node_metric` in the select box puts its values in the heat map;
//! - a filter call that removes a node (another node scripted under the policy's dontschedule
//!   target) appears among the recent decisions with that node and the reason;
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
    telemesh_core::telemetry::init(telemesh_core::cli::LogFormat::Text, "warn");
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
    let cell: String = eval(
        &page,
        &format!("document.querySelector('#nodes [data-node=\"{VIOLATOR}\"]').className"),
    )
    .await
    .unwrap();
    assert!(cell.split(' ').any(|c| c == "violating"), "{cell}");
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

    // The heat map follows the select box: node_metric shows the violator hottest.
    let js = format!(
        "(() => {{ const s = document.getElementById('metric'); s.value = 'node_metric'; \
         s.dispatchEvent(new Event('change')); \
         return document.querySelector('#nodes [data-node=\"{VIOLATOR}\"] .value').textContent; }})()"
    );
    let shown: String = eval(&page, &js).await.unwrap();
    assert_eq!(shown, "150", "the heat map shows the chosen metric");

    // A filter that removes a node: recorded among the recent decisions with its reason.
    mesh.script(REFUSED, "node_metric 5\n");
    mesh.wait_metric(REFUSED, "node_metric", 5.0).await;
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
