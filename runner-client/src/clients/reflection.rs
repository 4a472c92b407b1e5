//! Which services a server offers, as its reflection service lists them.

use super::remote::{Access, Remote};

/// The gRPC services a server at `endpoint` offers, as its reflection service lists them;
/// `None` when it cannot say (no reflection, unreachable...). For telling a user which server
/// answered where another was expected.
pub async fn services_at(endpoint: &str, access: &Access) -> Option<Vec<String>> {
    use tonic_reflection::pb::v1::{
        server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
        ServerReflectionRequest,
    };
    let (remote, channel) = Remote::channel("reflection", endpoint, access).ok()?;
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = ServerReflectionClient::new(channel)
        .server_reflection_info(remote.request(tokio_stream::once(request)))
        .await
        .ok()?
        .into_inner();
    match responses.message().await.ok()??.message_response? {
        MessageResponse::ListServicesResponse(list) => {
            Some(list.service.into_iter().map(|s| s.name).collect())
        }
        _ => None,
    }
}
