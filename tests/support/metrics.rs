//! eosmirror's metrics endpoint: a free address for it, plain HTTP GETs,
//! and Prometheus samples by name and labels.

use std::time::{Duration, Instant};

/// A loopback address nothing listens on right now (e.g. for
/// `--metrics.address`).
pub fn free_local_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().unwrap().to_string()
}

/// The body of `http://address/metrics`, retrying while the endpoint starts.
pub fn scrape_metrics(address: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match http_get(address, "/metrics") {
            (200, body) => return body,
            other => assert!(
                Instant::now() < deadline,
                "metrics endpoint {address} did not answer: {other:?}"
            ),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `GET http://address/path`: the status code and the body; status 0 when
/// nothing answers (the endpoint is not up yet).
pub fn http_get(address: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let attempt = (|| -> std::io::Result<String> {
        let mut stream = std::net::TcpStream::connect(address)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
        )?;
        let mut response = String::new();
        stream.read_to_string(&mut response)?;
        Ok(response)
    })();
    let Ok(response) = attempt else {
        return (0, String::new());
    };
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, body)| body.to_string());
    (status, body)
}

/// The value of the Prometheus sample `name` whose labels include all of
/// `labels` (a sample without labels matches an empty `labels`).
pub fn metric_value(metrics: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    metrics
        .lines()
        .filter(|line| {
            line.starts_with(&format!("{name}{{")) || line.starts_with(&format!("{name} "))
        })
        .filter(|line| {
            labels
                .iter()
                .all(|(k, v)| line.contains(&format!("{k}=\"{v}\"")))
        })
        .find_map(|line| line.rsplit(' ').next()?.parse().ok())
}
