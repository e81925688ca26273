//! One HTTP/1.1 request on a fresh connection: how sim's scheduler calls extenders and the dev
//! cluster asks coordinators. Calls are few per pod, so a connection pool would buy nothing.

use anyhow::{Context as _, bail};
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};

/// Sends `method url` with an optional JSON `body`; returns the body of a 2xx answer, else an
/// error naming the status and the start of the answer.
pub async fn request(
    method: http::Method,
    url: &str,
    body: Option<Vec<u8>>,
) -> anyhow::Result<Bytes> {
    request_with(method, url, &[], body).await
}

/// [`request`] with extra `headers` (an `Authorization` bearer token, ...).
pub async fn request_with(
    method: http::Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> anyhow::Result<Bytes> {
    let uri: http::Uri = url.parse().with_context(|| format!("bad URL {url}"))?;
    if uri.scheme_str() != Some("http") {
        bail!("{url}: only http:// is supported here");
    }
    let authority = uri
        .authority()
        .with_context(|| format!("URL {url} has no host"))?
        .clone();
    let port = authority.port_u16().unwrap_or(80);
    let stream = tokio::net::TcpStream::connect((authority.host(), port))
        .await
        .with_context(|| format!("cannot connect to {authority}"))?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .with_context(|| format!("HTTP handshake with {authority}"))?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "HTTP connection closed");
        }
    });
    let mut builder = http::Request::builder()
        .method(method.clone())
        .uri(uri.clone())
        .header(http::header::HOST, authority.as_str());
    if body.is_some() {
        builder = builder.header(http::header::CONTENT_TYPE, "application/json");
    }
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let request = builder
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .context("building the request")?;
    let response = sender
        .send_request(request)
        .await
        .with_context(|| format!("{method} {url}"))?;
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .with_context(|| format!("reading the answer of {url}"))?
        .to_bytes();
    if !status.is_success() {
        bail!(
            "{method} {url} answered {status}: {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
        );
    }
    Ok(bytes)
}
