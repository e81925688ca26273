//! One full `Collector::sample` (procfs, PSI, hwmon, resctrl, and cgroup v2 figures of 100 pods)
//! over a copy of the `host-a` fixture with 100 generated pod cgroups, as the agent runs it every
//! second on every node. Inputs are built outside the timing; the collector is warmed (previous
//! readings and pod directories known), as in steady state. Beside it, what the collection loop
//! adds to each pass after sampling: choosing what to publish (the deadband) and checking whether
//! the published values flip a dontschedule verdict (`verdict_push`, with the seed policy).
//!
//! Run: `cargo bench -p telemesh-agent --bench collect`.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use kube::runtime::reflector;
use kube::runtime::watcher::Event;
use telemesh_agent::collection::collect::{Collector, CollectorConfig, PodRef};
use telemesh_agent::collection::publish::{Deadband, Publisher};
use telemesh_agent::collection::verdict_push::VerdictWatch;
use telemesh_core::policy::{TASPolicy, Unknown};
use telemesh_core::testing::copy_tree;

const PODS: usize = 100;

/// A host root with `PODS` burstable pods (systemd driver), each a copy of the fixture's pod.
fn host_with_pods(root: &Path) -> std::io::Result<Vec<PodRef>> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    copy_tree(&fixtures.join("host-a"), root)?;
    let burstable = root.join("sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice");
    let template =
        burstable.join("kubepods-burstable-pod6f1e2d3c_4b5a_4978_8a6b_5c4d3e2f1a0b.slice");
    let mut pods = Vec::with_capacity(PODS);
    for i in 0..PODS {
        let uid = format!("00000000-0000-4000-8000-{i:012}");
        let dir = burstable.join(format!(
            "kubepods-burstable-pod{}.slice",
            uid.replace('-', "_")
        ));
        copy_tree(&template, &dir)?;
        pods.push(PodRef {
            namespace: "bench".into(),
            name: format!("pod-{i}"),
            uid,
        });
    }
    Ok(pods)
}

fn sample(c: &mut Criterion) {
    let tmp = tempfile::tempdir().expect("temp dir for the bench host");
    let pods = host_with_pods(tmp.path()).expect("bench host tree");
    let mut collector = Collector::new(CollectorConfig {
        per_cpu: true,
        ..CollectorConfig::with_root(tmp.path())
    });
    let mut now = Instant::now();
    let warm = collector.sample(now, &pods);
    assert_eq!(warm.pods.len(), PODS);
    assert!(warm.errors.is_empty(), "{:?}", warm.errors);
    c.bench_function("collect/sample_100_pods", |b| {
        b.iter(|| {
            now += Duration::from_secs(1);
            black_box(collector.sample(now, black_box(&pods)))
        })
    });
}

/// The loop's work after a sample: the policies' targets, the deadband's selection and the
/// verdict check on what was published, with the seed policy in the policy watch.
fn publish_and_verdicts(c: &mut Criterion) {
    let tmp = tempfile::tempdir().expect("temp dir for the bench host");
    let pods = host_with_pods(tmp.path()).expect("bench host tree");
    let mut collector = Collector::new(CollectorConfig::with_root(tmp.path()));
    let start = Instant::now();
    collector.sample(start, &pods);
    let samples = collector
        .sample(start + Duration::from_secs(1), &pods)
        .samples;
    let seed = include_str!("../../deploy/examples/scheduling-policy.yaml");
    let policy: TASPolicy = serde_yaml_ng::from_str(seed).expect("the seed policy parses");
    let (store, mut writer) = reflector::store::<TASPolicy>();
    writer.apply_watcher_event(&Event::Apply(policy));
    let mut publisher = Publisher::new(Deadband::default());
    let mut verdicts = VerdictWatch::default();
    let mut now = tokio::time::Instant::now();
    c.bench_function("collect/publish_and_verdicts", |b| {
        b.iter(|| {
            now += Duration::from_secs(1);
            verdicts.refresh(&store);
            let selection = publisher.select(black_box(&samples), now, verdicts.targets());
            let flipped = verdicts.flipped(&publisher.published(), Unknown::NotViolating);
            black_box((selection, flipped))
        })
    });
}

criterion_group!(benches, sample, publish_and_verdicts);
criterion_main!(benches);
