//! ListApps: the apps that have sessions, filtered by the caller's token, on both backends.

use adk_proto::session::v1::{session_service_client::SessionServiceClient, ListAppsRequest};
use adk_tests::{create_request, SessionServer};
use tonic::{metadata::MetadataValue, transport::Channel, Code, Request};

const TOKENS: &str = r#"{"tokens": [
    {"name": "ops", "token": "token-for-ops", "apps": ["*"]},
    {"name": "app-a", "token": "token-for-app-a", "apps": ["a", "c"]},
    {"name": "alice", "token": "token-for-alice", "apps": ["a"], "users": ["alice"]}
]}"#;

fn with_token<T>(message: T, token: Option<&str>) -> Request<T> {
    let mut request = Request::new(message);
    if let Some(token) = token {
        let value: MetadataValue<_> = format!("Bearer {token}").parse().unwrap();
        request.metadata_mut().insert("authorization", value);
    }
    request
}

async fn apps(client: &mut SessionServiceClient<Channel>, token: Option<&str>) -> Vec<String> {
    client
        .list_apps(with_token(ListAppsRequest {}, token))
        .await
        .unwrap()
        .into_inner()
        .app_names
}

#[tokio::test]
async fn list_apps_shows_the_apps_a_token_may_use() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.json");
    std::fs::write(&tokens, TOKENS).unwrap();
    let srv = SessionServer::start_with(|c| c.serve.tokens_file = Some(tokens)).await;
    let mut client = srv.client.clone();

    assert!(apps(&mut client, Some("token-for-ops")).await.is_empty());
    for (app, user) in [("b", "bob"), ("a", "alice"), ("a", "bob"), ("z", "zoe")] {
        let id = format!("{app}-{user}");
        client
            .create_session(with_token(
                create_request(app, user, &id, "{}"),
                Some("token-for-ops"),
            ))
            .await
            .unwrap();
    }

    assert_eq!(
        apps(&mut client, Some("token-for-ops")).await,
        ["a", "b", "z"]
    );
    // Granted a and c: c has no sessions, b and z are someone else's.
    assert_eq!(apps(&mut client, Some("token-for-app-a")).await, ["a"]);
    assert_eq!(apps(&mut client, Some("token-for-alice")).await, ["a"]);

    let anonymous = client
        .list_apps(with_token(ListAppsRequest {}, None))
        .await
        .unwrap_err();
    assert_eq!(anonymous.code(), Code::Unauthenticated);
    let unknown = client
        .list_apps(with_token(ListAppsRequest {}, Some("not-a-token")))
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::Unauthenticated);
}
