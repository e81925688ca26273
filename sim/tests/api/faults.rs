//! The fault switch as kube-rs meets it: an outage ends open watches and fails every request
//! with a connection error until it ends, then the same objects are there; throttling answers
//! 429 with `Retry-After`, which kube-rs's retry waits out; sim counts each client's requests.

use std::time::Duration;

use futures::StreamExt as _;
use http::{HeaderName, HeaderValue};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams, WatchParams};
use serde_json::json;
use telemesh_sim::faults::Fault;

use super::sim;

const AGENT: &str = "faults-test/1.0 (api)";

/// A client of `sim` sending `User-Agent: AGENT`, retrying 429/503/504 as kube-rs does by
/// default when `retry`.
async fn named_client(sim: &telemesh_sim::Sim, retry: bool) -> kube::Client {
    let mut config = sim.kube_config().await.unwrap();
    config.headers.push((
        HeaderName::from_static("user-agent"),
        HeaderValue::from_static(AGENT),
    ));
    config.default_retry = retry;
    kube::Client::try_from(config).unwrap()
}

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"v": "1"}})).unwrap()
}

#[tokio::test]
async fn an_outage_ends_watches_fails_requests_and_leaves_the_state_intact() {
    let (sim, _) = sim().await;
    let client = named_client(&sim, true).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    cms.create(&PostParams::default(), &cm("kept"))
        .await
        .unwrap();
    let mut watch = cms
        .watch(&WatchParams::default().timeout(60), "0")
        .await
        .unwrap()
        .boxed();
    // The watch is open: it lists "kept" as ADDED first.
    assert!(watch.next().await.is_some());

    sim.faults.start(Fault::Outage, None);
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(Ok(_)) = watch.next().await {}
    })
    .await;
    assert!(ended.is_ok(), "the open watch did not end with the outage");
    let err = cms.get("kept").await.unwrap_err();
    assert!(
        !matches!(err, kube::Error::Api(_)),
        "an outage answers nothing, so no API status: {err:?}"
    );
    assert!(sim.faults.clients()[AGENT].refused >= 1);

    sim.faults.clear();
    let kept = cms.get("kept").await.unwrap();
    assert_eq!(kept.data.unwrap()["v"], "1");
    assert!(sim.faults.clients()[AGENT].served >= 3);
}

#[tokio::test]
async fn throttling_answers_retry_after_which_kube_rs_waits_out() {
    let (sim, _) = sim().await;
    let retry_after = 1;
    sim.faults.start(
        Fault::Throttle {
            status: 429,
            retry_after_seconds: Some(retry_after),
        },
        Some(Duration::from_millis(2_500)),
    );
    // Without retries the answer is kube-apiserver's.
    let plain: Api<ConfigMap> = Api::default_namespaced(named_client(&sim, false).await);
    match plain.get("absent").await.unwrap_err() {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (429, "TooManyRequests"));
            assert_eq!(
                s.details.map(|d| d.retry_after_seconds),
                Some(u32::try_from(retry_after).unwrap())
            );
        }
        other => panic!("expected 429, got {other:?}"),
    }
    // Health probes are not throttled.
    let url = format!("{}/healthz", sim.url());
    telemesh_sim::cluster::http::request(http::Method::GET, &url, None)
        .await
        .unwrap();

    // kube-rs's default retry waits Retry-After between tries and gets through once the
    // throttling ends: about one request a second, not a burst.
    let before = sim.faults.clients()[AGENT];
    let started = tokio::time::Instant::now();
    let retried: Api<ConfigMap> = Api::default_namespaced(named_client(&sim, true).await);
    retried
        .create(&PostParams::default(), &cm("late"))
        .await
        .unwrap();
    let took = started.elapsed();
    let counts = sim.faults.clients()[AGENT].since(&before);
    assert!(took >= Duration::from_secs(1), "{took:?}");
    assert_eq!(counts.served, 1, "{counts:?}");
    assert!(
        (1..=4).contains(&counts.throttled),
        "{counts:?} in {took:?}"
    );
}
