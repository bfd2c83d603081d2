//! One proxied connection: dialing upstream, relaying both directions with
//! the current fault applied, and resetting on request.

use std::collections::HashSet;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::time::{self, Instant};
use tracing::debug;

use super::fault::{self, Control};
use super::kafka::{self, Requests, Responses};
use super::{Lane, Shared};

/// Size of the fixed read buffer of each direction of each connection.
const CHUNK: usize = 64 * 1024;

/// Bytes a direction may have read but not yet written. Bounds memory when
/// delayed or blackholed; once reached the proxy stops reading and the
/// sender feels TCP backpressure. 1 MiB keeps the bandwidth-delay product
/// of local tests (tens of MB/s at 100 ms) from being throttled by it.
const MAX_IN_FLIGHT: usize = 1024 * 1024;

/// How much traffic a bandwidth limit lets through in a burst. Also the size
/// of the slices a throttled chunk is written in, so throttled traffic flows
/// smoothly instead of in 64 KiB lumps.
const BURST: Duration = Duration::from_millis(50);

/// Counts a connection in [`super::ProxyStats::active`] for as long as it
/// lives, including when its task is aborted.
pub(super) struct ActiveGuard(Arc<Shared>);

impl ActiveGuard {
    /// Counts one more active connection until the guard is dropped.
    pub(super) fn new(shared: Arc<Shared>) -> ActiveGuard {
        shared.active.fetch_add(1, Ordering::Relaxed);
        ActiveGuard(shared)
    }
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Serves one accepted client until either side closes, an error occurs, or
/// a reset is requested for its `generation`.
pub(super) async fn run(
    mut client: TcpStream,
    shared: Arc<Shared>,
    generation: u64,
    _active: ActiveGuard,
) {
    let mut control = shared.control.subscribe();
    // Declared out here so a reset can reach it after the relay is dropped.
    let mut upstream = None;
    tokio::select! {
        result = relay(&mut client, &mut upstream, &shared, generation) => {
            if let Err(err) = result {
                debug!(%err, "fault proxy connection failed");
            }
        }
        () = fault::reset_requested(&mut control, generation) => {
            shared.resets.fetch_add(1, Ordering::Relaxed);
            // SO_LINGER 0 makes the close below send an RST instead of a FIN.
            for stream in std::iter::once(&client).chain(upstream.as_ref()) {
                if let Err(err) = stream.set_zero_linger() {
                    debug!(%err, "fault proxy cannot arm reset");
                }
            }
        }
    }
}

/// Dials upstream (once not blackholed) and pumps bytes both ways until
/// both directions are closed or one fails.
async fn relay(
    client: &mut TcpStream,
    upstream: &mut Option<TcpStream>,
    shared: &Shared,
    generation: u64,
) -> io::Result<()> {
    let mut control = shared.control.subscribe();
    // A partition also swallows the handshake: dial only once it heals (it
    // never does for this connection, which is reset on heal).
    fault::forwarding(&mut control, generation).await;
    let upstream = upstream.insert(TcpStream::connect(shared.upstream).await?);
    // Forward small Kafka requests at once; the client already chose when
    // to send them.
    client.set_nodelay(true)?;
    upstream.set_nodelay(true)?;

    let (client_read, client_write) = client.split();
    let (upstream_read, upstream_write) = upstream.split();
    let end_txn_requests = Mutex::new(HashSet::new());
    tokio::try_join!(
        pipe(
            client_read,
            upstream_write,
            &shared.up,
            control.clone(),
            generation,
            Frames::Requests(Requests::new(), &end_txn_requests),
        ),
        pipe(
            upstream_read,
            client_write,
            &shared.down,
            control,
            generation,
            Frames::Responses(Responses::new(), &end_txn_requests, shared),
        ),
    )?;
    Ok(())
}

/// What one direction of a connection looks for in the Kafka frames
/// crossing it. Both directions share the correlation ids of the EndTxn
/// requests whose responses have not passed yet.
enum Frames<'a> {
    /// Client to broker: notes every EndTxn request.
    Requests(Requests, &'a Mutex<HashSet<i32>>),
    /// Broker to client: drops the response to a noted EndTxn request while
    /// the proxy has drops armed.
    Responses(Responses, &'a Mutex<HashSet<i32>>, &'a Shared),
}

impl Frames<'_> {
    /// How many leading bytes of `chunk`, the next bytes of this direction,
    /// to forward: all of them, or those before a response to drop (the
    /// connection then closes, so what follows never matters).
    fn forwardable(&mut self, chunk: &[u8]) -> usize {
        match self {
            Frames::Requests(requests, end_txn) => {
                for request in requests.feed(chunk) {
                    if request.api_key == kafka::END_TXN {
                        end_txn
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .insert(request.correlation_id);
                    }
                }
                chunk.len()
            }
            Frames::Responses(responses, end_txn, shared) => {
                for response in responses.feed(chunk) {
                    let answers_end_txn = end_txn
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .remove(&response.correlation_id);
                    let armed = answers_end_txn
                        && shared
                            .end_txn_drops_armed
                            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                                n.checked_sub(1)
                            })
                            .is_ok();
                    if armed {
                        shared
                            .end_txn_responses_dropped
                            .fetch_add(1, Ordering::Relaxed);
                        return response.start;
                    }
                }
                chunk.len()
            }
        }
    }
}

/// Copies `src` to `dst` with the current fault applied, then half-closes
/// `dst`; fails once `frames` drops a response, which closes the
/// connection.
///
/// A reader stage stamps each chunk with its arrival time and queues it; a
/// writer stage releases it once its delay has passed, bandwidth allows and
/// no blackhole is in force. Splitting the stages is what lets latency
/// pipeline instead of stalling the stream.
async fn pipe<R, W>(
    mut src: R,
    mut dst: W,
    lane: &Lane,
    mut control: watch::Receiver<Control>,
    generation: u64,
    mut frames: Frames<'_>,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (queue, mut queued) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    // Unbounded channel, bounded in bytes by this semaphore.
    let in_flight = &Semaphore::new(MAX_IN_FLIGHT);
    let closed = || io::Error::from(io::ErrorKind::BrokenPipe);

    // Moves `queue` in, so the writer sees the end when the reader is done.
    let read = async move {
        let mut buf = vec![0; CHUNK];
        loop {
            let n = src.read(&mut buf).await?;
            if n == 0 {
                return Ok(());
            }
            let arrived = Instant::now();
            // n <= CHUNK, which fits in u32.
            in_flight
                .acquire_many(n as u32)
                .await
                .map_err(|_| closed())?
                .forget();
            queue
                .send((arrived, buf[..n].to_vec()))
                .map_err(|_| closed())?;
        }
    };

    let write = async {
        while let Some((arrived, data)) = queued.recv().await {
            let forward = frames.forwardable(&data);
            let delay = control.borrow().fault.delay;
            time::sleep_until(arrived + delay).await;
            let mut rest = &data[..forward];
            while !rest.is_empty() {
                let mut n = rest.len();
                let limit = control.borrow().fault.bytes_per_sec;
                if let Some(rate) = limit {
                    n = n.min(burst_bytes(rate));
                    let wait = lane
                        .bucket
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .reserve(n, rate);
                    time::sleep(wait).await;
                }
                // Checked last, right before writing, so nothing passes once
                // a blackhole is set.
                fault::forwarding(&mut control, generation).await;
                dst.write_all(&rest[..n]).await?;
                lane.bytes.fetch_add(n as u64, Ordering::Relaxed);
                rest = &rest[n..];
            }
            in_flight.add_permits(data.len());
            if forward < data.len() {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "EndTxn response dropped",
                ));
            }
        }
        dst.shutdown().await
    };

    tokio::try_join!(read, write)?;
    Ok(())
}

/// Bytes a limit of `rate` bytes per second lets through in [`BURST`]; at
/// least 1 so progress is always possible.
fn burst_bytes(rate: u64) -> usize {
    let bytes = rate as f64 * BURST.as_secs_f64();
    (bytes as usize).clamp(1, CHUNK)
}

/// A token bucket for one direction's bandwidth limit, shared by all
/// connections of a proxy.
///
/// Senders reserve before writing and may drive the balance negative; each
/// then sleeps off the debt it sees, which queues concurrent senders fairly
/// without any waker bookkeeping.
#[derive(Debug)]
pub(super) struct TokenBucket {
    /// Bytes that may be sent right now; negative when in debt.
    tokens: f64,
    /// When `tokens` was last brought up to date.
    updated: Instant,
}

impl Default for TokenBucket {
    fn default() -> TokenBucket {
        TokenBucket {
            tokens: 0.0,
            updated: Instant::now(),
        }
    }
}

impl TokenBucket {
    /// Takes `n` bytes from the bucket refilling at `rate` bytes per second,
    /// returning how long the caller must wait before sending them.
    ///
    /// The rate is passed per call so a changed limit applies at once.
    fn reserve(&mut self, n: usize, rate: u64) -> Duration {
        let rate = rate.max(1) as f64;
        let now = Instant::now();
        let refill = now.duration_since(self.updated).as_secs_f64() * rate;
        self.tokens = (self.tokens + refill).min(rate * BURST.as_secs_f64());
        self.updated = now;
        self.tokens -= n as f64;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / rate)
        }
    }
}
