//! Authentication and authorization: bearer tokens, 401/403, TokenReview, SubjectAccessReview,
//! and HTTPS.

use std::collections::HashMap;

use k8s_openapi::api::authentication::v1::TokenReview;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use telemesh_sim::{Auth, Rule, SimConfig, UserInfo};

use super::{code, sim_with};

fn table() -> Auth {
    let mut tokens = HashMap::new();
    tokens.insert(
        "reader-token".to_string(),
        UserInfo {
            username: "reader".into(),
            uid: "1".into(),
            groups: vec!["readers".into()],
            ..UserInfo::default()
        },
    );
    tokens.insert(
        "admin-token".to_string(),
        UserInfo {
            username: "admin".into(),
            uid: "0".into(),
            groups: vec!["system:masters".into()],
            ..UserInfo::default()
        },
    );
    Auth {
        tokens,
        rules: vec![Rule {
            subjects: vec!["group:readers".into()],
            verbs: vec!["get".into(), "list".into(), "watch".into()],
            api_groups: vec!["".into()],
            resources: vec!["pods".into()],
            namespaces: vec![],
        }],
    }
}

#[tokio::test]
async fn tokens_authenticate_and_rules_authorize() {
    let config = SimConfig {
        auth: table(),
        kubeconfig_token: Some("reader-token".into()),
        ..Default::default()
    };
    let (_sim, c) = sim_with(config).await;
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    pods.list(&ListParams::default()).await.unwrap();
    let e = pods
        .create(&PostParams::default(), &super::pod("p", &[]))
        .await
        .unwrap_err();
    assert_eq!(code(&e), 403);
    let bad = SimConfig {
        auth: table(),
        kubeconfig_token: Some("wrong".into()),
        ..Default::default()
    };
    let (_sim2, c2) = sim_with(bad).await;
    let e = Api::<Pod>::default_namespaced(c2)
        .list(&ListParams::default())
        .await
        .unwrap_err();
    assert_eq!(code(&e), 401);
}

#[tokio::test]
async fn reviews_answer_from_the_table() {
    let config = SimConfig {
        auth: table(),
        kubeconfig_token: Some("admin-token".into()),
        ..Default::default()
    };
    let (_sim, c) = sim_with(config).await;
    let tr: TokenReview =
        serde_json::from_value(json!({"spec": {"token": "reader-token"}})).unwrap();
    let out = Api::<TokenReview>::all(c.clone())
        .create(&PostParams::default(), &tr)
        .await
        .unwrap();
    let status = out.status.unwrap();
    assert_eq!(status.authenticated, Some(true));
    assert_eq!(status.user.unwrap().username.as_deref(), Some("reader"));
    let sar = |verb: &str| -> SubjectAccessReview {
        serde_json::from_value(json!({"spec": {"user": "reader", "groups": ["readers"], "resourceAttributes": {"verb": verb, "resource": "pods", "namespace": "default"}}})).unwrap()
    };
    let sars: Api<SubjectAccessReview> = Api::all(c.clone());
    assert!(
        sars.create(&PostParams::default(), &sar("list"))
            .await
            .unwrap()
            .status
            .unwrap()
            .allowed
    );
    assert!(
        !sars
            .create(&PostParams::default(), &sar("delete"))
            .await
            .unwrap()
            .status
            .unwrap()
            .allowed
    );
}

#[tokio::test]
async fn https_with_the_generated_ca_works() {
    let (sim, c) = sim_with(SimConfig {
        tls: true,
        ..Default::default()
    })
    .await;
    assert!(sim.url().starts_with("https://"));
    Api::<Pod>::default_namespaced(c)
        .list(&ListParams::default())
        .await
        .unwrap();
}
