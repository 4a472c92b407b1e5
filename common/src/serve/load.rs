//! Load shedding: at most `limit` calls are handled at once; beyond that a call is answered
//! `RESOURCE_EXHAUSTED` at once instead of queueing until everything times out. A call counts
//! until its handler has answered (for a stream: until the stream is set up), so long-lived
//! watches do not hold slots. Health checks are never shed, so an overloaded server is not
//! mistaken for a dead one.

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use metrics::counter;
use tokio::sync::Semaphore;
use tonic::{body::Body, codegen::http, codegen::Service, Status};

/// The tower layer applying a concurrency limit to a server.
#[derive(Debug, Clone)]
pub struct LoadShedLayer {
    permits: Arc<Semaphore>,
}

impl LoadShedLayer {
    pub fn new(limit: usize) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(limit)),
        }
    }
}

impl<S> tower_layer::Layer<S> for LoadShedLayer {
    type Service = LoadShed<S>;

    fn layer(&self, inner: S) -> Self::Service {
        LoadShed {
            inner,
            permits: self.permits.clone(),
        }
    }
}

/// See [`LoadShedLayer`].
#[derive(Debug, Clone)]
pub struct LoadShed<S> {
    inner: S,
    permits: Arc<Semaphore>,
}

impl<S, B> Service<http::Request<B>> for LoadShed<S>
where
    S: Service<http::Request<B>, Response = http::Response<Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if request.uri().path().starts_with("/grpc.health.") {
            return Box::pin(self.inner.call(request));
        }
        match self.permits.clone().try_acquire_owned() {
            Ok(permit) => {
                let response = self.inner.call(request);
                Box::pin(async move {
                    let response = response.await;
                    drop(permit);
                    response
                })
            }
            Err(_) => {
                counter!("grpc_server_shed_total").increment(1);
                let status = Status::resource_exhausted(
                    "the server is at its concurrency limit (--max-concurrent-requests); retry with backoff",
                );
                Box::pin(std::future::ready(Ok(status.into_http())))
            }
        }
    }
}
