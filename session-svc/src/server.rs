//! Assembles and runs the gRPC server: the session service, health and reflection.

use std::{future::Future, net::SocketAddr, sync::Arc};

use adk_common::server::reflection;
use adk_proto::session::v1::session_service_server::SessionServiceServer;
use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};
use tokio_stream::wrappers::TcpListenerStream;

use crate::{
    config::Config,
    grpc::SessionGrpc,
    sessions::{Limits, Sessions},
    store::sled_store::SledStore,
};

/// Room above `max_event_bytes` for the rest of a request (names, state delta of other
/// fields); larger messages are refused by the transport before they are decoded.
const REQUEST_OVERHEAD_BYTES: usize = 1 << 20;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A server running in the background.
#[derive(Debug)]
pub struct Running {
    pub addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), BoxError>>,
}

impl Running {
    /// Stops accepting, lets in-flight calls finish, flushes the store.
    pub async fn shutdown(self) -> Result<(), BoxError> {
        let _ = self.stop.send(());
        self.task.await?
    }
}

/// Opens the store, binds the listener and serves in a background task until `shutdown`.
pub async fn start(config: Config) -> Result<Running, BoxError> {
    let (stop, stopped) = oneshot::channel::<()>();
    let listener = TcpListener::bind(config.listen).await?;
    let addr = listener.local_addr()?;
    let store = SledStore::open(&config.data_dir, config.sync)?;
    let task = tokio::spawn(serve(config, store, listener, async {
        let _ = stopped.await;
    }));
    Ok(Running { addr, stop, task })
}

async fn serve(
    config: Config,
    store: SledStore,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), BoxError> {
    let sessions = Arc::new(Sessions::new(
        store.clone(),
        Limits {
            max_event_bytes: config.max_event_bytes,
        },
    ));
    let service = SessionServiceServer::new(SessionGrpc::new(sessions))
        .max_decoding_message_size(config.max_event_bytes + REQUEST_OVERHEAD_BYTES);
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<SessionServiceServer<SessionGrpc<SledStore>>>()
        .await;
    let (reflection_v1, reflection_v1alpha) = reflection(&["adk.session.v1.SessionService"])?;
    tonic::transport::Server::builder()
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(service)
        .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
            shutdown.await;
            health
                .set_not_serving::<SessionServiceServer<SessionGrpc<SledStore>>>()
                .await;
        })
        .await?;
    store.flush().await?;
    Ok(())
}
