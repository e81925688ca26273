//! The scheduler configurations in deploy/scheduler/ register this extender as it serves: the
//! URL plus each verb is one of the coordinator's default paths, the weight is positive (the
//! scheduler refuses 0 with a prioritizeVerb), the extender is ignorable and sees every pod, and
//! TAS's dummy resource is ignored by each profile's fit check.
#![allow(clippy::unwrap_used)]

use telemesh_coordinator::extender::http::Paths;

#[test]
fn scheduler_configurations_match_the_served_paths() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/scheduler");
    let paths = Paths::default();
    for file in [
        "kube-scheduler-config.yaml",
        "kube-scheduler-config.dev.yaml",
    ] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let v: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
        assert_eq!(v["apiVersion"], "kubescheduler.config.k8s.io/v1", "{file}");
        assert_eq!(v["kind"], "KubeSchedulerConfiguration");
        let ext = &v["extenders"][0];
        let prefix = ext["urlPrefix"].as_str().unwrap().trim_end_matches('/');
        let path_of = |verb: &str| {
            let url = format!("{prefix}/{}", ext[verb].as_str().unwrap());
            let after_scheme = url.split_once("://").unwrap().1;
            after_scheme[after_scheme.find('/').unwrap()..].to_owned()
        };
        assert_eq!(path_of("filterVerb"), paths.filter, "{file}");
        assert_eq!(path_of("prioritizeVerb"), paths.prioritize, "{file}");
        assert_eq!(path_of("preemptVerb"), paths.preempt, "{file}");
        assert!(ext["weight"].as_i64().unwrap() > 0, "{file}");
        assert_eq!(ext["ignorable"], true, "{file}");
        // Every pod reaches the extender (workload actions place pods of any workload), and
        // TAS's dummy resource stays out of every profile's fit check.
        assert!(
            ext.get("managedResources").is_none(),
            "{file}: a managedResources list would hide pods from the extender"
        );
        for profile in v["profiles"].as_array().unwrap() {
            let fit = profile["pluginConfig"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["name"] == "NodeResourcesFit")
                .unwrap_or_else(|| panic!("{file}: no NodeResourcesFit args in {profile}"));
            assert!(
                fit["args"]["ignoredResources"]
                    .as_array()
                    .unwrap()
                    .contains(&serde_json::json!("telemetry/scheduling")),
                "{file}: {fit}"
            );
        }
        assert!(
            ext.get("bindVerb").is_none(),
            "{file}: the coordinator does not bind"
        );
    }
}
