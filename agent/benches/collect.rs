//! One full `Collector::sample` (procfs, PSI, hwmon, resctrl, and cgroup v2 figures of 100 pods)
//! over a copy of the `host-a` fixture with 100 generated pod cgroups, as the agent runs it every
//! second on every node. Inputs are built outside the timing; the collector is warmed (previous
//! readings and pod directories known), as in steady state.
//!
//! Run: `cargo bench -p telemesh-agent --bench collect`.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use telemesh_agent::collect::{Collector, CollectorConfig, PodRef};
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

criterion_group!(benches, sample);
criterion_main!(benches);
