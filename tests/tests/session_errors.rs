//! session-svc refuses bad input with a status that names the field, and writes nothing.

use adk_proto::session::v1::{
    part::Data, AppendEventRequest, Blob, Content, Event, EventActions, FunctionCall,
    GetAppStateRequest, GetSessionRequest, GetUserStateRequest, ListEventsRequest,
    ListSessionsRequest, Part,
};
use adk_tests::{
    append_request, create_request, delta_event, get_request, json, text_event, SessionServer,
};
use serde_json::json;
use tonic::{Code, Status};

fn assert_status(result: Result<impl std::fmt::Debug, Status>, code: Code, field: &str) {
    let err = result.expect_err("the request must fail");
    assert_eq!(err.code(), code, "{}", err.message());
    assert!(
        err.message().contains(field),
        "message {:?} should name {field:?}",
        err.message()
    );
}

#[tokio::test]
async fn create_refuses_bad_identifiers_and_state_and_writes_nothing() {
    let srv = SessionServer::start().await;
    let mut c = srv.client.clone();
    let long = "x".repeat(257);
    let cases = [
        (create_request("", "u", "s", ""), "app_name"),
        (create_request("app", "", "s", ""), "user_id"),
        (create_request(&long, "u", "s", ""), "app_name"),
        (create_request("app", "u\u{7}", "s", ""), "user_id"),
        (create_request("app", "u", &long, ""), "session_id"),
        (create_request("app", "u", "s", "[1, 2]"), "state"),
        (create_request("app", "u", "s", "{not json"), "state"),
        (create_request("app", "u", "s", r#"{"": 1}"#), "state"),
        (
            create_request("app", "u", "s", r#"{"user:": 1, "app:ok": 1}"#),
            "state",
        ),
    ];
    for (req, field) in cases {
        assert_status(c.create_session(req).await, Code::InvalidArgument, field);
    }
    let mut both = create_request("app", "u", "s", "");
    both.ttl = Some(prost_types::Duration {
        seconds: 60,
        nanos: 0,
    });
    both.expire_time = Some(prost_types::Timestamp {
        seconds: 4_000_000_000,
        nanos: 0,
    });
    assert_status(c.create_session(both).await, Code::InvalidArgument, "ttl");
    let mut negative = create_request("app", "u", "s", "");
    negative.ttl = Some(prost_types::Duration {
        seconds: -1,
        nanos: 0,
    });
    assert_status(
        c.create_session(negative).await,
        Code::InvalidArgument,
        "ttl",
    );

    let app = c
        .get_app_state(GetAppStateRequest {
            app_name: "app".into(),
        })
        .await
        .unwrap();
    assert_eq!(
        json(&app.into_inner().state),
        json!({}),
        "no partial write of app state"
    );
    let listed = c
        .list_sessions(ListSessionsRequest {
            app_name: "app".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(listed.into_inner().sessions.is_empty());
}

#[tokio::test]
async fn reads_refuse_bad_arguments() {
    let srv = SessionServer::start().await;
    srv.create("app", "u", "s", json!({})).await;
    let mut c = srv.client.clone();
    let get = GetSessionRequest {
        num_recent_events: Some(-1),
        ..get_request("app", "u", "s")
    };
    assert_status(
        c.get_session(get.clone()).await,
        Code::InvalidArgument,
        "num_recent_events",
    );
    let empty_id = GetSessionRequest {
        session_id: "  ".into(),
        num_recent_events: None,
        ..get
    };
    assert_status(
        c.get_session(empty_id).await,
        Code::InvalidArgument,
        "session_id",
    );

    let list = |page_size: i32, page_token: &str, app: &str| ListSessionsRequest {
        app_name: app.into(),
        user_id: None,
        page_size,
        page_token: page_token.into(),
        ..Default::default()
    };
    assert_status(
        c.list_sessions(list(-1, "", "app")).await,
        Code::InvalidArgument,
        "page_size",
    );
    assert_status(
        c.list_sessions(list(0, "%%%", "app")).await,
        Code::InvalidArgument,
        "page_token",
    );
    assert_status(
        c.list_sessions(list(0, "", "")).await,
        Code::InvalidArgument,
        "app_name",
    );
    assert_status(
        c.get_user_state(GetUserStateRequest {
            app_name: "app".into(),
            user_id: String::new(),
        })
        .await,
        Code::InvalidArgument,
        "user_id",
    );

    // A token issued for one app cannot page through another.
    for i in 0..3 {
        srv.create("other", "u", &format!("s{i}"), json!({})).await;
    }
    let page = c
        .list_sessions(list(1, "", "other"))
        .await
        .unwrap()
        .into_inner();
    assert!(!page.next_page_token.is_empty());
    assert_status(
        c.list_sessions(list(1, &page.next_page_token, "app")).await,
        Code::InvalidArgument,
        "page_token",
    );

    let events = |token: &str| ListEventsRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        session_id: "s".into(),
        after_sequence: 0,
        page_size: 0,
        page_token: token.into(),
        ..Default::default()
    };
    assert_status(
        c.list_events(events(&page.next_page_token)).await,
        Code::InvalidArgument,
        "page_token",
    );
    let mut missing = events("");
    missing.session_id = "nope".into();
    assert_status(c.list_events(missing).await, Code::NotFound, "nope");
}

#[tokio::test]
async fn append_refuses_bad_events_without_writing_anything() {
    let srv = SessionServer::start().await;
    srv.create("app", "u", "s", json!({"k": 0})).await;
    let mut c = srv.client.clone();

    let with_call_args = |args: &str| {
        let mut e = text_event("agent", "x");
        e.content = Some(Content {
            role: Some("model".into()),
            parts: vec![Part {
                data: Some(Data::FunctionCall(FunctionCall {
                    name: Some("f".into()),
                    args: args.into(),
                    ..Default::default()
                })),
                ..Default::default()
            }],
        });
        e
    };
    let mut forced_sequence = delta_event(json!({"k": 1}));
    forced_sequence.sequence = 7;
    let mut bad_nanos = delta_event(json!({"k": 1}));
    bad_nanos.timestamp = Some(prost_types::Timestamp {
        seconds: 1,
        nanos: -5,
    });
    let mut bad_metadata = delta_event(json!({"k": 1}));
    bad_metadata.custom_metadata = "[]".into();
    let mut bad_id = delta_event(json!({"k": 1}));
    bad_id.id = "a\nb".into();
    let bad_delta = Event {
        actions: Some(EventActions {
            state_delta: "{\"k\": 1,".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let cases = [
        (forced_sequence, "event.sequence"),
        (bad_nanos, "event.timestamp"),
        (bad_metadata, "event.custom_metadata"),
        (bad_id, "event.id"),
        (bad_delta, "event.actions.state_delta"),
        (
            with_call_args("not json"),
            "event.content.parts[0].function_call.args",
        ),
        (
            with_call_args("[1]"),
            "event.content.parts[0].function_call.args",
        ),
    ];
    for (event, field) in cases {
        let result = c.append_event(append_request("app", "u", "s", event)).await;
        assert_status(result, Code::InvalidArgument, field);
    }
    let no_event = AppendEventRequest {
        event: None,
        ..append_request("app", "u", "s", Event::default())
    };
    assert_status(
        c.append_event(no_event).await,
        Code::InvalidArgument,
        "event",
    );

    let got = srv.get("app", "u", "s").await;
    assert!(got.events.is_empty());
    assert_eq!(json(&got.state), json!({"k": 0}));
}

#[tokio::test]
async fn append_to_missing_or_deleted_session_is_not_found() {
    let srv = SessionServer::start().await;
    let mut c = srv.client.clone();
    let result = c
        .append_event(append_request(
            "app",
            "u",
            "ghost",
            text_event("user", "hi"),
        ))
        .await;
    assert_status(result, Code::NotFound, "Session ghost not found.");
    let mut partial = text_event("user", "hi");
    partial.partial = Some(true);
    let result = c
        .append_event(append_request("app", "u", "ghost", partial))
        .await;
    assert_status(result, Code::NotFound, "ghost");
}

#[tokio::test]
async fn oversize_events_are_resource_exhausted() {
    let srv = SessionServer::start_with(|c| c.max_event_bytes = 64 * 1024).await;
    srv.create("app", "u", "s", json!({})).await;
    let mut big = text_event("user", "look");
    big.content.as_mut().unwrap().parts.push(Part {
        data: Some(Data::InlineData(Blob {
            data: Some(vec![7; 100 * 1024]),
            mime_type: Some("image/png".into()),
            display_name: None,
        })),
        ..Default::default()
    });
    let result = srv
        .client
        .clone()
        .append_event(append_request("app", "u", "s", big))
        .await;
    assert_status(result, Code::ResourceExhausted, "event");
    assert!(srv.get("app", "u", "s").await.events.is_empty());
    // The server keeps serving.
    srv.append("app", "u", "s", text_event("user", "small"))
        .await;
}

#[tokio::test]
async fn default_limit_accepts_events_carrying_images() {
    let srv = SessionServer::start().await;
    srv.create("app", "u", "s", json!({})).await;
    let mut e = text_event("user", "a photo");
    e.content.as_mut().unwrap().parts.push(Part {
        data: Some(Data::InlineData(Blob {
            data: Some(vec![1; 8 << 20]),
            mime_type: Some("image/jpeg".into()),
            display_name: None,
        })),
        ..Default::default()
    });
    let resp = srv.append("app", "u", "s", e).await;
    assert_eq!(resp.last_sequence, 1);
}

#[tokio::test]
async fn health_and_reflection_in_both_versions() {
    use tonic_health::pb::{
        health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest,
    };
    use tonic_reflection::pb::{v1, v1alpha};

    let srv = SessionServer::start().await;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", srv.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = HealthClient::new(channel.clone());
    let status = health
        .check(HealthCheckRequest {
            service: "adk.session.v1.SessionService".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .status;
    assert_eq!(status, ServingStatus::Serving as i32);

    let mut v1 = v1::server_reflection_client::ServerReflectionClient::new(channel.clone());
    let request = v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(v1::server_reflection_request::MessageRequest::ListServices(
            String::new(),
        )),
    };
    let mut stream = v1
        .server_reflection_info(tokio_stream::once(request))
        .await
        .unwrap()
        .into_inner();
    let reply = stream.message().await.unwrap().unwrap();
    let Some(v1::server_reflection_response::MessageResponse::ListServicesResponse(list)) =
        reply.message_response
    else {
        panic!("unexpected reflection reply {reply:?}");
    };
    let mut names: Vec<_> = list.service.into_iter().map(|s| s.name).collect();
    names.sort();
    // Reflection lists the AdminService exactly where it is served: on sled, not on PostgreSQL
    // (whose backups are the database's own).
    let admin =
        adk_proto::admin::v1::admin_service_client::AdminServiceClient::new(channel.clone())
            .snapshot(adk_proto::admin::v1::SnapshotRequest {})
            .await;
    let admin_served =
        !matches!(&admin, Err(status) if status.code() == tonic::Code::Unimplemented);
    assert_eq!(admin_served, adk_tests::postgres_url().is_none());
    let mut expected = vec!["adk.session.v1.SessionService", "grpc.health.v1.Health"];
    if admin_served {
        expected.insert(0, "adk.admin.v1.AdminService");
    }
    assert_eq!(names, expected);

    let mut alpha = v1alpha::server_reflection_client::ServerReflectionClient::new(channel);
    let request = v1alpha::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(
            v1alpha::server_reflection_request::MessageRequest::FileContainingSymbol(
                "adk.session.v1.SessionService".into(),
            ),
        ),
    };
    let mut stream = alpha
        .server_reflection_info(tokio_stream::once(request))
        .await
        .unwrap()
        .into_inner();
    let reply = stream.message().await.unwrap().unwrap();
    assert!(matches!(
        reply.message_response,
        Some(v1alpha::server_reflection_response::MessageResponse::FileDescriptorResponse(_))
    ));
}
