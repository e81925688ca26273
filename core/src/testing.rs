//! Helpers for tests and benches in every crate of the workspace that need no runtime: policies
//! as TAS writes them, node names of the clouds' shapes, a process's RSS and CPU. Waiting on a
//! condition is `telemesh_runtime::testing::eventually`.

/// A TASPolicy `namespace/name` with `strategies`, YAML indented under `spec.strategies` as in
/// TAS's own files (`"    dontschedule:\n      rules:\n      - {metricname: ...}\n"`).
///
/// # Panics
/// When the YAML is not a TASPolicy: a test's own input.
pub fn tas_policy(namespace: &str, name: &str, strategies: &str) -> crate::policy::TASPolicy {
    let yaml = format!(
        "apiVersion: telemetry.intel.com/v1alpha1\nkind: TASPolicy\n\
         metadata: {{name: {name}, namespace: {namespace}}}\nspec:\n  strategies:\n{strategies}"
    );
    serde_yaml_ng::from_str(&yaml).expect("a test's TASPolicy YAML")
}

/// Copies a directory tree (fixture trees for tests and benchmarks).
pub fn copy_tree(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let dest = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &dest)?;
        } else {
            std::fs::copy(entry.path(), &dest)?;
        }
    }
    Ok(())
}

/// Returns a process's resident memory in MiB (benchmarks read other processes' footprint).
pub fn process_rss_mib(pid: u32) -> f64 {
    status_mib(pid, &["VmRSS:"])[0]
}

/// Returns a process's resident memory split as `(anonymous, file-backed)` MiB: heap and stacks
/// versus mapped files, mostly the binary's own code pages (shared with every other process
/// running the same file).
pub fn process_rss_split_mib(pid: u32) -> (f64, f64) {
    let [anon, file] = status_mib(pid, &["RssAnon:", "RssFile:"]);
    (anon, file)
}

/// Reads kB fields of `/proc/<pid>/status` as MiB (0 when absent).
fn status_mib<const N: usize>(pid: u32, fields: &[&str; N]) -> [f64; N] {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    fields.map(|name| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    })
}

/// Returns the CPU time (user + system) a process has used, in seconds.
pub fn process_cpu_seconds(pid: u32) -> f64 {
    stat_cpu_seconds(
        &std::path::Path::new("/proc")
            .join(pid.to_string())
            .join("stat"),
    )
}

/// CPU seconds (user + system) of one thread of this process: its
/// `/proc/self/task/<tid>/stat` (`/proc/<tid>/stat` would count the whole process).
pub fn thread_cpu_seconds(tid: u32) -> f64 {
    stat_cpu_seconds(
        &std::path::Path::new("/proc/self/task")
            .join(tid.to_string())
            .join("stat"),
    )
}

/// utime + stime of a `stat` file, in seconds (100 ticks a second).
fn stat_cpu_seconds(path: &std::path::Path) -> f64 {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    let after_comm = stat.rsplit(')').next().unwrap_or_default();
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat, 11 and 12 after the command name.
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i)?.parse::<f64>().ok())
        .sum();
    ticks / 100.0
}

/// Writes `files` into `dir` as kubelet updates a Secret volume: a new timestamped directory
/// (`generation` names it), then an atomic swap of the `..data` symlink the visible names point
/// through (created on the first call). cert-manager's rotations reach pods this way.
pub fn kubelet_swap(
    dir: &std::path::Path,
    generation: u32,
    files: &[(&str, &[u8])],
) -> std::io::Result<()> {
    let target = dir.join(format!("..2026_11_25_{generation:04}"));
    std::fs::create_dir_all(&target)?;
    for (name, contents) in files {
        std::fs::write(target.join(name), contents)?;
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(format!("..data/{name}"), &link)?;
        }
    }
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target.file_name().unwrap_or_default(), &tmp)?;
    std::fs::rename(&tmp, dir.join("..data"))
}

/// Thirty of the agent's metric names over six families (CPU, load, memory, disk, network,
/// pressure, hwmon), for benchmarks whose members should publish what an agent publishes.
pub fn agent_metric_names() -> Vec<crate::metric::MetricName> {
    let mut names: Vec<String> = [
        "node_cpu_utilization_ratio",
        "node_load1",
        "node_load5",
        "node_load15",
        "node_memory_utilization_ratio",
        "node_disk_read_bytes_per_second",
        "node_disk_write_bytes_per_second",
        "node_disk_reads_per_second",
        "node_disk_writes_per_second",
        "node_network_receive_bytes_per_second",
        "node_network_transmit_bytes_per_second",
        "node_hwmon_temp_max_celsius",
    ]
    .map(str::to_owned)
    .to_vec();
    for resource in ["cpu", "memory", "io"] {
        for kind in ["some", "full"] {
            for window in ["avg10", "avg60", "avg300"] {
                names.push(format!("node_pressure_{resource}_{kind}_{window}_ratio"));
            }
        }
    }
    names
        .into_iter()
        .filter_map(|n| crate::metric::MetricName::new(n).ok())
        .collect()
}

/// Member `i`'s values of the [`agent_metric_names`]: measured-looking ratios and rates to 17
/// digits, as collectors compute them, different from member to member.
pub fn agent_samples(i: usize) -> Vec<crate::metric::Sample> {
    agent_metric_names()
        .into_iter()
        .enumerate()
        .map(|(k, name)| crate::metric::Sample {
            name,
            value: ((i * 31 + k * 17) % 1000) as f64 / 997.0,
        })
        .collect()
}

/// How node names look, for benches of gossip (names are in every digest, and random parts
/// compress worse) and of cells (names choose the cell).
#[derive(Clone, Copy, Debug)]
pub enum NameShape {
    /// `ip-10-0-3-17.eu-west-1.compute.internal`, addresses in order (the default).
    EksSequential,
    /// The same with addresses spread over a /16, as a real VPC hands them out.
    EksRandomIp,
    /// `gke-<cluster>-<pool>-<8 hex>-<4 alphanumerics>`.
    Gke,
    /// `aks-<pool>-<8 digits>-vmss<6 base-36>`.
    Aks,
}

impl NameShape {
    /// The shape the environment variable `var` names (`eks`, the default, `eks-ip`, `gke` or
    /// `aks`).
    ///
    /// # Panics
    /// On any other value: benches only, where a typo must not measure the wrong thing.
    #[allow(clippy::panic)]
    pub fn from_env(var: &str) -> Self {
        match std::env::var(var).as_deref() {
            Ok("eks-ip") => Self::EksRandomIp,
            Ok("gke") => Self::Gke,
            Ok("aks") => Self::Aks,
            Ok("eks") | Err(_) => Self::EksSequential,
            Ok(other) => panic!("{var}={other}: use eks, eks-ip, gke or aks"),
        }
    }

    /// Node `i`'s name: random parts from a fixed hash of `i`, the same every run.
    pub fn name(self, i: usize) -> String {
        let alnum = |v: u64, n: usize| {
            const A: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
            (0..n)
                .map(|k| A[((v >> (k * 6)) % 36) as usize] as char)
                .collect::<String>()
        };
        match self {
            Self::EksSequential => {
                format!("ip-10-0-{}-{}.eu-west-1.compute.internal", i / 250, i % 250)
            }
            Self::EksRandomIp => {
                let v = mix(i as u64, 1);
                format!(
                    "ip-10-{}-{}-{}.eu-west-1.compute.internal",
                    v % 256,
                    (v >> 8) % 256,
                    (v >> 16) % 254 + 1
                )
            }
            // One instance group (hash) per zone, a random suffix per node.
            Self::Gke => format!(
                "gke-prod-eu-default-pool-{:08x}-{}",
                mix((i % 3) as u64, 2) as u32,
                alnum(mix(i as u64, 3), 4)
            ),
            // A scale set per pool of 1,000 (its number), instances in base 36.
            Self::Aks => {
                let (pool, instance) = (i / 1000, i % 1000);
                format!(
                    "aks-nodepool{}-{:08}-vmss{:0>6}",
                    pool + 1,
                    mix(pool as u64, 4) % 100_000_000,
                    base36(instance as u64)
                )
            }
        }
    }
}

/// A fixed 64-bit mix of `v` (splitmix64's finaliser).
fn mix(v: u64, salt: u64) -> u64 {
    let mut x = (v ^ salt.rotate_left(32)).wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn base36(mut v: u64) -> String {
    const A: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(A[(v % 36) as usize]);
        v /= 36;
        if v == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}
