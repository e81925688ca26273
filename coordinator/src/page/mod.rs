//! The live cluster page on `--api-listen`, behind the JSON API's authentication:
//! - `GET /` (and `/ui`): one self-contained HTML page (its CSS and vanilla JS embedded in the
//!   binary with `include_str!`). It uses no JavaScript dependency and fetches nothing from the
//!   internet (the "or there is none" branch), so there is no npm build step.
//! - `GET /ui/events`: server-sent events, each a compact JSON document ([`model::page_json`]).
//!   One [`Feed`] task per replica builds the document when the view, the policy set, the
//!   extender's recent decisions or the action queue changed
//!   (checked every [`MIN_INTERVAL`], so at most that often; and every [`REFRESH`] regardless,
//!   so ages and staleness move on a quiet cluster) and only while someone is watching; every
//!   open page shares that one document. The browser never polls.
//!
//! A browser cannot add a bearer token to a page load or an `EventSource`: with
//! `--api-auth kubernetes` the page needs a proxy that adds `Authorization` (the dev cluster and
//! `--api-auth none` need nothing).

pub mod model;
pub mod scale;
pub mod state;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use futures::{Stream, StreamExt as _};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::actions::board::ActionBoard;
use crate::extender::decisions::Decisions;
use crate::policies::PolicyCache;
use crate::view::ClusterView;
pub use model::PageSettings;

/// The page: HTML, CSS and JS in one file.
const INDEX_HTML: &str = include_str!("index.html");

/// The feed checks for a change this often: the page updates at most this often.
pub const MIN_INTERVAL: Duration = Duration::from_millis(250);

/// The feed sends a document at least this often while watched, changed or not.
pub const REFRESH: Duration = Duration::from_secs(2);

/// What the page reads: the view and the policies, and how to judge them.
#[derive(Debug, Clone)]
pub struct Source {
    /// The view.
    pub view: ClusterView,
    /// The policies.
    pub policies: PolicyCache,
    /// Settings shared with the extender.
    pub settings: PageSettings,
    /// The extender's recent decisions.
    pub decisions: Decisions,
    /// The action queue.
    pub actions: ActionBoard,
}

impl Source {
    /// The page's document now, as compact JSON.
    pub fn render(&self) -> String {
        let snapshot = self.view.load_full();
        let policies = self.policies.load();
        let decisions = self.decisions.recent();
        let actions = self.actions.queue();
        let activity = model::Activity {
            decisions: &decisions,
            actions: &actions,
        };
        model::page_json(
            &snapshot,
            &policies,
            &self.settings,
            activity,
            self.view.now_ms(),
        )
        .to_string()
    }

    /// Changes whenever the document would (the clock aside): the view and the policy set
    /// publish a new `Arc` on every change, the other two count their changes.
    fn version(&self) -> [usize; 4] {
        [
            Arc::as_ptr(&self.view.load_full()) as usize,
            Arc::as_ptr(&*self.policies.load()) as usize,
            self.decisions.version() as usize,
            self.actions.version() as usize,
        ]
    }
}

/// The latest document, shared by every open page.
#[derive(Debug, Clone)]
pub struct Feed {
    source: Source,
    latest: Arc<watch::Sender<Arc<str>>>,
    stop: CancellationToken,
}

// === impl Feed ===

impl Feed {
    /// A feed of `source`; its streams end when `stop` is cancelled.
    pub fn new(source: Source, stop: CancellationToken) -> Self {
        Self {
            source,
            latest: Arc::new(watch::Sender::new(Arc::from(""))),
            stop,
        }
    }

    /// Publishes a new document whenever the view or the policies changed, at most every
    /// [`MIN_INTERVAL`] and at least every [`REFRESH`], while a page is open; until `stop`.
    pub async fn run(self) {
        let mut tick = tokio::time::interval(MIN_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last: Option<([usize; 4], Instant)> = None;
        loop {
            tokio::select! {
                () = self.stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            if self.latest.receiver_count() == 0 {
                last = None;
                continue;
            }
            let version = self.source.version();
            if let Some((seen, at)) = last
                && seen == version
                && at.elapsed() < REFRESH
            {
                continue;
            }
            self.latest.send_replace(Arc::from(self.source.render()));
            last = Some((version, Instant::now()));
        }
    }

    /// The current document first (built now, so a new page does not wait for a change), then
    /// every document the feed publishes, until the coordinator stops.
    fn events(&self) -> impl Stream<Item = Result<Event, Infallible>> + use<> {
        let first = self.source.render();
        let changes = futures::stream::unfold(self.latest.subscribe(), |mut rx| async move {
            rx.changed().await.ok()?;
            let doc = rx.borrow_and_update().clone();
            Some((doc, rx))
        });
        futures::stream::once(async move { Arc::<str>::from(first) })
            .chain(changes)
            .map(|doc| Ok(Event::default().event("snapshot").data(&*doc)))
            .take_until(self.stop.clone().cancelled_owned())
    }
}

/// The page's routes (the caller adds authentication).
pub fn router(feed: Feed) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/ui", get(index))
        .route("/ui/events", get(events))
        .with_state(feed)
}

async fn index() -> Response {
    (
        [(http::header::CACHE_CONTROL, "no-store")],
        Html(INDEX_HTML),
    )
        .into_response()
}

async fn events(State(feed): State<Feed>) -> Response {
    Sse::new(feed.events())
        .keep_alive(KeepAlive::default())
        .into_response()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use http_body_util::BodyExt as _;
    use telemesh_core::gossip::{Liveness, NodeState};
    use telemesh_core::policy::Unknown;
    use telemesh_core::reward::RewardModel;
    use tower::ServiceExt as _;

    use super::*;
    use crate::view::{NodeEntry, Snapshot};
    use std::time::SystemTime;
    use telemesh_core::gossip::schema::unix_ms;

    fn snapshot(metric: &str) -> Snapshot {
        let now = unix_ms(SystemTime::now());
        let value = format!("{metric}@{now}");
        let state = NodeState::from_key_values([("role", "agent"), ("m:node_x", value.as_str())]);
        Snapshot::from_entries([NodeEntry::new("n1", 1, Liveness::Live, state)])
    }

    fn feed(view: &ClusterView, stop: &CancellationToken) -> Feed {
        let source = Source {
            view: view.clone(),
            policies: PolicyCache::default(),
            settings: PageSettings {
                stale_after: Duration::from_secs(45),
                reward_model: RewardModel::default(),
                unknown: Unknown::NotViolating,
            },
            decisions: Decisions::default(),
            actions: ActionBoard::default(),
        };
        Feed::new(source, stop.clone())
    }

    #[tokio::test]
    async fn the_page_is_self_contained_html() {
        let stop = CancellationToken::new();
        let resp = router(feed(&ClusterView::default(), &stop))
            .oneshot(
                http::Request::get("/")
                    .body(axum::body::Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        let html = std::str::from_utf8(&body).unwrap();
        assert!(html.contains("/ui/events"), "the page listens to the feed");
        // Nothing is loaded from elsewhere: no external script, style sheet, font or image.
        for needle in ["http://", "https://", "src=", "<link", "@import", "url("] {
            assert!(!html.contains(needle), "the page holds {needle:?}");
        }
    }

    /// Reads SSE frames from `body` until one whose data satisfies `pred`.
    async fn next_doc(
        body: &mut axum::body::Body,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let mut buf = String::new();
        loop {
            let frame = body.frame().await.unwrap().unwrap();
            let Ok(data) = frame.into_data() else {
                continue;
            };
            buf.push_str(std::str::from_utf8(&data).unwrap());
            while let Some(end) = buf.find("\n\n") {
                let event: String = buf.drain(..end + 2).collect();
                if let Some(json) = event.lines().find_map(|l| l.strip_prefix("data: ")) {
                    let doc: serde_json::Value = serde_json::from_str(json).unwrap();
                    if pred(&doc) {
                        return doc;
                    }
                }
            }
        }
    }

    #[tokio::test]
    async fn events_start_with_the_current_view_and_follow_its_changes() {
        let view = ClusterView::with_snapshot(snapshot("1"));
        let stop = CancellationToken::new();
        let feed = feed(&view, &stop);
        tokio::spawn(feed.clone().run());
        let resp = router(feed)
            .oneshot(
                http::Request::get("/ui/events")
                    .body(axum::body::Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        let mut body = resp.into_body();
        let first = next_doc(&mut body, |_| true).await;
        assert_eq!(first["nodes"][0]["metrics"]["node_x"]["value"], 1.0);
        view.publish(snapshot("2"));
        let next = tokio::time::timeout(
            Duration::from_secs(30),
            next_doc(&mut body, |d| {
                d["nodes"][0]["metrics"]["node_x"]["value"] == 2.0
            }),
        )
        .await
        .expect("the change reaches the open stream");
        assert_eq!(next["nodes"][0]["name"], "n1");
        // Stopping the coordinator ends the stream, so graceful shutdown is not held up.
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(30), async {
            while body.frame().await.is_some() {}
        })
        .await
        .expect("the stream ends at stop");
    }
}
