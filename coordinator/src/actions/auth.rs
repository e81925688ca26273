//! Who is calling the action and telemetry APIs, and whether they may: a bearer token checked
//! with a TokenReview, permission with a SubjectAccessReview, as kube-apiserver's own
//! delegated authentication (`--authentication-token-webhook`) does. Answers are cached briefly
//! (allowed for [`ALLOWED_TTL`], denied for [`DENIED_TTL`], at most [`CACHE_ENTRIES`] each), so
//! a busy caller costs the API server two reviews per ten seconds, not two per call.
//!
//! `--api-auth none` is for the dev cluster: every caller is `system:anonymous` and may do
//! everything; start-up and `/readyz` say so.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode, header};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use lru::LruCache;
use parking_lot::Mutex;
use telemesh_core::action::Requester;

/// How long an allowed decision (or an accepted token) is reused.
pub const ALLOWED_TTL: Duration = Duration::from_secs(10);
/// How long a denied decision (or a rejected token) is reused: short, so a fix to RBAC shows soon.
pub const DENIED_TTL: Duration = Duration::from_secs(2);
/// Entries kept per cache; the least recently used go first.
pub const CACHE_ENTRIES: usize = 4096;

/// The user name of every caller under `--api-auth none` (and Kubernetes' name for no user).
pub const ANONYMOUS: &str = "system:anonymous";

/// `--api-auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AuthMode {
    /// Bearer tokens checked with TokenReview, permissions with SubjectAccessReview.
    Kubernetes,
    /// No checks: every caller is `system:anonymous` and may act (dev cluster only).
    None,
}

/// The line `/readyz` shows under `--api-auth none`.
pub const NONE_NOTE: &str = "api-auth: none (every caller may act)";

/// Why a caller was turned away.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No token, or one the API server rejects.
    #[error("{0}")]
    Unauthenticated(String),
    /// Authenticated but not allowed.
    #[error("{0}")]
    Forbidden(String),
    /// The API server could not answer the review.
    #[error("cannot check the caller with the API server: {0}; retry")]
    Unavailable(String),
}

/// What a caller wants to do, as a SubjectAccessReview's resource attributes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Access {
    /// Verb (`create`, `get`).
    pub verb: &'static str,
    /// API group (`telemesh.io`, `""` for core).
    pub group: &'static str,
    /// Resource (plural).
    pub resource: &'static str,
    /// Namespace; empty for cluster scope.
    pub namespace: String,
    /// Object name, when one.
    pub name: String,
}

impl Access {
    /// `verb` on `workloadactions` (telemesh.io) in `namespace`.
    pub fn actions(verb: &'static str, namespace: &str, name: &str) -> Self {
        Self {
            verb,
            group: "telemesh.io",
            resource: "workloadactions",
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    /// `get nodes`: what the telemetry API needs.
    pub fn telemetry() -> Self {
        Self {
            verb: "get",
            group: "",
            resource: "nodes",
            namespace: String::new(),
            name: String::new(),
        }
    }

    /// kube-apiserver's wording of a denial.
    fn denied(&self, user: &str, reason: &str) -> String {
        let scope = if self.namespace.is_empty() {
            "at the cluster scope".to_owned()
        } else {
            format!("in the namespace {:?}", self.namespace)
        };
        let reason = if reason.is_empty() {
            String::new()
        } else {
            format!(": {reason}")
        };
        format!(
            "User {user:?} cannot {} resource {:?} in API group {:?} {scope}{reason}",
            self.verb, self.resource, self.group
        )
    }
}

/// A small LRU whose entries expire.
struct TtlCache<K: std::hash::Hash + Eq, V> {
    entries: Mutex<LruCache<K, (Instant, V)>>,
}

impl<K: std::hash::Hash + Eq, V: Clone> TtlCache<K, V> {
    fn new() -> Self {
        let size = NonZeroUsize::new(CACHE_ENTRIES).unwrap_or(NonZeroUsize::MIN);
        Self {
            entries: Mutex::new(LruCache::new(size)),
        }
    }

    fn get(&self, key: &K) -> Option<V> {
        let mut entries = self.entries.lock();
        match entries.get(key) {
            Some((until, v)) if *until > Instant::now() => Some(v.clone()),
            Some(_) => {
                entries.pop(key);
                None
            }
            None => None,
        }
    }

    fn put(&self, key: K, value: V, ttl: Duration) {
        self.entries.lock().put(key, (Instant::now() + ttl, value));
    }
}

/// The authenticator and authorizer of the API.
pub struct ApiAuth {
    mode: AuthMode,
    client: Option<kube::Client>,
    tokens: TtlCache<String, Result<Requester, String>>,
    decisions: TtlCache<(String, Vec<String>, Access), Result<(), String>>,
}

impl std::fmt::Debug for ApiAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiAuth")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl ApiAuth {
    /// Checks callers with the API server `client` talks to (`Kubernetes`), or not at all.
    pub fn new(mode: AuthMode, client: kube::Client) -> Self {
        Self {
            mode,
            client: (mode == AuthMode::Kubernetes).then_some(client),
            tokens: TtlCache::new(),
            decisions: TtlCache::new(),
        }
    }

    /// No checks (for tests of the pure parts and the dev cluster).
    pub fn none() -> Self {
        Self {
            mode: AuthMode::None,
            client: None,
            tokens: TtlCache::new(),
            decisions: TtlCache::new(),
        }
    }

    /// The mode.
    pub fn mode(&self) -> AuthMode {
        self.mode
    }

    /// Returns the caller named by the request's bearer token.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Requester, AuthError> {
        let Some(client) = &self.client else {
            return Ok(Requester {
                username: ANONYMOUS.to_owned(),
                ..Requester::default()
            });
        };
        let token = bearer_token(headers).ok_or_else(|| {
            AuthError::Unauthenticated(
                "no bearer token: send the header 'Authorization: Bearer <token>' (e.g. a service account token)".into(),
            )
        })?;
        if let Some(known) = self.tokens.get(&token.to_owned()) {
            return known.map_err(AuthError::Unauthenticated);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let answer = Api::<TokenReview>::all(client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| AuthError::Unavailable(format!("TokenReview failed: {e}")))?;
        let status = answer.status.unwrap_or_default();
        let decided = match (status.authenticated, status.user) {
            (Some(true), Some(user)) => Ok(Requester {
                username: user.username.unwrap_or_default(),
                uid: user.uid.unwrap_or_default(),
                groups: user.groups.unwrap_or_default(),
            }),
            _ => Err(format!(
                "the bearer token is not valid{}",
                status.error.map(|e| format!(": {e}")).unwrap_or_default()
            )),
        };
        let ttl = if decided.is_ok() {
            ALLOWED_TTL
        } else {
            DENIED_TTL
        };
        self.tokens.put(token.to_owned(), decided.clone(), ttl);
        decided.map_err(AuthError::Unauthenticated)
    }

    /// Returns `Ok` when `who` may do `access`.
    pub async fn authorize(&self, who: &Requester, access: &Access) -> Result<(), AuthError> {
        let Some(client) = &self.client else {
            return Ok(());
        };
        let key = (who.username.clone(), who.groups.clone(), access.clone());
        if let Some(known) = self.decisions.get(&key) {
            return known.map_err(AuthError::Forbidden);
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(who.username.clone()),
                uid: (!who.uid.is_empty()).then(|| who.uid.clone()),
                groups: Some(who.groups.clone()),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(access.verb.to_owned()),
                    group: Some(access.group.to_owned()),
                    resource: Some(access.resource.to_owned()),
                    namespace: (!access.namespace.is_empty()).then(|| access.namespace.clone()),
                    name: (!access.name.is_empty()).then(|| access.name.clone()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let answer = Api::<SubjectAccessReview>::all(client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| AuthError::Unavailable(format!("SubjectAccessReview failed: {e}")))?;
        let status = answer.status.unwrap_or_default();
        let decided = if status.allowed {
            Ok(())
        } else {
            Err(access.denied(&who.username, status.reason.as_deref().unwrap_or("")))
        };
        let ttl = if decided.is_ok() {
            ALLOWED_TTL
        } else {
            DENIED_TTL
        };
        self.decisions.put(key, decided.clone(), ttl);
        decided.map_err(AuthError::Forbidden)
    }
}

/// The token of an `Authorization: Bearer <token>` header.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Middleware for the telemetry JSON API: the caller must be allowed `get nodes`. Errors are
/// the API's plain JSON `{"error": …}`.
pub async fn require_telemetry_access(
    State(auth): State<Arc<ApiAuth>>,
    request: Request,
    next: Next,
) -> Response {
    let decided = match auth.authenticate(request.headers()).await {
        Ok(who) => auth.authorize(&who, &Access::telemetry()).await,
        Err(e) => Err(e),
    };
    match decided {
        Ok(()) => next.run(request).await,
        Err(e) => {
            let status = match e {
                AuthError::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
                AuthError::Forbidden(_) => StatusCode::FORBIDDEN,
                AuthError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            };
            let mut resp = (
                status,
                axum::Json(serde_json::json!({ "error": e.to_string() })),
            )
                .into_response();
            if status == StatusCode::UNAUTHORIZED {
                resp.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    http::HeaderValue::from_static("Bearer"),
                );
            }
            resp
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_from_the_header() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer_token(&h), None);
        h.insert(header::AUTHORIZATION, "Bearer abc".parse().unwrap());
        assert_eq!(bearer_token(&h), Some("abc"));
        h.insert(header::AUTHORIZATION, "bearer  abc ".parse().unwrap());
        assert_eq!(bearer_token(&h), Some("abc"));
        h.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer_token(&h), None);
        h.insert(header::AUTHORIZATION, "Bearer ".parse().unwrap());
        assert_eq!(bearer_token(&h), None);
    }

    #[test]
    fn denials_read_like_kube_apiservers() {
        let a = Access::actions("create", "ul", "");
        assert_eq!(
            a.denied("bob", ""),
            r#"User "bob" cannot create resource "workloadactions" in API group "telemesh.io" in the namespace "ul""#
        );
        assert_eq!(
            Access::telemetry().denied("bob", "no rule"),
            r#"User "bob" cannot get resource "nodes" in API group "" at the cluster scope: no rule"#
        );
    }

    #[test]
    fn cache_entries_expire() {
        let c: TtlCache<&str, u8> = TtlCache::new();
        c.put("a", 1, Duration::from_secs(60));
        c.put("b", 2, Duration::ZERO);
        assert_eq!(c.get(&"a"), Some(1));
        assert_eq!(c.get(&"b"), None);
    }

    #[tokio::test]
    async fn none_lets_everyone_in_as_anonymous() {
        let auth = ApiAuth::none();
        let who = auth.authenticate(&HeaderMap::new()).await.unwrap();
        assert_eq!(who.username, ANONYMOUS);
        auth.authorize(&who, &Access::telemetry()).await.unwrap();
    }
}
