//! The scheduler configurations in deploy/scheduler/ register this extender as it serves: the
//! URL plus each verb is one of the coordinator's default paths, the weight is positive (the
//! scheduler refuses 0 with a prioritizeVerb), and the extender is ignorable.
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
        assert_eq!(ext["managedResources"][0]["name"], "telemetry/scheduling");
        assert_eq!(ext["managedResources"][0]["ignoredByScheduler"], true);
        assert!(
            ext.get("bindVerb").is_none(),
            "{file}: the coordinator does not bind"
        );
    }
}
