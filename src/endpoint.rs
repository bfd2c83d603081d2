//! The HTTP endpoint on `--metrics.address`: `/metrics` for Prometheus,
//! `/healthz` and `/readyz` for orchestrators (see [`crate::health`]).
//!
//! One listener for all three, so a deployment opens one port. Answers are
//! plain text; probes only look at the status code (200 or 503), people
//! read the reasons.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;

use crate::health::{Health, Verdict};

/// How often histogram buckets are drained into the exporter's summaries
/// (the recorder's own listener would do it; ours must).
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

/// Binds `address`; an error names the address. Done before anything else
/// of a run, so a port in use is refused before clusters are asked or the
/// state dir is touched.
pub async fn bind(address: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(address).await.map_err(|e| {
        anyhow::anyhow!("starting the metrics endpoint on {address} (--metrics.address): {e}")
    })
}

/// Serves the endpoint on `listener`, on the current tokio runtime, until
/// the process exits.
pub fn serve(listener: TcpListener, metrics: PrometheusHandle, health: Arc<Health>) {
    let upkeep = metrics.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(UPKEEP_INTERVAL).await;
            upkeep.run_upkeep();
        }
    });
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (metrics, health) = (metrics.clone(), health.clone());
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<Incoming>| {
                    let response = respond(request.uri().path(), &metrics, &health);
                    async move { Ok::<_, Infallible>(response) }
                });
                // A client that hangs up mid-request is its own problem.
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
}

fn respond(path: &str, metrics: &PrometheusHandle, health: &Health) -> Response<Full<Bytes>> {
    let now = Instant::now();
    let (status, body) = match path {
        "/metrics" => (StatusCode::OK, metrics.render()),
        "/healthz" => probe(health.liveness(now)),
        "/readyz" => probe(health.readiness(now)),
        _ => (
            StatusCode::NOT_FOUND,
            "not found: try /metrics, /healthz or /readyz\n".to_string(),
        ),
    };
    Response::builder()
        .status(status)
        .header("content-type", "text/plain; version=0.0.4; charset=utf-8")
        .body(Full::new(Bytes::from(body)))
        .expect("a response from static parts")
}

fn probe(verdict: Verdict) -> (StatusCode, String) {
    let status = match verdict.healthy {
        true => StatusCode::OK,
        false => StatusCode::SERVICE_UNAVAILABLE,
    };
    (status, verdict.text)
}
