//! Reading a server's `/metrics`.

/// GETs `/metrics` with a bare HTTP/1.1 request.
pub async fn scrape(addr: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: metrics\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_owned()
}

/// The value of the sample with this name whose labels contain every `label`.
pub fn sample(exposition: &str, name: &str, labels: &[&str]) -> Option<f64> {
    exposition.lines().find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let matches = (series == name || series.starts_with(&format!("{name}{{")))
            && labels.iter().all(|l| series.contains(l));
        matches.then(|| value.parse().unwrap())
    })
}
