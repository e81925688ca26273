//! Whole-collector tests over the fixture trees in `agent/tests/fixtures` (see its README):
//! `host-a` (real /proc and cgroup files, systemd driver, hand-built resctrl and hwmon),
//! `host-a-t2` (the same host 2 s later, counters advanced by hand), `host-b` (cgroupfs driver,
//! no /proc, resctrl without monitoring), `host-c` (cgroup v1 hybrid). Every expected value is
//! worked out from the fixture numbers in a comment.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use telemesh_core::pod::PodFigures;

use super::*;

const U_BURST: &str = "6f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a0b";
const U_GUAR: &str = "0a1b2c3d-4e5f-4a6b-9c7d-8e9f0a1b2c3d";
const U_BEST: &str = "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a";
const U_MISSING: &str = "11111111-2222-4333-8444-555555555555";
const WALL_MS: u64 = 1_795_307_205_000;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn pod(name: &str, uid: &str) -> PodRef {
    PodRef {
        namespace: "default".into(),
        name: name.into(),
        uid: uid.into(),
    }
}

fn pods() -> Vec<PodRef> {
    vec![
        pod("web-0", U_BURST),
        pod("db-0", U_GUAR),
        pod("batch-0", U_BEST),
        pod("elsewhere-0", U_MISSING),
    ]
}

fn wall() -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(WALL_MS)
}

/// Copies a fixture tree so a test can change it.
fn copy_tree(from: &Path, to: &Path) {
    telemesh_core::testing::copy_tree(from, to).unwrap();
}

/// Samples host-a, then host-a-t2 two seconds later, through one collector whose root is a
/// copy that `edit_t2` may change before the second sample.
fn two_samples(
    config: impl Fn(PathBuf) -> CollectorConfig,
    edit_t2: impl Fn(&Path),
) -> (Collection, Collection) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("host");
    copy_tree(&fixture("host-a"), &root);
    let mut c = Collector::new(config(root.clone()));
    let t0 = Instant::now();
    let first = c.sample_at(t0, wall(), &pods());
    copy_tree(&fixture("host-a-t2"), &root);
    edit_t2(&root);
    let second = c.sample_at(t0 + Duration::from_secs(2), wall(), &pods());
    (first, second)
}

fn absent(c: &Collection, names: &[&str]) {
    for n in names {
        assert_eq!(c.get(n), None, "{n} should be absent, not {:?}", c.get(n));
    }
}

// === node metrics ===

#[test]
fn first_sample_gives_exact_gauges_and_no_rates() {
    let mut c = Collector::new(CollectorConfig::with_root(fixture("host-a")));
    let s = c.sample_at(Instant::now(), wall(), &[]);
    assert!(s.errors.is_empty(), "{:?}", s.errors);

    // /proc/loadavg: "2.17 1.65 1.63 4/129 32241".
    assert_eq!(s.get("node_load1"), Some(2.17));
    assert_eq!(s.get("node_load5"), Some(1.65));
    assert_eq!(s.get("node_load15"), Some(1.63));

    // /proc/meminfo, kB × 1024.
    let kib = |k: u64| (k * 1024) as f64;
    assert_eq!(s.get("node_memory_MemTotal_bytes"), Some(kib(24_684_096)));
    assert_eq!(
        s.get("node_memory_MemAvailable_bytes"),
        Some(kib(23_389_276))
    );
    assert_eq!(s.get("node_memory_MemFree_bytes"), Some(kib(17_457_748)));
    assert_eq!(s.get("node_memory_Buffers_bytes"), Some(kib(8_512)));
    assert_eq!(s.get("node_memory_Cached_bytes"), Some(kib(5_974_348)));
    assert_eq!(s.get("node_memory_SwapTotal_bytes"), Some(0.0));
    assert_eq!(s.get("node_memory_SwapFree_bytes"), Some(0.0));
    // 1 − 23 950 618 624 / 25 276 514 304 ≈ 0.052456.
    assert_eq!(
        s.get("node_memory_utilization_ratio"),
        Some(1.0 - kib(23_389_276) / kib(24_684_096))
    );

    // /proc/pressure/*: percent / 100.
    assert_eq!(
        s.get("node_pressure_cpu_some_avg10_ratio"),
        Some(53.24 / 100.0)
    );
    assert_eq!(
        s.get("node_pressure_cpu_some_avg60_ratio"),
        Some(34.69 / 100.0)
    );
    assert_eq!(
        s.get("node_pressure_cpu_some_avg300_ratio"),
        Some(15.73 / 100.0)
    );
    assert_eq!(s.get("node_pressure_cpu_full_avg10_ratio"), Some(0.0));
    assert_eq!(
        s.get("node_pressure_io_some_avg60_ratio"),
        Some(0.29 / 100.0)
    );
    assert_eq!(
        s.get("node_pressure_io_full_avg300_ratio"),
        Some(0.27 / 100.0)
    );
    assert_eq!(s.get("node_pressure_memory_some_avg10_ratio"), Some(0.0));

    // resctrl, root group + CTRL_MON group BE:
    // L3 00: 12 582 912 + 2 097 152 = 14 680 064; L3 01: 8 388 608 + 1 048 576 = 9 437 184;
    // node: 24 117 248.
    assert_eq!(
        s.get("node_rdt_llc_occupancy_bytes_l3_00"),
        Some(14_680_064.0)
    );
    assert_eq!(
        s.get("node_rdt_llc_occupancy_bytes_l3_01"),
        Some(9_437_184.0)
    );
    assert_eq!(s.get("node_rdt_llc_occupancy_bytes"), Some(24_117_248.0));

    // hwmon: millidegrees / 1000; the hottest is coretemp "Package id 0" at 45 000.
    assert_eq!(s.get("node_hwmon_temp_max_celsius"), Some(45.0));
    assert_eq!(
        s.get("node_hwmon_temp_celsius_chip_coretemp_sensor_package_id_0"),
        Some(45.0)
    );
    assert_eq!(
        s.get("node_hwmon_temp_celsius_chip_coretemp_sensor_core_0"),
        Some(43.0)
    );
    assert_eq!(
        s.get("node_hwmon_temp_celsius_chip_nvme_sensor_composite"),
        Some(38.85)
    );
    assert_eq!(
        s.get("node_hwmon_temp_celsius_chip_acpitz_sensor_temp1"),
        Some(27.8)
    );

    // Rates need two readings.
    absent(
        &s,
        &[
            "node_cpu_utilization_ratio",
            "node_disk_read_bytes_per_second",
            "node_network_receive_bytes_per_second",
            "node_pressure_cpu_some_stall_seconds_per_second",
            "node_rdt_memory_bandwidth_total_bytes_per_second",
            "node_rdt_memory_bandwidth_local_bytes_per_second_l3_00",
        ],
    );
}

#[test]
fn second_sample_gives_exact_rates() {
    let (_, s) = two_samples(
        |root| CollectorConfig {
            per_cpu: true,
            ..CollectorConfig::with_root(root)
        },
        |_| {},
    );
    assert!(s.errors.is_empty(), "{:?}", s.errors);

    // /proc/stat "cpu": +150 user (guest +10 inside it, not added again), +30 system, +16 idle,
    // +4 iowait → Δtotal 200, Δidle 20, busy 180 / 200 = 0.9.
    assert_eq!(s.get("node_cpu_utilization_ratio"), Some(0.9));
    // cpu0: +70 +14 +12 +4 → (100 − 16) / 100; cpu1: +80 +16 +4 +0 → (100 − 4) / 100.
    assert_eq!(s.get("node_cpu_utilization_ratio_cpu_0"), Some(0.84));
    assert_eq!(s.get("node_cpu_utilization_ratio_cpu_1"), Some(0.96));

    // /proc/diskstats, vda only (loop0 and zram0 also moved, by 1000 ops, and are skipped):
    // +4096 sectors read × 512 / 2 s; +1024 written × 512 / 2 s; +200 reads / 2 s; +50 writes / 2 s.
    assert_eq!(s.get("node_disk_read_bytes_per_second"), Some(1_048_576.0));
    assert_eq!(s.get("node_disk_write_bytes_per_second"), Some(262_144.0));
    assert_eq!(s.get("node_disk_reads_per_second"), Some(100.0));
    assert_eq!(s.get("node_disk_writes_per_second"), Some(25.0));

    // /proc/net/dev without lo (which moved by 9 999 999): eth0 +2 000 000 rx, +500 000 tx over 2 s.
    assert_eq!(
        s.get("node_network_receive_bytes_per_second"),
        Some(1_000_000.0)
    );
    assert_eq!(
        s.get("node_network_transmit_bytes_per_second"),
        Some(250_000.0)
    );

    // MemAvailable 12 342 048 kB of 24 684 096: 1 − 0.5.
    assert_eq!(s.get("node_memory_utilization_ratio"), Some(0.5));
    assert_eq!(s.get("node_load1"), Some(1.5));

    // PSI totals: cpu some +500 000 µs / 2 s = 0.25; io some +100 000 µs → 0.05; io full
    // +60 000 µs → 0.03; unchanged totals → 0.
    assert_eq!(
        s.get("node_pressure_cpu_some_stall_seconds_per_second"),
        Some(0.25)
    );
    assert_eq!(
        s.get("node_pressure_cpu_full_stall_seconds_per_second"),
        Some(0.0)
    );
    assert_eq!(
        s.get("node_pressure_io_some_stall_seconds_per_second"),
        Some(0.05)
    );
    assert_eq!(
        s.get("node_pressure_io_full_stall_seconds_per_second"),
        Some(0.03)
    );
    assert_eq!(
        s.get("node_pressure_memory_some_stall_seconds_per_second"),
        Some(0.0)
    );
    assert_eq!(s.get("node_pressure_cpu_some_avg10_ratio"), Some(0.25));

    // MBM, summed over root and BE per domain, Δ / 2 s:
    // L3 00 total (4e9 + 1e9) / 2 = 2.5e9; L3 01 total (2e9 + 0) / 2 = 1e9; node 3.5e9.
    // L3 00 local (3e9 + 1e9) / 2 = 2e9;   L3 01 local (1e9 + 0) / 2 = 5e8; node 2.5e9.
    assert_eq!(
        s.get("node_rdt_memory_bandwidth_total_bytes_per_second_l3_00"),
        Some(2.5e9)
    );
    assert_eq!(
        s.get("node_rdt_memory_bandwidth_total_bytes_per_second_l3_01"),
        Some(1e9)
    );
    assert_eq!(
        s.get("node_rdt_memory_bandwidth_total_bytes_per_second"),
        Some(3.5e9)
    );
    assert_eq!(
        s.get("node_rdt_memory_bandwidth_local_bytes_per_second_l3_00"),
        Some(2e9)
    );
    assert_eq!(
        s.get("node_rdt_memory_bandwidth_local_bytes_per_second_l3_01"),
        Some(5e8)
    );
    assert_eq!(
        s.get("node_rdt_memory_bandwidth_local_bytes_per_second"),
        Some(2.5e9)
    );
    // Occupancy L3 00: 16 777 216 + 2 097 152; node: 18 874 368 + 9 437 184.
    assert_eq!(
        s.get("node_rdt_llc_occupancy_bytes_l3_00"),
        Some(18_874_368.0)
    );
    assert_eq!(s.get("node_rdt_llc_occupancy_bytes"), Some(28_311_552.0));

    // coretemp "Package id 0" now 47 500 m°C.
    assert_eq!(s.get("node_hwmon_temp_max_celsius"), Some(47.5));
}

#[test]
fn per_cpu_and_per_sensor_series_are_optional() {
    let (_, s) = two_samples(
        |root| CollectorConfig {
            per_cpu: false,
            per_sensor: false,
            ..CollectorConfig::with_root(root)
        },
        |_| {},
    );
    assert_eq!(s.get("node_cpu_utilization_ratio"), Some(0.9));
    assert_eq!(s.get("node_hwmon_temp_max_celsius"), Some(47.5));
    absent(
        &s,
        &[
            "node_cpu_utilization_ratio_cpu_0",
            "node_hwmon_temp_celsius_chip_coretemp_sensor_package_id_0",
        ],
    );
}

#[test]
fn unavailable_resctrl_values_are_skipped_and_partial_totals_not_published() {
    let (_, s) = two_samples(CollectorConfig::with_root, |root| {
        let r = root.join("sys/fs/resctrl");
        std::fs::write(
            r.join("mon_data/mon_L3_01/mbm_total_bytes"),
            "Unavailable\n",
        )
        .unwrap();
        std::fs::write(
            r.join("BE/mon_data/mon_L3_00/llc_occupancy"),
            "Unavailable\n",
        )
        .unwrap();
    });
    assert!(
        s.errors.is_empty(),
        "Unavailable is not an error: {:?}",
        s.errors
    );
    // Domain 00's bandwidth is intact: (4e9 + 1e9) / 2.
    assert_eq!(
        s.get("node_rdt_memory_bandwidth_total_bytes_per_second_l3_00"),
        Some(2.5e9)
    );
    // Local bandwidth was read everywhere: unchanged from the full test.
    assert_eq!(
        s.get("node_rdt_memory_bandwidth_local_bytes_per_second"),
        Some(2.5e9)
    );
    // Domain 01 occupancy was read: 8 388 608 + 1 048 576.
    assert_eq!(
        s.get("node_rdt_llc_occupancy_bytes_l3_01"),
        Some(9_437_184.0)
    );
    absent(
        &s,
        &[
            "node_rdt_memory_bandwidth_total_bytes_per_second_l3_01",
            "node_rdt_memory_bandwidth_total_bytes_per_second",
            "node_rdt_llc_occupancy_bytes_l3_00",
            "node_rdt_llc_occupancy_bytes",
        ],
    );
}

#[test]
fn only_the_resctrl_features_listed_are_read() {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&fixture("host-a"), tmp.path());
    // A CMT-only CPU: occupancy, no bandwidth monitoring.
    std::fs::write(
        tmp.path().join("sys/fs/resctrl/info/L3_MON/mon_features"),
        "llc_occupancy\n",
    )
    .unwrap();
    let mut c = Collector::new(CollectorConfig::with_root(tmp.path()));
    let t0 = Instant::now();
    c.sample_at(t0, wall(), &[]);
    let s = c.sample_at(t0 + Duration::from_secs(1), wall(), &[]);
    assert_eq!(s.get("node_rdt_llc_occupancy_bytes"), Some(24_117_248.0));
    assert!(
        !s.samples
            .iter()
            .any(|x| x.name.as_str().starts_with("node_rdt_memory_bandwidth")),
        "no MBM feature, no bandwidth metric (not even zero)"
    );
}

#[test]
fn absent_sources_give_absent_metrics_not_zeros() {
    // host-b: no /proc, no hwmon, resctrl mounted without monitoring (no info/L3_MON).
    let mut c = Collector::new(CollectorConfig::with_root(fixture("host-b")));
    let t0 = Instant::now();
    c.sample_at(t0, wall(), &pods());
    let s = c.sample_at(t0 + Duration::from_secs(1), wall(), &pods());
    assert!(
        s.errors.is_empty(),
        "absent is not an error: {:?}",
        s.errors
    );
    assert!(s.samples.is_empty(), "nothing to measure: {:?}", s.samples);
    absent(
        &s,
        &[
            "node_cpu_utilization_ratio",
            "node_load1",
            "node_memory_utilization_ratio",
            "node_pressure_cpu_some_avg10_ratio",
            "node_rdt_llc_occupancy_bytes",
            "node_hwmon_temp_max_celsius",
        ],
    );
    // Its cgroupfs-driver pods are still read.
    assert_eq!(s.pods.len(), 4);
    assert!(s.pods[0].cpu_usage_usec.is_some());
}

#[test]
fn a_file_that_does_not_parse_is_an_error_naming_it_and_the_rest_is_published() {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&fixture("host-a"), tmp.path());
    std::fs::write(tmp.path().join("proc/loadavg"), "garbage\n").unwrap();
    std::fs::write(tmp.path().join("proc/pressure/io"), "some avg10=x\n").unwrap();
    let mut c = Collector::new(CollectorConfig::with_root(tmp.path()));
    let s = c.sample_at(Instant::now(), wall(), &[]);
    let sources: Vec<Source> = s.errors.iter().map(|(src, _)| *src).collect();
    assert_eq!(sources, [Source::Loadavg, Source::Pressure]);
    assert!(s.errors[0].1.contains("proc/loadavg"), "{}", s.errors[0].1);
    assert!(s.errors[0].1.contains("expected three load averages"));
    absent(&s, &["node_load1", "node_pressure_io_some_avg10_ratio"]);
    assert_eq!(
        s.get("node_pressure_cpu_some_avg10_ratio"),
        Some(53.24 / 100.0)
    );
    assert!(s.get("node_memory_MemTotal_bytes").is_some());
}

// === pods ===

fn expected_burstable() -> PodFigures {
    // The real cgroup files of this machine's root cgroup v2, plus the cpu-controller lines.
    PodFigures {
        namespace: "default".into(),
        name: "web-0".into(),
        uid: U_BURST.into(),
        at_unix_ms: WALL_MS,
        cpu_usage_usec: Some(3_993_939_501),
        cpu_periods: Some(120_000),
        cpu_throttled_periods: Some(1_500),
        cpu_throttled_usec: Some(75_000_000),
        memory_bytes: Some(6_842_920_960),
        oom_kills: Some(0),
        cpu_pressure_some_avg10: Some(52.11),
        memory_pressure_some_avg10: Some(0.0),
        io_pressure_some_avg10: Some(0.28),
    }
}

#[test]
fn pods_of_the_systemd_driver_with_a_missing_pod_left_empty() {
    let mut c = Collector::new(CollectorConfig::with_root(fixture("host-a")));
    let s = c.sample_at(Instant::now(), wall(), &pods());
    assert_eq!(s.pods.len(), 4, "one entry per pod, in order");
    assert_eq!(s.pods[0], expected_burstable());
    assert_eq!(
        s.pods[1],
        PodFigures {
            namespace: "default".into(),
            name: "db-0".into(),
            uid: U_GUAR.into(),
            at_unix_ms: WALL_MS,
            cpu_usage_usec: Some(812_345_678),
            cpu_periods: Some(50_000),
            cpu_throttled_periods: Some(0),
            cpu_throttled_usec: Some(0),
            memory_bytes: Some(1_073_741_824),
            oom_kills: Some(0),
            cpu_pressure_some_avg10: Some(1.5),
            memory_pressure_some_avg10: Some(0.0),
            io_pressure_some_avg10: Some(0.1),
        }
    );
    let best = &s.pods[2];
    assert_eq!(best.uid, U_BEST);
    assert_eq!(
        (
            best.cpu_usage_usec,
            best.memory_bytes,
            best.oom_kills,
            best.memory_pressure_some_avg10
        ),
        (Some(1_234_567), Some(52_428_800), Some(2), Some(12.5))
    );
    assert_eq!(
        s.pods[3],
        PodFigures {
            namespace: "default".into(),
            name: "elsewhere-0".into(),
            uid: U_MISSING.into(),
            at_unix_ms: WALL_MS,
            ..PodFigures::default()
        },
        "a pod without a cgroup keeps every figure None"
    );
}

#[test]
fn both_cgroup_drivers_find_the_same_pod() {
    let mut systemd = Collector::new(CollectorConfig::with_root(fixture("host-a")));
    let mut cgroupfs = Collector::new(CollectorConfig::with_root(fixture("host-b")));
    let a = systemd.sample_at(Instant::now(), wall(), &pods()).pods;
    let b = cgroupfs.sample_at(Instant::now(), wall(), &pods()).pods;
    assert_eq!(a, b);
    assert_eq!(b[0], expected_burstable());
    // And the pure lookup finds each QoS class under each driver.
    for (root, driver) in [
        (fixture("host-a"), cgroup::Driver::Systemd),
        (fixture("host-b"), cgroup::Driver::Cgroupfs),
    ] {
        for uid in [U_BURST, U_GUAR, U_BEST] {
            let dir = cgroup::find_pod_cgroup(&root.join("sys/fs/cgroup"), &[driver], uid);
            assert!(dir.is_some(), "{driver:?} {uid}");
        }
    }
}

#[test]
fn pod_figures_follow_the_counters_and_a_moved_pod_is_found_again() {
    let (first, second) = two_samples(CollectorConfig::with_root, |root| {
        // The burstable pod's cgroup moves to besteffort (as after a QoS-changing resize).
        let cg = root.join("sys/fs/cgroup");
        let from = cg.join(cgroup::pod_cgroup_path(
            cgroup::Driver::Systemd,
            cgroup::QosClass::Burstable,
            U_BURST,
        ));
        let to = cg.join(cgroup::pod_cgroup_path(
            cgroup::Driver::Systemd,
            cgroup::QosClass::BestEffort,
            U_BURST,
        ));
        std::fs::rename(from, to).unwrap();
    });
    assert_eq!(first.pods[0], expected_burstable());
    // host-a-t2: usage_usec 3 995 939 501 (+2 000 000), nr_throttled 1 510, memory.current 6 843 969 536.
    let p = &second.pods[0];
    assert_eq!(p.cpu_usage_usec, Some(3_995_939_501));
    assert_eq!(p.cpu_throttled_periods, Some(1_510));
    assert_eq!(p.memory_bytes, Some(6_843_969_536));
    assert_eq!(p.cpu_pressure_some_avg10, Some(48.0));
    assert_eq!(second.pods[2].oom_kills, Some(3));
}

#[test]
fn a_missing_pod_file_leaves_only_its_field_empty() {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&fixture("host-a"), tmp.path());
    let dir = tmp
        .path()
        .join("sys/fs/cgroup")
        .join(cgroup::pod_cgroup_path(
            cgroup::Driver::Systemd,
            cgroup::QosClass::Burstable,
            U_BURST,
        ));
    std::fs::remove_file(dir.join("memory.current")).unwrap();
    std::fs::remove_file(dir.join("io.pressure")).unwrap();
    let mut c = Collector::new(CollectorConfig::with_root(tmp.path()));
    let s = c.sample_at(Instant::now(), wall(), &pods());
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    assert_eq!(
        s.pods[0],
        PodFigures {
            memory_bytes: None,
            io_pressure_some_avg10: None,
            ..expected_burstable()
        }
    );
}

#[test]
fn cgroup_v1_host_gives_no_pod_figures_and_no_error() {
    let mut c = Collector::new(CollectorConfig::with_root(fixture("host-c")));
    let s = c.sample_at(Instant::now(), wall(), &pods());
    assert!(s.pods.is_empty());
    assert!(s.errors.is_empty(), "{:?}", s.errors);
}

// === cross-checks ===

/// Our hand parsers agree with the `procfs` crate's on the real files of host-a.
#[test]
fn parsers_agree_with_the_procfs_crate_on_real_files() {
    use ::procfs::prelude::*;
    let proc = fixture("host-a/proc");
    let text = |f: &str| std::fs::read_to_string(proc.join(f)).unwrap();

    let theirs = ::procfs::Meminfo::from_file(proc.join("meminfo")).unwrap();
    let ours = procfs::parse_meminfo(&text("meminfo")).unwrap();
    assert_eq!(ours.total, Some(theirs.mem_total));
    assert_eq!(ours.available, theirs.mem_available);
    assert_eq!(ours.free, Some(theirs.mem_free));
    assert_eq!(ours.buffers, Some(theirs.buffers));
    assert_eq!(ours.cached, Some(theirs.cached));
    assert_eq!(ours.swap_total, Some(theirs.swap_total));
    assert_eq!(ours.swap_free, Some(theirs.swap_free));

    let theirs = ::procfs::LoadAverage::from_file(proc.join("loadavg")).unwrap();
    let ours = procfs::parse_loadavg(&text("loadavg")).unwrap();
    // procfs keeps f32.
    assert_eq!(ours.one as f32, theirs.one);
    assert_eq!(ours.fifteen as f32, theirs.fifteen);

    let si = ::procfs::ExplicitSystemInfo {
        boot_time_secs: 0,
        ticks_per_second: 100,
        page_size: 4096,
        is_little_endian: true,
    };
    let theirs = ::procfs::KernelStats::from_file(proc.join("stat"), &si).unwrap();
    let mut total = procfs::CpuTimes::default();
    let mut cpus = Vec::new();
    procfs::parse_stat(&text("stat"), true, &mut total, &mut cpus).unwrap();
    let same = |o: &procfs::CpuTimes, t: &::procfs::CpuTime| {
        (
            o.user, o.nice, o.system, o.idle, o.iowait, o.irq, o.softirq, o.steal,
        ) == (
            t.user,
            t.nice,
            t.system,
            t.idle,
            t.iowait.unwrap_or(0),
            t.irq.unwrap_or(0),
            t.softirq.unwrap_or(0),
            t.steal.unwrap_or(0),
        )
    };
    assert!(same(&total, &theirs.total));
    assert_eq!(cpus.len(), theirs.cpu_time.len());
    assert!(
        cpus.iter()
            .zip(&theirs.cpu_time)
            .all(|((_, o), t)| same(o, t))
    );

    let theirs = ::procfs::DiskStats::from_file(proc.join("diskstats")).unwrap();
    let ours = procfs::parse_diskstats(&text("diskstats")).unwrap();
    let counted: Vec<_> = theirs
        .0
        .iter()
        .filter(|d| procfs::is_counted_disk(&d.name))
        .collect();
    assert_eq!(
        counted.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(),
        ["vda"]
    );
    assert_eq!(ours.reads, counted[0].reads);
    assert_eq!(ours.read_bytes, counted[0].sectors_read * 512);
    assert_eq!(ours.writes, counted[0].writes);
    assert_eq!(ours.write_bytes, counted[0].sectors_written * 512);

    let theirs = ::procfs::net::InterfaceDeviceStatus::from_file(proc.join("net/dev")).unwrap();
    let ours = procfs::parse_net_dev(&text("net/dev")).unwrap();
    let not_lo = theirs.0.values().filter(|d| d.name != "lo");
    assert_eq!(
        ours.rx_bytes,
        not_lo.clone().map(|d| d.recv_bytes).sum::<u64>()
    );
    assert_eq!(ours.tx_bytes, not_lo.map(|d| d.sent_bytes).sum::<u64>());

    let theirs = ::procfs::IoPressure::from_file(proc.join("pressure/io")).unwrap();
    let ours = psi::parse_pressure(&text("pressure/io")).unwrap();
    let (some, full) = (ours.some.unwrap(), ours.full.unwrap());
    assert_eq!(some.total_usec, theirs.some.total);
    assert_eq!(full.total_usec, theirs.full.total);
    assert_eq!(some.avg60 as f32, theirs.some.avg60);
}

#[test]
fn every_published_name_is_documented_in_metrics_md() {
    let doc = include_str!("../../../METRICS.md");
    let (_, s) = two_samples(
        |root| CollectorConfig {
            per_cpu: true,
            ..CollectorConfig::with_root(root)
        },
        |_| {},
    );
    for sample in &s.samples {
        let name = sample.name.as_str();
        // A folded series is documented as its prefix up to the label: `…_cpu_<n>`, `…_l3_<id>`,
        // `…_chip_<chip>_sensor_<sensor>`.
        let folded = [("_cpu_", true), ("_l3_", true), ("_chip_", false)]
            .iter()
            .any(|(m, digits)| {
                name.rfind(m).is_some_and(|i| {
                    let rest = &name[i + m.len()..];
                    (!digits || rest.chars().all(|c| c.is_ascii_digit()))
                        && doc.contains(&format!("`{}", &name[..i + m.len()]))
                })
            });
        assert!(
            folded || doc.contains(&format!("`{name}`")),
            "{name} is not in METRICS.md"
        );
    }
}

// === textfile ===

#[test]
fn textfile_series_are_imported_in_file_order_and_builtins_win() {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&fixture("host-a"), tmp.path());
    let dir = tmp.path().join("var/lib/node_exporter/textfile_collector");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("a.prom"),
        "# TYPE node_health_metric gauge\nnode_health_metric 3\nfreeRAM 150.5\nnode_load1 999\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("b.prom"),
        "node_health_metric 7\ntemperature{sensor=\"x\"} 80\nbroken line here\ntemperature 85\n",
    )
    .unwrap();
    std::fs::write(dir.join("ignored.txt"), "node_other 1\n").unwrap();
    let mut c = Collector::new(CollectorConfig {
        textfile_dir: Some("/var/lib/node_exporter/textfile_collector".into()),
        ..CollectorConfig::with_root(tmp.path())
    });
    let s = c.sample_at(Instant::now(), wall(), &[]);
    // a.prom comes first; the labelled series is skipped; the bad line is reported by file.
    assert_eq!(s.get("node_health_metric"), Some(3.0));
    assert_eq!(s.get("freeRAM"), Some(150.5));
    assert_eq!(s.get("temperature"), Some(85.0));
    assert_eq!(s.get("node_other"), None);
    // The agent's own load average, not the file's.
    assert_eq!(s.get("node_load1"), Some(fixture_load1()));
    let errors: Vec<_> = s
        .errors
        .iter()
        .filter(|(src, _)| *src == Source::Textfile)
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].1.contains("b.prom"), "{}", errors[0].1);

    // A value rewritten between samples is read again; a removed file's series disappear.
    std::fs::write(dir.join("a.prom"), "node_health_metric 4\n").unwrap();
    std::fs::remove_file(dir.join("b.prom")).unwrap();
    let s = c.sample_at(Instant::now(), wall(), &[]);
    assert_eq!(s.get("node_health_metric"), Some(4.0));
    absent(&s, &["temperature", "freeRAM"]);
}

#[test]
fn a_missing_textfile_directory_is_absent_not_an_error() {
    let mut c = Collector::new(CollectorConfig {
        textfile_dir: Some("/nope".into()),
        ..CollectorConfig::with_root(fixture("host-a"))
    });
    let s = c.sample_at(Instant::now(), wall(), &[]);
    assert!(s.errors.is_empty(), "{:?}", s.errors);
}

fn fixture_load1() -> f64 {
    let text = std::fs::read_to_string(fixture("host-a").join("proc/loadavg")).unwrap();
    text.split_whitespace().next().unwrap().parse().unwrap()
}
