//! Behaviour of the fault proxy against a local echo server (no Kafka).
//!
//! Timing assertions are lower bounds only, so a slow machine cannot make
//! them flaky.

use std::future::Future;
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::Duration;

use eosmirror_chaos::proxy::{Fault, FaultProxy, ProxyError, ProxyStats};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{timeout, Instant};

/// Any loopback port.
const ANY: &str = "127.0.0.1:0";

/// Generous bound for things that should happen "promptly".
const PROMPT: Duration = Duration::from_secs(5);

/// Starts an echo server on a free loopback port.
async fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind(ANY).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = conn.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    addr
}

/// An echo server with a fault proxy in front of it.
async fn proxied_echo() -> FaultProxy {
    FaultProxy::start(ANY.parse().unwrap(), echo_server().await)
        .await
        .unwrap()
}

/// Sends `data` through `conn` and reads back as many bytes, concurrently so
/// large payloads cannot deadlock on socket buffers.
async fn round_trip(conn: &mut TcpStream, data: &[u8]) -> Vec<u8> {
    let (mut r, mut w) = conn.split();
    let mut echoed = vec![0; data.len()];
    let (written, read) = tokio::join!(w.write_all(data), r.read_exact(&mut echoed));
    written.unwrap();
    read.unwrap();
    echoed
}

/// Non-repeating-looking bytes, so reordering or corruption is detected.
fn payload(len: usize) -> Vec<u8> {
    let mut x: u32 = 0x9e37_79b9;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// Polls `stats` until `done` holds, failing the test after [`PROMPT`].
async fn eventually(proxy: &FaultProxy, done: impl Fn(ProxyStats) -> bool) {
    let wait = async {
        while !done(proxy.stats()) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    timeout(PROMPT, wait)
        .await
        .unwrap_or_else(|_| panic!("stats never matched: {:?}", proxy.stats()));
}

/// Fails the test if `fut` completes within `window`.
async fn assert_pending<F: Future>(window: Duration, fut: F)
where
    F::Output: std::fmt::Debug,
{
    if let Ok(out) = timeout(window, fut).await {
        panic!("expected nothing within {window:?}, got {out:?}");
    }
}

/// Whether a read error is what a client sees after an RST.
fn is_reset(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
    )
}

#[tokio::test]
async fn forwards_bytes_intact() {
    let proxy = proxied_echo().await;
    let mut conn = TcpStream::connect(proxy.local_addr()).await.unwrap();
    let data = payload(4 * 1024 * 1024);
    assert!(round_trip(&mut conn, &data).await == data, "echo differs");
    let len = data.len() as u64;
    eventually(&proxy, |s| s.bytes_up == len && s.bytes_down == len).await;
    assert_eq!(proxy.stats().accepted, 1);
    assert_eq!(proxy.stats().active, 1);

    drop(conn);
    eventually(&proxy, |s| s.active == 0).await;
    proxy.shutdown().await;
}

#[tokio::test]
async fn blackhole_holds_traffic_then_heal_resets() {
    let proxy = proxied_echo().await;
    let mut before = TcpStream::connect(proxy.local_addr()).await.unwrap();
    round_trip(&mut before, b"ping").await;

    proxy.set_fault(Fault::BLACKHOLE);
    before.write_all(b"lost").await.unwrap();
    // Accepted, but not forwarded either.
    let mut during = TcpStream::connect(proxy.local_addr()).await.unwrap();
    during.write_all(b"lost").await.unwrap();
    let mut buf = [0; 4];
    // Timing out (rather than EOF or an error) shows the connections are open.
    assert_pending(Duration::from_millis(500), before.read(&mut buf)).await;
    assert_pending(Duration::from_millis(100), during.read(&mut buf)).await;
    assert_eq!(proxy.stats().bytes_up, 4);
    eventually(&proxy, |s| s.accepted == 2 && s.active == 2).await;

    // Healing resets everything that lived through the partition...
    proxy.set_fault(Fault::FORWARD);
    for conn in [&mut before, &mut during] {
        let err = timeout(PROMPT, conn.read(&mut buf))
            .await
            .unwrap()
            .unwrap_err();
        assert!(is_reset(err.kind()), "{err}");
    }
    eventually(&proxy, |s| s.resets == 2 && s.active == 0).await;
    // ...and new connections work again.
    let mut after = TcpStream::connect(proxy.local_addr()).await.unwrap();
    assert_eq!(round_trip(&mut after, b"pong").await, b"pong");
    proxy.shutdown().await;
}

#[tokio::test]
async fn reset_connections_sends_rst() {
    let proxy = proxied_echo().await;
    let mut conn = TcpStream::connect(proxy.local_addr()).await.unwrap();
    round_trip(&mut conn, b"ping").await;

    proxy.reset_connections();
    let mut buf = [0; 1];
    let err = timeout(PROMPT, conn.read(&mut buf))
        .await
        .unwrap()
        .unwrap_err();
    assert!(is_reset(err.kind()), "{err}");
    eventually(&proxy, |s| s.resets == 1 && s.active == 0).await;

    // Resets are one-shot: the proxy keeps serving.
    let mut again = TcpStream::connect(proxy.local_addr()).await.unwrap();
    assert_eq!(round_trip(&mut again, b"pong").await, b"pong");
    proxy.shutdown().await;
}

#[tokio::test]
async fn delay_applies_each_way() {
    const DELAY: Duration = Duration::from_millis(100);
    let proxy = proxied_echo().await;
    proxy.set_fault(Fault::FORWARD.with_delay(DELAY));
    let mut conn = TcpStream::connect(proxy.local_addr()).await.unwrap();

    let start = Instant::now();
    assert_eq!(round_trip(&mut conn, b"ping").await, b"ping");
    let elapsed = start.elapsed();
    assert!(elapsed >= 2 * DELAY, "round trip took only {elapsed:?}");
    proxy.shutdown().await;
}

#[tokio::test]
async fn bandwidth_limits_throughput() {
    let proxy = proxied_echo().await;
    proxy.set_fault(Fault::FORWARD.with_bandwidth(512 * 1024));
    let mut conn = TcpStream::connect(proxy.local_addr()).await.unwrap();

    // 256 KiB at 512 KiB/s needs ~0.45 s past the 50 ms burst.
    let data = payload(256 * 1024);
    let start = Instant::now();
    assert!(round_trip(&mut conn, &data).await == data, "echo differs");
    let elapsed = start.elapsed();
    assert!(
        elapsed >= Duration::from_millis(350),
        "256 KiB took only {elapsed:?}"
    );
    proxy.shutdown().await;
}

#[tokio::test]
async fn refuses_non_loopback() {
    let echo = echo_server().await;
    for (listen, upstream) in [
        ("0.0.0.0:0".parse().unwrap(), echo),
        (ANY.parse().unwrap(), "10.1.2.3:9092".parse().unwrap()),
    ] {
        match FaultProxy::start(listen, upstream).await {
            Err(ProxyError::NotLoopback(addr)) => assert!(!addr.ip().is_loopback()),
            other => panic!("expected NotLoopback, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn shutdown_closes_connections_and_frees_port() {
    let proxy = proxied_echo().await;
    let addr = proxy.local_addr();
    let mut conn = TcpStream::connect(addr).await.unwrap();
    round_trip(&mut conn, b"ping").await;

    proxy.shutdown().await;
    let mut buf = [0; 1];
    // Closed: EOF or an error, but not silence.
    let read = timeout(PROMPT, conn.read(&mut buf))
        .await
        .expect("connection left open");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    TcpListener::bind(addr).await.expect("port still taken");
}

#[tokio::test]
async fn drop_aborts_everything() {
    let proxy = proxied_echo().await;
    let addr = proxy.local_addr();
    let mut conn = TcpStream::connect(addr).await.unwrap();
    round_trip(&mut conn, b"ping").await;

    // What a panicking test does: no shutdown, just drop.
    drop(proxy);
    let mut buf = [0; 1];
    let read = timeout(PROMPT, conn.read(&mut buf))
        .await
        .expect("connection left open");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}

/// The opt-in for the user's own clusters: any upstream, but still only a
/// loopback listen address (only this machine's clients are disturbed).
#[tokio::test]
async fn remote_upstream_is_an_explicit_opt_in() {
    let remote: SocketAddr = "10.1.2.3:9092".parse().unwrap();
    let proxy = FaultProxy::start_to_remote(ANY.parse().unwrap(), remote)
        .await
        .expect("a remote upstream is allowed by start_to_remote");
    assert!(proxy.local_addr().ip().is_loopback());
    proxy.shutdown().await;
    match FaultProxy::start_to_remote("0.0.0.0:0".parse().unwrap(), remote).await {
        Err(ProxyError::NotLoopback(addr)) => assert!(!addr.ip().is_loopback()),
        other => panic!("expected NotLoopback, got {other:?}"),
    }
}

/// A stand-in for a Kafka broker: answers every request frame with a
/// response frame carrying the request's correlation id and `b"ok"`.
async fn kafka_like_server() -> SocketAddr {
    let listener = TcpListener::bind(ANY).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut size = [0; 4];
                while conn.read_exact(&mut size).await.is_ok() {
                    let mut request = vec![0; i32::from_be_bytes(size) as usize];
                    if conn.read_exact(&mut request).await.is_err() {
                        return;
                    }
                    let mut response = 6i32.to_be_bytes().to_vec();
                    response.extend(&request[4..8]);
                    response.extend(b"ok");
                    if conn.write_all(&response).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// A request frame: api key, version 0, correlation id, a short body.
fn kafka_request(api_key: i16, correlation_id: i32) -> Vec<u8> {
    let mut frame = 13i32.to_be_bytes().to_vec();
    frame.extend(api_key.to_be_bytes());
    frame.extend(0i16.to_be_bytes());
    frame.extend(correlation_id.to_be_bytes());
    frame.extend(b"body!");
    frame
}

/// Reads one response frame; its correlation id, or `None` when the
/// connection closed (or was reset) instead.
async fn kafka_response(conn: &mut TcpStream) -> Option<i32> {
    let mut frame = [0; 10];
    match timeout(PROMPT, conn.read_exact(&mut frame))
        .await
        .expect("neither a response nor a close")
    {
        Ok(_) => Some(i32::from_be_bytes(frame[4..8].try_into().unwrap())),
        Err(_) => None,
    }
}

const END_TXN: i16 = 26;
const METADATA: i16 = 3;

#[tokio::test]
async fn end_txn_responses_are_dropped_as_armed_and_close_the_connection() {
    let proxy = FaultProxy::start(ANY.parse().unwrap(), kafka_like_server().await)
        .await
        .unwrap();
    let mut conn = TcpStream::connect(proxy.local_addr()).await.unwrap();
    // Unarmed, EndTxn is answered like anything else.
    conn.write_all(&kafka_request(END_TXN, 1)).await.unwrap();
    assert_eq!(kafka_response(&mut conn).await, Some(1));

    proxy.drop_end_txn_responses(2);
    conn.write_all(&kafka_request(METADATA, 2)).await.unwrap();
    assert_eq!(kafka_response(&mut conn).await, Some(2), "not an EndTxn");
    conn.write_all(&kafka_request(END_TXN, 3)).await.unwrap();
    assert_eq!(kafka_response(&mut conn).await, None, "EndTxn answered");
    eventually(&proxy, |s| {
        s.end_txn_responses_dropped == 1 && s.active == 0
    })
    .await;

    // Pipelined: the response before the EndTxn's still arrives.
    let mut conn = TcpStream::connect(proxy.local_addr()).await.unwrap();
    let mut both = kafka_request(METADATA, 1);
    both.extend(kafka_request(END_TXN, 2));
    conn.write_all(&both).await.unwrap();
    assert_eq!(kafka_response(&mut conn).await, Some(1));
    assert_eq!(kafka_response(&mut conn).await, None, "EndTxn answered");
    eventually(&proxy, |s| s.end_txn_responses_dropped == 2).await;

    // Both drops spent: answered again.
    let mut conn = TcpStream::connect(proxy.local_addr()).await.unwrap();
    conn.write_all(&kafka_request(END_TXN, 1)).await.unwrap();
    assert_eq!(kafka_response(&mut conn).await, Some(1));
    assert_eq!(proxy.stats().end_txn_responses_dropped, 2);
    proxy.shutdown().await;
}
