//! The agent's telemetry file parsers: procfs, PSI, cgroup, resctrl, hwmon and Prometheus text
//! (node-exporter, textfile collector). The first byte picks the parser, the rest is the file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use telemesh_agent::collection::collect::procfs::CpuTimes;
use telemesh_agent::collection::collect::{cgroup, hwmon, procfs, prom, psi, resctrl};

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    match which % 13 {
        0 => {
            let (mut total, mut cpus) = (CpuTimes::default(), Vec::new());
            if procfs::parse_stat(text, true, &mut total, &mut cpus).is_ok() {
                let _ = procfs::cpu_utilization(&CpuTimes::default(), &total);
            }
        }
        1 => drop(procfs::parse_loadavg(text)),
        2 => {
            if let Ok(m) = procfs::parse_meminfo(text) {
                let _ = m.utilization();
            }
        }
        3 => drop(procfs::parse_diskstats(text)),
        4 => drop(procfs::parse_net_dev(text)),
        5 => drop(psi::parse_pressure(text)),
        6 => drop(cgroup::parse_cpu_stat(text)),
        7 => drop(cgroup::parse_u64(text)),
        8 => drop(cgroup::parse_oom_kill(text)),
        9 => drop(resctrl::parse_counter(text)),
        10 => drop(resctrl::parse_mon_features(text)),
        11 => drop(prom::parse_exposition(text, &prom::ImportRule::default())),
        _ => drop(hwmon::parse_millidegrees(text)),
    }
});
