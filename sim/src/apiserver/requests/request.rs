//! Request routing: turns a URL path into what it addresses, as kube-apiserver's
//! `RequestInfoFactory` does.

/// A resource request's coordinates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    /// API group, empty for core.
    pub group: String,
    /// Version.
    pub version: String,
    /// Namespace from the path, if any.
    pub namespace: Option<String>,
    /// Plural resource name.
    pub plural: String,
    /// Object name, if any.
    pub name: Option<String>,
    /// Subresource, if any.
    pub subresource: Option<String>,
}

/// What a path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/version`.
    Version,
    /// `/healthz`, `/livez`, `/readyz`.
    Health,
    /// `/api`.
    CoreVersions,
    /// `/apis`.
    Groups,
    /// `/apis/<group>`.
    Group(String),
    /// `/api/v1` or `/apis/<group>/<version>`.
    GroupVersion(String, String),
    /// `/openapi/v2`.
    OpenApiV2,
    /// `/openapi/v3`.
    OpenApiIndex,
    /// `/openapi/v3/api/v1` or `/openapi/v3/apis/<group>/<version>`.
    OpenApiGroupVersion(String, String),
    /// A resource, collection or subresource.
    Resource(ResourcePath),
    /// Nothing we serve.
    Unknown,
}

/// Subresources of a namespace that are not resources inside it.
const NAMESPACE_SUBRESOURCES: [&str; 2] = ["status", "finalize"];

/// Routes a URL path.
pub fn route(path: &str) -> Route {
    let parts: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|p| !p.is_empty())
        .collect();
    match parts.as_slice() {
        ["version"] => Route::Version,
        ["healthz" | "livez" | "readyz", ..] => Route::Health,
        ["api"] => Route::CoreVersions,
        ["apis"] => Route::Groups,
        ["apis", group] => Route::Group((*group).to_owned()),
        ["api", version] => Route::GroupVersion(String::new(), (*version).to_owned()),
        ["apis", group, version] => Route::GroupVersion((*group).to_owned(), (*version).to_owned()),
        ["openapi", "v2"] => Route::OpenApiV2,
        ["openapi", "v3"] => Route::OpenApiIndex,
        ["openapi", "v3", "api", version] => {
            Route::OpenApiGroupVersion(String::new(), (*version).to_owned())
        }
        ["openapi", "v3", "apis", group, version] => {
            Route::OpenApiGroupVersion((*group).to_owned(), (*version).to_owned())
        }
        ["api", version, rest @ ..] => resource_route("", version, rest),
        ["apis", group, version, rest @ ..] => resource_route(group, version, rest),
        _ => Route::Unknown,
    }
}

fn resource_route(group: &str, version: &str, rest: &[&str]) -> Route {
    let mut rest = rest;
    let mut namespace = None;
    if rest.first() == Some(&"namespaces")
        && rest.len() > 2
        && !NAMESPACE_SUBRESOURCES.contains(&rest[2])
    {
        namespace = Some(rest[1].to_owned());
        rest = &rest[2..];
    }
    let (plural, name, subresource) = match rest {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(*name), None),
        [plural, name, sub] => (*plural, Some(*name), Some(*sub)),
        _ => return Route::Unknown,
    };
    Route::Resource(ResourcePath {
        group: group.to_owned(),
        version: version.to_owned(),
        namespace,
        plural: plural.to_owned(),
        name: name.map(str::to_owned),
        subresource: subresource.map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(
        group: &str,
        ns: Option<&str>,
        plural: &str,
        name: Option<&str>,
        sub: Option<&str>,
    ) -> Route {
        Route::Resource(ResourcePath {
            group: group.into(),
            version: "v1".into(),
            namespace: ns.map(Into::into),
            plural: plural.into(),
            name: name.map(Into::into),
            subresource: sub.map(Into::into),
        })
    }

    #[test]
    fn paths_route_like_kube_apiserver() {
        assert_eq!(route("/api/v1/pods"), res("", None, "pods", None, None));
        assert_eq!(
            route("/api/v1/namespaces/ns1/pods/p/status"),
            res("", Some("ns1"), "pods", Some("p"), Some("status"))
        );
        assert_eq!(
            route("/api/v1/namespaces/ns1"),
            res("", None, "namespaces", Some("ns1"), None)
        );
        assert_eq!(
            route("/api/v1/namespaces/ns1/status"),
            res("", None, "namespaces", Some("ns1"), Some("status"))
        );
        assert_eq!(
            route("/api/v1/namespaces"),
            res("", None, "namespaces", None, None)
        );
        assert_eq!(
            route("/apis/apps/v1/namespaces/d/deployments/x/scale"),
            res("apps", Some("d"), "deployments", Some("x"), Some("scale"))
        );
        assert_eq!(
            route("/apis/apps/v1"),
            Route::GroupVersion("apps".into(), "v1".into())
        );
        assert_eq!(route("/apis"), Route::Groups);
        assert_eq!(
            route("/openapi/v3/apis/apps/v1"),
            Route::OpenApiGroupVersion("apps".into(), "v1".into())
        );
        assert_eq!(route("/openapi/v2"), Route::OpenApiV2);
        assert_eq!(route("/nope"), Route::Unknown);
    }
}
