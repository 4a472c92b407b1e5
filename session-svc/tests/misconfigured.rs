//! What the binary says when it is pointed at the wrong place: a data directory another server
//! holds, a port in use, an HTTP/1 server where a gRPC one should be; and `snapshot` takes an
//! endpoint without a scheme, as runner-client and grpcurl do.

use std::{
    io::{Read, Write},
    net::SocketAddr,
    process::{Command, Output, Stdio},
};

use adk_tests::spawn_binary;

/// The binary with `args`, and no SESSION_SVC_* setting from the environment.
fn session_svc(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_session-svc"));
    for (name, _) in std::env::vars() {
        if name.starts_with("SESSION_SVC_") {
            command.env_remove(name);
        }
    }
    command
        .args(args)
        .env("RUST_LOG", "error")
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// An HTTP/1.1 server on a free port that answers every connection with 400 Bad Request, as
/// web servers answer HTTP/2's preface.
fn http1_server() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    let addr = listener.local_addr().expect("an address");
    std::thread::spawn(move || {
        for mut connection in listener.incoming().flatten() {
            let mut request = [0u8; 1024];
            let _ = connection.read(&mut request);
            let _ = connection.write_all(
                b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
        }
    });
    addr
}

#[tokio::test]
async fn a_data_directory_in_use_and_a_busy_port_are_named() {
    if adk_tests::postgres_url().is_some() {
        eprintln!("skipped: the data directory lock is the sled store's");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_running, _channel) = spawn_binary(env!("CARGO_BIN_EXE_session-svc"), dir.path()).await;
    let data_dir = dir.path().to_str().unwrap();

    let second = session_svc(&["--listen", "127.0.0.1:0", "--data-dir", data_dir]);
    assert!(!second.status.success());
    assert!(
        stderr(&second).contains(&format!(
            "cannot open the data directory {data_dir}: IO error: another process holds its \
             lock: is a server already running on it?"
        )),
        "{}",
        stderr(&second)
    );

    // A port some other program holds.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    let addr = taken.local_addr().unwrap().to_string();
    let other = tempfile::tempdir().unwrap();
    let busy = session_svc(&[
        "--listen",
        &addr,
        "--data-dir",
        other.path().to_str().unwrap(),
    ]);
    assert!(!busy.status.success());
    assert!(
        stderr(&busy).contains(&format!("cannot listen on {addr}: Address already in use")),
        "{}",
        stderr(&busy)
    );
}

// Two threads: the server runs in this process while the test waits for the command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_takes_an_endpoint_without_a_scheme_and_names_an_http1_server() {
    if adk_tests::postgres_url().is_some() {
        eprintln!("skipped: snapshots are the sled store's");
        return;
    }
    let server = adk_tests::SessionServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("snap");
    let file = file.to_str().unwrap();
    let bare = server.addr.to_string();
    let out = session_svc(&["snapshot", "--endpoint", &bare, "--output", file]);
    assert!(out.status.success(), "{}", stderr(&out));

    let http1 = http1_server().to_string();
    let out = session_svc(&["snapshot", "--endpoint", &http1, "--output", file]);
    assert!(!out.status.success());
    let said = stderr(&out);
    assert!(
        said.starts_with(&format!(
            "error: the server at {http1} does not speak gRPC ("
        )) && said.trim_end().ends_with("): is it an HTTP/1 server?"),
        "{said}"
    );
}
