//! Prometheus metrics: a tower layer that measures every RPC (count by status code, latency,
//! calls and streams in flight), and the `/metrics` endpoint that exposes them with whatever
//! else the services record through the `metrics` facade (store flushes, size on disk, ...).
//!
//! One recorder serves the whole process, so servers embedded side by side (tests) share it; the
//! `method` label tells them apart.

use std::{
    future::Future,
    net::SocketAddr,
    pin::Pin,
    sync::{Arc, OnceLock},
    task::{Context, Poll},
    time::Instant,
};

use axum::{routing::get, Router};
use metrics::{counter, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::net::TcpListener;
use tonic::codegen::http::{self, HeaderMap};
use tonic::{
    body::Body,
    codegen::{Bytes, Service},
    Code,
};

use crate::stopping::Stopping;

/// Latency buckets, in seconds: sub-millisecond appends up to slow scans.
const LATENCY_BUCKETS: [f64; 14] = [
    0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// Batch-size buckets for group commit (writes per flush).
const BATCH_BUCKETS: [f64; 10] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// The process-wide recorder, installed on first use.
fn handle() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &LATENCY_BUCKETS)
            .and_then(|b| {
                b.set_buckets_for_metric(Matcher::Suffix("_batch_size".into()), &BATCH_BUCKETS)
            });
        let recorder = match builder {
            Ok(b) => b.build_recorder(),
            // Only an empty bucket list fails; ours are constants.
            Err(_) => PrometheusBuilder::new().build_recorder(),
        };
        let handle = recorder.handle();
        // Fails only if the embedding program installed its own recorder first; it then owns
        // the metrics and this endpoint shows none.
        let _ = metrics::set_global_recorder(recorder);
        keep_up(handle.clone());
        handle
    })
}

/// How often the recorder folds the samples histograms recorded into their buckets.
const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Folds recorded histogram samples into their buckets every few seconds, on a thread of its
/// own (the recorder is installed before any runtime may run). The recorder keeps each sample
/// until then: without it, a server nobody scrapes holds every latency it ever measured (20 MB
/// after 100,000 ingested memories).
fn keep_up(handle: PrometheusHandle) {
    let started = std::thread::Builder::new()
        .name("metrics-upkeep".into())
        .spawn(move || loop {
            std::thread::sleep(UPKEEP_EVERY);
            handle.run_upkeep();
        });
    if let Err(e) = started {
        tracing::warn!(error = %e, "cannot start the metrics upkeep thread: histograms grow until scraped");
    }
}

/// Serves `GET /metrics` on `listener` until `stopping` (a scrape in progress finishes; shutdown
/// waits for it). `refresh` runs before each scrape, to set gauges that are cheaper to read on
/// demand (size on disk).
pub fn serve(
    listener: TcpListener,
    refresh: Arc<dyn Fn() + Send + Sync>,
    stopping: &Stopping,
) -> std::io::Result<SocketAddr> {
    let addr = listener.local_addr()?;
    let handle = handle();
    let app = Router::new().route(
        "/metrics",
        get(move || {
            let refresh = refresh.clone();
            async move {
                refresh();
                handle.render()
            }
        }),
    );
    let stopped = stopping.clone();
    stopping.spawn(async move {
        let serving =
            axum::serve(listener, app).with_graceful_shutdown(async move { stopped.wait().await });
        if let Err(e) = serving.await {
            tracing::warn!(error = %e, "metrics endpoint stopped");
        }
    });
    Ok(addr)
}

/// Records one group-commit flush.
pub fn record_flush(writes: usize, seconds: f64) {
    histogram!("store_flush_batch_size").record(writes as f64);
    histogram!("store_flush_duration_seconds").record(seconds);
}

/// The tower layer measuring every RPC of a server.
#[derive(Debug, Clone, Copy, Default)]
pub struct RpcMetricsLayer;

impl<S> tower_layer::Layer<S> for RpcMetricsLayer {
    type Service = RpcMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RpcMetrics { inner }
    }
}

/// See [`RpcMetricsLayer`].
#[derive(Debug, Clone)]
pub struct RpcMetrics<S> {
    inner: S,
}

impl<S, B> Service<http::Request<B>> for RpcMetrics<S>
where
    S: Service<http::Request<B>, Response = http::Response<Body>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<MeteredBody>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let call = Call::start(request.uri().path());
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            let mut call = call;
            // A call that fails before any message has its status in the headers.
            call.code = status_code(response.headers());
            let (parts, body) = response.into_parts();
            Ok(http::Response::from_parts(
                parts,
                MeteredBody {
                    inner: body,
                    call: Some(call),
                },
            ))
        })
    }
}

/// One RPC being measured; recorded when its response body ends or is dropped.
struct Call {
    method: String,
    start: Instant,
    code: Option<Code>,
}

impl Call {
    fn start(path: &str) -> Self {
        let method = path.trim_start_matches('/').to_owned();
        gauge!("grpc_server_in_flight", "method" => method.clone()).increment(1.0);
        Self {
            method,
            start: Instant::now(),
            code: None,
        }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        // No status at all means the client went away before the end.
        let code = self
            .code
            .map_or_else(|| "Cancelled".to_owned(), |c| format!("{c:?}"));
        let method = std::mem::take(&mut self.method);
        let seconds = self.start.elapsed().as_secs_f64();
        tracing::debug!(%method, %code, seconds, "rpc finished");
        counter!("grpc_server_requests_total", "method" => method.clone(), "code" => code)
            .increment(1);
        histogram!("grpc_server_request_duration_seconds", "method" => method.clone())
            .record(seconds);
        gauge!("grpc_server_in_flight", "method" => method).decrement(1.0);
    }
}

/// A response body that reports the call's outcome once the body has been sent (or dropped).
pub struct MeteredBody {
    inner: Body,
    call: Option<Call>,
}

impl http_body::Body for MeteredBody {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(trailers), Some(call)) = (frame.trailers_ref(), self.call.as_mut()) {
                    call.code = status_code(trailers).or(call.code);
                }
            }
            Poll::Ready(None) | Poll::Ready(Some(Err(_))) => {
                self.call.take();
            }
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

fn status_code(headers: &HeaderMap) -> Option<Code> {
    let value = headers.get("grpc-status")?.to_str().ok()?;
    Some(Code::from_i32(value.parse().ok()?))
}
