//! What keeps a pod placed on a node from starting its containers, found as the kubelet finds
//! it and in its order: first the volumes (a Secret or ConfigMap volume whose object is missing
//! cannot be mounted: the kubelet records `FailedMount` Events, creates no sandbox, so the pod
//! has no IP, and its containers wait in `ContainerCreating`), then, for each container, its
//! image (a reference that does not parse: `InvalidImageName`; one the registry refuses:
//! `ErrImagePull`, then `ImagePullBackOff` until the next attempt) and its configuration (a
//! Secret or ConfigMap, or a key of one, that an environment variable names is missing:
//! `CreateContainerConfigError`). The kubelet keeps the pod `Pending` and retries; so does the
//! stand-in, and the containers start once nothing keeps them.
//!
//! sim has no registry: every image whose reference parses is pulled, except in pods annotated
//! [`IMAGE_PULL_ANNOTATION`]` = "fail"`, whose images the registry refuses as an unknown image.
//! A node's own start failures (a sandbox its network plugin cannot set up, a pull its network
//! cannot make) are the kubelet's start fault rules ([`node_sandbox`], [`node_pull`]), ordered
//! with what is found here by [`Blocker::first`]. Each blocker has the Warning Event the kubelet
//! records for it ([`Blocker::event`]).
//! Not played: projected volumes, a volume's `items` naming a missing key, init containers,
//! `imagePullPolicy: Never`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret};
use kube::{Api, Client, ResourceExt as _};
use regex::Regex;

/// The annotation that makes the registry refuse a pod's images (value `fail`).
pub const IMAGE_PULL_ANNOTATION: &str = "sim.telemesh.io/image-pull";

/// What keeps a pod's containers from starting now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocker {
    /// A volume cannot be mounted: the pod has no sandbox, its containers wait in
    /// `ContainerCreating` (the message is the kubelet's `FailedMount` Event's).
    Mount {
        /// `MountVolume.SetUp failed for volume "v" : secret "s" not found`.
        message: String,
    },
    /// The node cannot create the pod's sandbox (its network plugin fails): no IP, containers
    /// waiting in `ContainerCreating`, `FailedCreatePodSandBox` Events.
    Sandbox {
        /// The runtime's error, as the Event says it.
        message: String,
    },
    /// An image reference that does not parse: `InvalidImageName`.
    InvalidImageName {
        /// The kubelet's message.
        message: String,
    },
    /// The registry refuses the image: `ErrImagePull` at each attempt, `ImagePullBackOff`
    /// between attempts.
    Pull {
        /// The image as the container names it.
        image: String,
        /// The runtime's error.
        message: String,
    },
    /// The container's configuration cannot be built: `CreateContainerConfigError`.
    Config {
        /// `secret "s" not found`, `couldn't find key k in ConfigMap ns/c`.
        message: String,
    },
}

impl Blocker {
    /// Whether the kubelet has created the pod's sandbox (and given it an IP): not while a
    /// volume is not mounted.
    pub fn has_sandbox(&self) -> bool {
        !matches!(self, Self::Mount { .. } | Self::Sandbox { .. })
    }

    /// The first of what the volumes, images and environment left (`found`) and a start fault
    /// of the node (`fault`), in the kubelet's order: volumes are mounted before the sandbox is
    /// created, and the sandbox before any image is pulled.
    pub fn first(found: Option<Blocker>, fault: Option<Blocker>) -> Option<Blocker> {
        match (found, fault) {
            (Some(mount @ Self::Mount { .. }), _) => Some(mount),
            (_, Some(sandbox @ Self::Sandbox { .. })) => Some(sandbox),
            (Some(found), _) => Some(found),
            (None, fault) => fault,
        }
    }

    /// The Warning Event the kubelet records on the pod for it: (reason, message).
    pub fn event(&self) -> (&'static str, String) {
        match self {
            Self::Mount { message } => ("FailedMount", message.clone()),
            Self::Sandbox { message } => ("FailedCreatePodSandBox", message.clone()),
            Self::InvalidImageName { message } => ("InspectFailed", message.clone()),
            Self::Pull { image, message } => (
                "Failed",
                format!("Failed to pull image {image:?}: {message}"),
            ),
            Self::Config { message } => ("Failed", format!("Error: {message}")),
        }
    }

    /// The containers' waiting `reason` and `message`, `backing_off` between pull attempts.
    pub fn waiting(&self, backing_off: bool) -> (&'static str, Option<String>) {
        match self {
            Self::Mount { .. } | Self::Sandbox { .. } => ("ContainerCreating", None),
            Self::InvalidImageName { message } => ("InvalidImageName", Some(message.clone())),
            Self::Pull { image, .. } if backing_off => (
                "ImagePullBackOff",
                Some(format!("Back-off pulling image {image:?}")),
            ),
            Self::Pull { message, .. } => ("ErrImagePull", Some(message.clone())),
            Self::Config { message } => ("CreateContainerConfigError", Some(message.clone())),
        }
    }

    /// Whether the kubelet retries after its image back-off (a pull), rather than at its next
    /// look.
    pub fn is_pull(&self) -> bool {
        matches!(self, Self::Pull { .. })
    }
}

/// The node's network plugin cannot set up a sandbox for `pod` (the pod IPs of node `index`'s
/// range are all taken, as bridge/host-local report it).
pub fn node_sandbox(pod: &Pod, index: u8) -> Blocker {
    let id: String = pod
        .uid()
        .unwrap_or_default()
        .bytes()
        .map(|b| format!("{b:02x}"))
        .chain(std::iter::repeat_n("0".to_owned(), 64))
        .collect::<String>()
        .chars()
        .take(64)
        .collect();
    Blocker::Sandbox {
        message: format!(
            "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network \
             for sandbox {id:?}: plugin type=\"bridge\" name=\"kindnet\" failed (add): failed to \
             allocate for range 0: no IP addresses available in range set: \
             10.244.{index}.1-10.244.{index}.254"
        ),
    }
}

/// The node cannot reach the registry of `pod`'s first image whose reference parses (its DNS
/// lookups time out); None when no image parses (that is `InvalidImageName`, found first).
pub fn node_pull(pod: &Pod) -> Option<Blocker> {
    let spec = pod.spec.as_ref()?;
    spec.containers.iter().find_map(|c| {
        let image = c.image.clone()?;
        let reference = normalize_image(&image).ok()?;
        let (registry, path) = reference.split_once('/')?;
        let (repository, tag) = path.rsplit_once(':').unwrap_or((path, "latest"));
        Some(Blocker::Pull {
            message: format!(
                "rpc error: code = Unknown desc = failed to pull and unpack image {reference:?}: \
                 failed to resolve reference {reference:?}: failed to do request: Head \
                 \"https://{registry}/v2/{repository}/manifests/{tag}\": dial tcp: lookup \
                 {registry}: i/o timeout"
            ),
            image,
        })
    })
}

/// A kind of object a pod refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A Secret.
    Secret,
    /// A ConfigMap.
    ConfigMap,
}

impl Kind {
    /// As the kubelet names it in its messages.
    fn word(self) -> &'static str {
        match self {
            Self::Secret => "secret",
            Self::ConfigMap => "configmap",
        }
    }

    /// As the kubelet names it before a key.
    fn kind(self) -> &'static str {
        match self {
            Self::Secret => "Secret",
            Self::ConfigMap => "ConfigMap",
        }
    }
}

/// What a lookup of a referenced object found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// It exists, with these keys.
    Keys(BTreeSet<String>),
    /// It does not exist.
    Missing,
    /// The lookup failed otherwise: taken as present, every key with it.
    Unknown,
}

/// The objects a pod refers to, as found.
pub type Objects = BTreeMap<(Kind, String), Found>;

/// The first thing that keeps `pod`'s containers from starting, looking up the Secrets and
/// ConfigMaps it needs through `client`.
pub async fn blocker(client: &Client, pod: &Pod) -> Option<Blocker> {
    let namespace = pod.namespace().unwrap_or_default();
    let mut objects = Objects::new();
    for (kind, name) in references(pod) {
        let found = match kind {
            Kind::Secret => {
                lookup::<Secret>(client, &namespace, &name, |s| {
                    s.data.iter().flat_map(|d| d.keys().cloned()).collect()
                })
                .await
            }
            Kind::ConfigMap => {
                lookup::<ConfigMap>(client, &namespace, &name, |c| {
                    let data = c.data.iter().flat_map(|d| d.keys().cloned());
                    let binary = c.binary_data.iter().flat_map(|d| d.keys().cloned());
                    data.chain(binary).collect()
                })
                .await
            }
        };
        objects.insert((kind, name), found);
    }
    blocker_in(pod, &objects)
}

async fn lookup<K>(
    client: &Client,
    namespace: &str,
    name: &str,
    keys: impl Fn(&K) -> BTreeSet<String>,
) -> Found
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
    K::DynamicType: Default,
{
    match Api::<K>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
    {
        Ok(Some(object)) => Found::Keys(keys(&object)),
        Ok(None) => Found::Missing,
        Err(e) => {
            tracing::debug!(namespace, name, error = %e, "kubelet could not look up an object a pod needs; taking it as present");
            Found::Unknown
        }
    }
}

/// The Secrets and ConfigMaps `pod` needs to start (not those marked optional): its volumes',
/// and those its containers' environment names.
pub fn references(pod: &Pod) -> BTreeSet<(Kind, String)> {
    let mut refs = BTreeSet::new();
    let Some(spec) = pod.spec.as_ref() else {
        return refs;
    };
    for v in spec.volumes.iter().flatten() {
        if let Some(s) = &v.secret
            && s.optional != Some(true)
            && let Some(name) = &s.secret_name
        {
            refs.insert((Kind::Secret, name.clone()));
        }
        if let Some(c) = &v.config_map
            && c.optional != Some(true)
        {
            refs.insert((Kind::ConfigMap, c.name.clone()));
        }
    }
    for c in &spec.containers {
        refs.extend(
            env_references(c)
                .into_iter()
                .map(|(kind, name, _)| (kind, name)),
        );
    }
    refs
}

/// The objects container `c`'s environment needs: kind, name and the key (None: all of it,
/// `envFrom`).
fn env_references(c: &Container) -> Vec<(Kind, String, Option<String>)> {
    let mut refs = Vec::new();
    for from in c.env_from.iter().flatten() {
        if let Some(s) = &from.secret_ref
            && s.optional != Some(true)
        {
            refs.push((Kind::Secret, s.name.clone(), None));
        }
        if let Some(m) = &from.config_map_ref
            && m.optional != Some(true)
        {
            refs.push((Kind::ConfigMap, m.name.clone(), None));
        }
    }
    for e in c.env.iter().flatten() {
        let Some(from) = &e.value_from else { continue };
        if let Some(s) = &from.secret_key_ref
            && s.optional != Some(true)
        {
            refs.push((Kind::Secret, s.name.clone(), Some(s.key.clone())));
        }
        if let Some(m) = &from.config_map_key_ref
            && m.optional != Some(true)
        {
            refs.push((Kind::ConfigMap, m.name.clone(), Some(m.key.clone())));
        }
    }
    refs
}

/// The first thing that keeps `pod`'s containers from starting, given what its references
/// were found to be (one not in `objects` is taken as present).
pub fn blocker_in(pod: &Pod, objects: &Objects) -> Option<Blocker> {
    let spec = pod.spec.as_ref()?;
    let missing =
        |kind: Kind, name: &str| objects.get(&(kind, name.to_owned())) == Some(&Found::Missing);
    for v in spec.volumes.iter().flatten() {
        let source = match (&v.secret, &v.config_map) {
            (Some(s), _) if s.optional != Some(true) => {
                s.secret_name.as_deref().map(|n| (Kind::Secret, n))
            }
            (_, Some(c)) if c.optional != Some(true) => Some((Kind::ConfigMap, c.name.as_str())),
            _ => None,
        };
        if let Some((kind, name)) = source
            && missing(kind, name)
        {
            return Some(Blocker::Mount {
                message: format!(
                    "MountVolume.SetUp failed for volume {:?} : {} {name:?} not found",
                    v.name,
                    kind.word()
                ),
            });
        }
    }
    let refuse = pod
        .annotations()
        .get(IMAGE_PULL_ANNOTATION)
        .is_some_and(|v| v == "fail");
    for c in &spec.containers {
        // A pod without an image never reaches a kubelet (the API server requires one); sim's
        // tests make such pods, and they start.
        let image = c.image.clone().unwrap_or_default();
        match normalize_image(&image) {
            _ if image.is_empty() => {}
            Err(e) => {
                return Some(Blocker::InvalidImageName {
                    message: format!(
                        "Failed to apply default image tag {image:?}: couldn't parse image name {image:?}: {e}"
                    ),
                });
            }
            Ok(reference) if refuse => {
                return Some(Blocker::Pull {
                    message: format!(
                        "rpc error: code = NotFound desc = failed to pull and unpack image {reference:?}: \
                         failed to resolve reference {reference:?}: {reference}: not found"
                    ),
                    image,
                });
            }
            Ok(_) => {}
        }
        let namespace = pod.namespace().unwrap_or_default();
        for (kind, name, key) in env_references(c) {
            let message = match (objects.get(&(kind, name.clone())), key) {
                (Some(Found::Missing), _) => format!("{} {name:?} not found", kind.word()),
                (Some(Found::Keys(keys)), Some(key)) if !keys.contains(&key) => format!(
                    "couldn't find key {key} in {} {namespace}/{name}",
                    kind.kind()
                ),
                _ => continue,
            };
            return Some(Blocker::Config { message });
        }
    }
    None
}

/// The docker reference grammar (github.com/distribution/reference, as the kubelet parses
/// images): `[domain[:port]/]path[:tag][@digest]`.
static REFERENCE: LazyLock<Regex> = LazyLock::new(|| {
    let alphanumeric = "[a-z0-9]+";
    let separator = "(?:[._]|__|[-]+)";
    let path_component = format!("{alphanumeric}(?:{separator}{alphanumeric})*");
    let remote_name = format!("{path_component}(?:/{path_component})*");
    let domain_component = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])";
    let domain_name = format!(r"{domain_component}(?:\.{domain_component})*");
    let host = format!(r"(?:{domain_name}|\[(?:[a-fA-F0-9:]+)\])");
    let domain_and_port = format!("{host}(?::[0-9]+)?");
    let name = format!("(?:{domain_and_port}/)?{remote_name}");
    let tag = "[0-9A-Za-z_][0-9A-Za-z_.-]{0,127}";
    let digest = "[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][[:xdigit:]]{32,}";
    Regex::new(&format!("^({name})(?::({tag}))?(?:@({digest}))?$"))
        .expect("the reference grammar is a valid regular expression")
});

/// `image` normalized as the kubelet's parser does (`busybox` → `docker.io/library/busybox:latest`),
/// or why it does not parse (distribution/reference's `ParseNormalizedNamed` errors).
pub fn normalize_image(image: &str) -> Result<String, String> {
    let hex64 = image.len() == 64
        && image
            .bytes()
            .all(|b| matches!(b, b'a'..=b'f' | b'0'..=b'9'));
    if hex64 {
        return Err(format!(
            "invalid repository name ({image}), cannot specify 64-byte hexadecimal strings"
        ));
    }
    let (domain, remainder) = split_domain(image);
    let remote = remainder.split(':').next().unwrap_or_default();
    if remote.to_lowercase() != remote {
        return Err(format!(
            "invalid reference format: repository name ({remote}) must be lowercase"
        ));
    }
    let full = format!("{domain}/{remainder}");
    let Some(captures) = REFERENCE.captures(&full) else {
        let lower = full.to_lowercase();
        return Err(if lower != full && REFERENCE.is_match(&lower) {
            "repository name must be lowercase".to_owned()
        } else {
            "invalid reference format".to_owned()
        });
    };
    let name = captures.get(1).map_or("", |m| m.as_str());
    let path = name.split_once('/').map_or(name, |(_, path)| path);
    if path.len() > 255 {
        return Err("repository name must not be more than 255 characters".to_owned());
    }
    if let Some(digest) = captures.get(3) {
        let (algorithm, hex) = digest.as_str().split_once(':').unwrap_or_default();
        let length = match algorithm {
            "sha256" => 64,
            "sha384" => 96,
            "sha512" => 128,
            _ => return Err("unsupported digest algorithm".to_owned()),
        };
        if hex.len() != length {
            return Err("invalid checksum digest length".to_owned());
        }
        return Ok(full);
    }
    Ok(if captures.get(2).is_some() {
        full
    } else {
        format!("{full}:latest")
    })
}

/// Docker's `splitDockerDomain`: the first path element is the registry when it looks like a
/// host (a dot, a port, `localhost`, upper case), else Docker Hub, with `library/` for
/// single-element names.
fn split_domain(name: &str) -> (&str, String) {
    let (domain, remainder) = match name.split_once('/') {
        None => return ("docker.io", format!("library/{name}")),
        Some((first, rest))
            if first == "localhost"
                || first.contains(['.', ':'])
                || first.to_lowercase() != first =>
        {
            if first == "index.docker.io" {
                ("docker.io", rest)
            } else {
                (first, rest)
            }
        }
        Some(_) => ("docker.io", name),
    };
    if domain == "docker.io" && !remainder.contains('/') {
        return (domain, format!("library/{remainder}"));
    }
    (domain, remainder.to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn images_parse_and_normalize_as_the_kubelets_parser_does() {
        for (image, normalized) in [
            ("busybox", "docker.io/library/busybox:latest"),
            ("busybox:1.36", "docker.io/library/busybox:1.36"),
            ("library/busybox", "docker.io/library/busybox:latest"),
            ("index.docker.io/team/app:v1", "docker.io/team/app:v1"),
            ("registry.example/work:1", "registry.example/work:1"),
            ("localhost:5000/a/b-c__d.e:x", "localhost:5000/a/b-c__d.e:x"),
            ("Registry.Example/work", "Registry.Example/work:latest"),
            ("[::1]:5000/app:v1", "[::1]:5000/app:v1"),
            (
                "busybox@sha256:7cc4b5aefd1d0cadf8d97d4350462ba51c694ebca145b08d7d41b41acc8db5aa",
                "docker.io/library/busybox@sha256:7cc4b5aefd1d0cadf8d97d4350462ba51c694ebca145b08d7d41b41acc8db5aa",
            ),
        ] {
            assert_eq!(normalize_image(image).as_deref(), Ok(normalized), "{image}");
        }
        for (image, error) in [
            (
                "registry.example/Work:1",
                "invalid reference format: repository name (Work) must be lowercase",
            ),
            (
                "Busybox",
                "invalid reference format: repository name (library/Busybox) must be lowercase",
            ),
            ("", "invalid reference format"),
            ("busybox:", "invalid reference format"),
            ("busy box", "invalid reference format"),
            ("registry.example//work", "invalid reference format"),
            ("busybox:-tag", "invalid reference format"),
            ("busybox@sha256:abc", "invalid reference format"),
            (
                "busybox@md5:7cc4b5aefd1d0cadf8d97d4350462ba5",
                "unsupported digest algorithm",
            ),
            (
                "7cc4b5aefd1d0cadf8d97d4350462ba51c694ebca145b08d7d41b41acc8db5aa",
                "invalid repository name (7cc4b5aefd1d0cadf8d97d4350462ba51c694ebca145b08d7d41b41acc8db5aa), cannot specify 64-byte hexadecimal strings",
            ),
        ] {
            assert_eq!(normalize_image(image), Err(error.to_owned()), "{image:?}");
        }
    }

    fn pod(spec: Value, annotations: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "batch", "annotations": annotations},
            "spec": spec
        }))
        .unwrap()
    }

    fn container(image: &str, extra: Value) -> Value {
        let mut c = json!({"name": "job", "image": image});
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    }

    #[test]
    fn volumes_then_the_image_then_the_environment_as_the_kubelet_finds_them() {
        let env = json!({"env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "env-token", "key": "t"}}}]});
        let everything_wrong = pod(
            json!({"containers": [container("registry.example/Work:1", env.clone())],
                   "volumes": [{"name": "token", "secret": {"secretName": "vol-token"}}]}),
            json!({}),
        );
        assert_eq!(
            references(&everything_wrong),
            BTreeSet::from([
                (Kind::Secret, "env-token".to_owned()),
                (Kind::Secret, "vol-token".to_owned())
            ])
        );
        let mut objects = Objects::from([
            ((Kind::Secret, "vol-token".to_owned()), Found::Missing),
            ((Kind::Secret, "env-token".to_owned()), Found::Missing),
        ]);
        let b = blocker_in(&everything_wrong, &objects).unwrap();
        assert_eq!(
            b,
            Blocker::Mount {
                message:
                    "MountVolume.SetUp failed for volume \"token\" : secret \"vol-token\" not found"
                        .into()
            }
        );
        assert_eq!(b.waiting(false), ("ContainerCreating", None));
        assert!(!b.has_sandbox());

        objects.insert((Kind::Secret, "vol-token".to_owned()), Found::Unknown);
        let b = blocker_in(&everything_wrong, &objects).unwrap();
        assert_eq!(b.waiting(false).0, "InvalidImageName");
        assert_eq!(
            b.waiting(false).1.unwrap(),
            "Failed to apply default image tag \"registry.example/Work:1\": couldn't parse image name \
             \"registry.example/Work:1\": invalid reference format: repository name (Work) must be lowercase"
        );
        assert!(b.has_sandbox());

        let env_only = pod(
            json!({"containers": [container("busybox", env)]}),
            json!({}),
        );
        let b = blocker_in(&env_only, &objects).unwrap();
        assert_eq!(
            b.waiting(false),
            (
                "CreateContainerConfigError",
                Some("secret \"env-token\" not found".into())
            )
        );
        objects.insert(
            (Kind::Secret, "env-token".to_owned()),
            Found::Keys(BTreeSet::from(["other".to_owned()])),
        );
        assert_eq!(
            blocker_in(&env_only, &objects)
                .unwrap()
                .waiting(false)
                .1
                .unwrap(),
            "couldn't find key t in Secret batch/env-token"
        );
        objects.insert(
            (Kind::Secret, "env-token".to_owned()),
            Found::Keys(BTreeSet::from(["t".to_owned()])),
        );
        assert_eq!(blocker_in(&env_only, &objects), None, "now it starts");
    }

    #[test]
    fn a_refused_image_fails_to_pull_then_backs_off() {
        let p = pod(
            json!({"containers": [container("registry.example/work:1", json!({}))]}),
            json!({IMAGE_PULL_ANNOTATION: "fail"}),
        );
        let b = blocker_in(&p, &Objects::new()).unwrap();
        assert!(b.is_pull());
        let (reason, message) = b.waiting(false);
        assert_eq!(reason, "ErrImagePull");
        assert!(
            message
                .unwrap()
                .contains("failed to pull and unpack image \"registry.example/work:1\""),
        );
        assert_eq!(
            b.waiting(true),
            (
                "ImagePullBackOff",
                Some("Back-off pulling image \"registry.example/work:1\"".into())
            )
        );
        let fine = pod(
            json!({"containers": [container("registry.example/work:1", json!({}))]}),
            json!({}),
        );
        assert_eq!(blocker_in(&fine, &Objects::new()), None);
    }

    #[test]
    fn a_nodes_own_start_failures_come_in_the_kubelets_order_with_their_events() {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "batch", "uid": "u1"},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
        }))
        .unwrap();
        let sandbox = node_sandbox(&p, 1);
        assert!(!sandbox.has_sandbox());
        assert_eq!(sandbox.waiting(false), ("ContainerCreating", None));
        let (reason, message) = sandbox.event();
        assert_eq!(reason, "FailedCreatePodSandBox");
        assert!(
            message.starts_with("Failed to create pod sandbox: rpc error"),
            "{message}"
        );
        assert!(
            message.ends_with("range set: 10.244.1.1-10.244.1.254"),
            "{message}"
        );
        let pull = node_pull(&p).unwrap();
        assert_eq!(pull.waiting(false).0, "ErrImagePull");
        let (reason, message) = pull.event();
        assert_eq!(reason, "Failed");
        assert!(
            message.starts_with("Failed to pull image \"registry.k8s.io/pause:3.10\": rpc error")
                && message.contains(
                    "Head \"https://registry.k8s.io/v2/pause/manifests/3.10\": dial tcp: \
                     lookup registry.k8s.io: i/o timeout"
                ),
            "{message}"
        );
        let mount = Blocker::Mount {
            message: "MountVolume.SetUp failed for volume \"v\" : secret \"s\" not found".into(),
        };
        assert_eq!(mount.event().0, "FailedMount");
        let config = Blocker::Config {
            message: "secret \"s\" not found".into(),
        };
        assert_eq!(config.event().1, "Error: secret \"s\" not found");
        // Volumes first, then the sandbox, then images and the environment.
        let first = Blocker::first;
        assert_eq!(
            first(Some(mount.clone()), Some(sandbox.clone())),
            Some(mount)
        );
        assert_eq!(
            first(Some(config.clone()), Some(sandbox.clone())),
            Some(sandbox)
        );
        assert_eq!(
            first(Some(config.clone()), Some(pull.clone())),
            Some(config)
        );
        assert_eq!(first(None, Some(pull.clone())), Some(pull));
        assert_eq!(first(None, None), None);
    }

    #[test]
    fn optional_references_and_config_map_volumes() {
        let p = pod(
            json!({
                "containers": [container("busybox", json!({
                    "envFrom": [{"configMapRef": {"name": "opt", "optional": true}},
                                {"secretRef": {"name": "all"}}],
                    "env": [{"name": "K", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}}]
                }))],
                "volumes": [{"name": "conf", "configMap": {"name": "conf"}},
                            {"name": "maybe", "secret": {"secretName": "maybe", "optional": true}}]
            }),
            json!({}),
        );
        assert_eq!(
            references(&p),
            BTreeSet::from([
                (Kind::Secret, "all".to_owned()),
                (Kind::ConfigMap, "cm".to_owned()),
                (Kind::ConfigMap, "conf".to_owned()),
            ])
        );
        let mut objects = Objects::from([
            ((Kind::ConfigMap, "conf".to_owned()), Found::Missing),
            ((Kind::Secret, "maybe".to_owned()), Found::Missing),
        ]);
        assert_eq!(
            blocker_in(&p, &objects),
            Some(Blocker::Mount {
                message:
                    "MountVolume.SetUp failed for volume \"conf\" : configmap \"conf\" not found"
                        .into()
            })
        );
        objects.insert(
            (Kind::ConfigMap, "conf".to_owned()),
            Found::Keys(BTreeSet::new()),
        );
        objects.insert((Kind::Secret, "all".to_owned()), Found::Missing);
        assert_eq!(
            blocker_in(&p, &objects).unwrap().waiting(false).1.unwrap(),
            "secret \"all\" not found"
        );
        objects.insert(
            (Kind::Secret, "all".to_owned()),
            Found::Keys(BTreeSet::new()),
        );
        objects.insert(
            (Kind::ConfigMap, "cm".to_owned()),
            Found::Keys(BTreeSet::new()),
        );
        assert_eq!(
            blocker_in(&p, &objects).unwrap().waiting(false).1.unwrap(),
            "couldn't find key k in ConfigMap batch/cm"
        );
    }
}
