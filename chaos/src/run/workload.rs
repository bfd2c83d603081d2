//! The workload: producers writing checkable records to the source, part of
//! them in transactions aborted on purpose, and a consumer group consuming
//! part of what they write.
//!
//! - stream 0: an idempotent producer; a record is committed when its
//!   delivery is acknowledged, uncertain when delivery fails;
//! - stream 1: a transactional producer; transactions of 1–20 records, about
//!   one in seven aborted on purpose (records flagged
//!   [`crate::record::FLAG_ABORTED`]); a failed transaction is aborted (its
//!   records must never appear) or, if its commit failed ambiguously,
//!   uncertain;
//! - stream 2: records written (then deleted) by the source-gap scenario.
//!
//! Every outcome goes into the shared [`Ledger`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Result};
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{DeliveryResult, Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext, ThreadedProducer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use super::clusters::ClusterSpec;
use super::rng::Rng;
use crate::ledger::{Ledger, Outcome};
use crate::record::{encode, Encoded, HeaderList, Meta, FLAG_ABORTED};

/// Key ids per stream (stream `s` uses `s*16 .. s*16+KEYS`).
const KEYS: u32 = 8;

/// How long a transaction operation may take before it counts as failed.
const TXN_TIMEOUT: Duration = Duration::from_secs(30);

/// What the workload writes, and where.
#[derive(Debug, Clone)]
pub struct WorkloadSpec {
    /// The source cluster (direct, never through a proxy).
    pub source: ClusterSpec,
    /// Topic to write.
    pub topic: String,
    /// Its partitions.
    pub partitions: i32,
    /// Records per second, both streams together.
    pub rate: u32,
    /// Identifies the run in every record.
    pub run: u64,
    /// Seeds sizes, keys, headers and transaction shapes.
    pub seed: u64,
    /// The consumer group that consumes part of the topic.
    pub group: String,
}

/// Shared between the handle and the writer threads.
#[derive(Debug, Default)]
struct Control {
    stop: AtomicBool,
    pause: AtomicBool,
    /// Writers parked because of `pause`, with nothing in flight.
    parked: AtomicUsize,
}

/// A running workload.
pub struct Workload {
    spec: WorkloadSpec,
    control: Arc<Control>,
    /// The shared ledger.
    pub ledger: Arc<Mutex<Ledger>>,
    writers: Vec<JoinHandle<()>>,
    group: Option<JoinHandle<()>>,
    group_stop: Arc<AtomicBool>,
    /// Records the group consumer consumed.
    pub group_consumed: Arc<AtomicU64>,
    /// Sequence counters of the streams written on demand (2: records
    /// deleted before they are copied, 3: a transaction held open), per
    /// (stream, partition, key) and per (stream, partition).
    side_kseq: BTreeMap<(u8, u32, u32), u64>,
    side_pseq: BTreeMap<(u8, u32), u64>,
}

/// A source transaction the scenario holds open (a two-phase-commit sink
/// between checkpoints), then commits.
pub struct HeldTransaction {
    producer: BaseProducer,
    metas: Vec<Meta>,
    ledger: Arc<Mutex<Ledger>>,
}

impl HeldTransaction {
    /// Commits it; its records must then be copied exactly once.
    pub fn commit(self) -> Result<()> {
        match self.producer.commit_transaction(TXN_TIMEOUT) {
            Ok(()) => {
                lock(&self.ledger).record(Outcome::Committed, &self.metas);
                Ok(())
            }
            Err(e) => {
                lock(&self.ledger).record(Outcome::Uncertain, &self.metas);
                Err(anyhow!("commit the held transaction: {e}"))
            }
        }
    }
}

/// Builds records: keys, sizes, headers and timestamps vary.
struct Maker {
    run: u64,
    stream: u8,
    partitions: u32,
    rng: Rng,
    kseq: BTreeMap<(u32, u32), u64>,
    pseq: BTreeMap<u32, u64>,
}

impl Maker {
    fn new(spec: &WorkloadSpec, stream: u8) -> Maker {
        Maker {
            run: spec.run,
            stream,
            partitions: spec.partitions as u32,
            rng: Rng::derive(spec.seed, &format!("workload-{stream}")),
            kseq: BTreeMap::new(),
            pseq: BTreeMap::new(),
        }
    }

    /// The next record for a random partition (or `partition`).
    /// `aborted`: written in a transaction that will be aborted on purpose
    /// (flagged, consumes no `kseq`).
    fn next(&mut self, partition: Option<u32>, aborted: bool) -> (Meta, Encoded) {
        let r = &mut self.rng;
        let partition = partition.unwrap_or_else(|| r.range(0, u64::from(self.partitions)) as u32);
        let key = u32::from(self.stream) * 16 + r.range(0, u64::from(KEYS)) as u32;
        let kseq = self.kseq.entry((partition, key)).or_insert(0);
        let pseq = self.pseq.entry(partition).or_insert(0);
        let meta = Meta {
            run: self.run,
            stream: self.stream,
            flags: if aborted { FLAG_ABORTED } else { 0 },
            partition,
            key,
            kseq: *kseq,
            pseq: *pseq,
        };
        if !aborted {
            *kseq += 1;
        }
        *pseq += 1;
        let pad = match r.range(0, 100) {
            0..=69 => r.range(0, 200),
            70..=96 => r.range(200, 4000),
            _ => r.range(10_000, 60_000),
        } as usize;
        let mut headers: HeaderList = Vec::new();
        for _ in 0..r.range(0, 4) {
            let (k, v) = match r.range(0, 4) {
                0 => ("trace", Some(format!("{:x}", r.next()).into_bytes())),
                1 => ("null", None),
                2 => ("empty", Some(Vec::new())),
                _ => ("bin", Some(r.next().to_le_bytes().to_vec())),
            };
            headers.push((k.to_string(), v));
        }
        let now = now_ms();
        let timestamp = if r.chance(2) {
            now - 30 * 24 * 3600 * 1000
        } else {
            now
        };
        let e = encode(&meta, pad, headers, timestamp);
        (meta, e)
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn record<'a>(topic: &'a str, e: &'a Encoded, partition: u32) -> BaseRecord<'a, [u8], [u8]> {
    fill(BaseRecord::to(topic), e, partition)
}

/// Sets a record's partition, key, value, headers and timestamp from `e`.
fn fill<'a, D: rdkafka::util::IntoOpaque>(
    r: BaseRecord<'a, [u8], [u8], D>,
    e: &'a Encoded,
    partition: u32,
) -> BaseRecord<'a, [u8], [u8], D> {
    let mut headers = OwnedHeaders::new_with_capacity(e.headers.len());
    for (k, v) in &e.headers {
        headers = headers.insert(Header {
            key: k,
            value: v.as_deref(),
        });
    }
    let mut r = r
        .partition(partition as i32)
        .payload(e.value.as_slice())
        .headers(headers)
        .timestamp(e.timestamp);
    if let Some(k) = &e.key {
        r = r.key(k.as_slice());
    }
    r
}

/// Records delivery outcomes of the plain producer in the ledger.
struct Ctx {
    ledger: Arc<Mutex<Ledger>>,
    /// What an acknowledged record counts as.
    success: Outcome,
}

impl ClientContext for Ctx {}

impl ProducerContext for Ctx {
    type DeliveryOpaque = Box<Meta>;

    fn delivery(&self, result: &DeliveryResult<'_>, meta: Box<Meta>) {
        let outcome = if result.is_ok() {
            self.success
        } else {
            Outcome::Uncertain
        };
        lock(&self.ledger).record(outcome, std::slice::from_ref(&*meta));
    }
}

/// Locks a mutex, ignoring poisoning (a panicked writer is reported anyway).
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Workload {
    /// Starts both writers and the group consumer.
    pub fn start(spec: WorkloadSpec) -> Result<Workload> {
        let control = Arc::new(Control::default());
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let plain: ThreadedProducer<Ctx> = spec
            .source
            .client_config()
            .set("enable.idempotence", "true")
            .set("linger.ms", "5")
            .set("message.timeout.ms", "180000")
            .create_with_context(Ctx {
                ledger: ledger.clone(),
                success: Outcome::Committed,
            })?;
        let mut writers = Vec::new();
        {
            let (spec, control) = (spec.clone(), control.clone());
            writers.push(std::thread::spawn(move || {
                plain_writer(spec, control, plain)
            }));
        }
        {
            let (spec, control, ledger) = (spec.clone(), control.clone(), ledger.clone());
            writers.push(std::thread::spawn(move || {
                txn_writer(spec, control, ledger)
            }));
        }
        let group_stop = Arc::new(AtomicBool::new(false));
        let group_consumed = Arc::new(AtomicU64::new(0));
        let group = {
            let (spec, stop, consumed) = (spec.clone(), group_stop.clone(), group_consumed.clone());
            std::thread::spawn(move || group_consumer(spec, stop, consumed))
        };
        Ok(Workload {
            spec,
            control,
            ledger,
            writers,
            group: Some(group),
            group_stop,
            group_consumed,
            side_kseq: BTreeMap::new(),
            side_pseq: BTreeMap::new(),
        })
    }

    /// Parks both writers with nothing in flight; returns when they are.
    pub fn pause(&self, limit: Duration) -> Result<()> {
        self.control.pause.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + limit;
        while self.control.parked.load(Ordering::SeqCst) < self.writers.len() {
            if Instant::now() > deadline {
                return Err(anyhow!(
                    "the workload writers did not pause within {limit:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Lets paused writers go on.
    pub fn resume(&self) {
        self.control.pause.store(false, Ordering::SeqCst);
    }

    /// Writes `count` records to `partition` (stream 2) and waits for them;
    /// they are recorded as deleted-from-the-source (the caller deletes them
    /// before eosmirror can copy them). Returns their identities.
    pub fn write_doomed(&mut self, partition: i32, count: usize) -> Result<Vec<Meta>> {
        let producer: BaseProducer = self
            .spec
            .source
            .client_config()
            .set("enable.idempotence", "true")
            .create()?;
        let mut metas = Vec::new();
        for i in 0..count {
            let meta = self.side_meta(2, partition as u32, i);
            let e = encode(&meta, 50, vec![("doomed".into(), None)], now_ms());
            producer
                .send(record(&self.spec.topic, &e, meta.partition))
                .map_err(|(e, _)| anyhow!("write doomed records: {e}"))?;
            metas.push(meta);
        }
        producer.flush(Duration::from_secs(60))?;
        lock(&self.ledger).record(Outcome::Deleted, &metas);
        Ok(metas)
    }

    /// The next record identity of on-demand stream `stream` (keys
    /// `stream*16 ..`) in `partition`; `i` picks the key.
    fn side_meta(&mut self, stream: u8, partition: u32, i: usize) -> Meta {
        let key = u32::from(stream) * 16 + (i as u32 % KEYS);
        let kseq = self.side_kseq.entry((stream, partition, key)).or_insert(0);
        let pseq = self.side_pseq.entry((stream, partition)).or_insert(0);
        let meta = Meta {
            run: self.spec.run,
            stream,
            flags: 0,
            partition,
            key,
            kseq: *kseq,
            pseq: *pseq,
        };
        *kseq += 1;
        *pseq += 1;
        meta
    }

    /// Writes `count` records to `partition` (stream 3) in a source
    /// transaction and leaves it open: the partition's last stable offset
    /// stands still until [`HeldTransaction::commit`].
    pub fn hold_transaction(&mut self, partition: i32, count: usize) -> Result<HeldTransaction> {
        let producer: BaseProducer = self
            .spec
            .source
            .client_config()
            .set("transactional.id", format!("{}-held", self.spec.topic))
            .set("transaction.timeout.ms", "300000")
            .create()?;
        producer.init_transactions(TXN_TIMEOUT)?;
        producer.begin_transaction()?;
        let mut metas = Vec::new();
        for i in 0..count {
            let meta = self.side_meta(3, partition as u32, i);
            let e = encode(&meta, 50, vec![("held".into(), None)], now_ms());
            producer
                .send(record(&self.spec.topic, &e, meta.partition))
                .map_err(|(e, _)| anyhow!("write held records: {e}"))?;
            metas.push(meta);
        }
        producer.flush(Duration::from_secs(60))?;
        Ok(HeldTransaction {
            producer,
            metas,
            ledger: self.ledger.clone(),
        })
    }

    /// Stops the writers (waiting for what they have in flight) and the
    /// group consumer.
    pub fn finish(mut self) -> Arc<Mutex<Ledger>> {
        self.control.stop.store(true, Ordering::SeqCst);
        self.control.pause.store(false, Ordering::SeqCst);
        for w in self.writers.drain(..) {
            let _ = w.join();
        }
        self.group_stop.store(true, Ordering::SeqCst);
        if let Some(g) = self.group.take() {
            let _ = g.join();
        }
        self.ledger.clone()
    }
}

/// Parks while paused; returns false once stopped.
fn park(control: &Control, flush: impl Fn()) -> bool {
    if control.pause.load(Ordering::SeqCst) && !control.stop.load(Ordering::SeqCst) {
        flush();
        control.parked.fetch_add(1, Ordering::SeqCst);
        while control.pause.load(Ordering::SeqCst) && !control.stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(10));
        }
        control.parked.fetch_sub(1, Ordering::SeqCst);
    }
    !control.stop.load(Ordering::SeqCst)
}

/// Stream 0: one record per tick at half the rate, acknowledged one by one.
fn plain_writer(spec: WorkloadSpec, control: Arc<Control>, producer: ThreadedProducer<Ctx>) {
    let mut maker = Maker::new(&spec, 0);
    let interval = Duration::from_secs_f64(2.0 / f64::from(spec.rate.max(2)));
    let mut next = Instant::now();
    let flush = || {
        // Deliveries resolve within message.timeout.ms: retry until flushed.
        while producer.flush(Duration::from_secs(5)).is_err() {}
    };
    while park(&control, flush) {
        let (meta, e) = maker.next(None, false);
        let partition = meta.partition;
        let mut pending = fill(
            BaseRecord::with_opaque_to(&spec.topic, Box::new(meta)),
            &e,
            partition,
        );
        loop {
            match producer.send(pending) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    std::thread::sleep(Duration::from_millis(20));
                    pending = back;
                }
                Err((_, back)) => {
                    // Never handed to the broker.
                    lock(&producer.context().ledger)
                        .record(Outcome::Aborted, &[*back.delivery_opaque]);
                    break;
                }
            }
        }
        next += interval;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else if now - next > Duration::from_secs(1) {
            next = now;
        }
    }
    flush();
}

/// Writes `count` records of another workload run to every partition of
/// `topic`: records that must never reach this run's copy (the judge counts
/// any it sees as unexpected).
pub fn write_strangers(
    source: &ClusterSpec,
    topic: &str,
    partitions: i32,
    count: usize,
    run: u64,
) -> Result<()> {
    let producer: BaseProducer = source
        .client_config()
        .set("enable.idempotence", "true")
        .create()?;
    for partition in 0..partitions as u32 {
        for i in 0..count {
            let meta = Meta {
                run,
                stream: 0,
                flags: 0,
                partition,
                key: i as u32 % KEYS,
                kseq: i as u64,
                pseq: i as u64,
            };
            let e = encode(&meta, 50, vec![("stranger".into(), None)], now_ms());
            producer
                .send(record(topic, &e, partition))
                .map_err(|(e, _)| anyhow!("write records of another run: {e}"))?;
        }
    }
    producer.flush(Duration::from_secs(60))?;
    Ok(())
}

/// A transactional producer for stream 1, initialised (retrying while the
/// source is unreachable). `None` once stopped.
fn txn_producer(spec: &WorkloadSpec, id: &str, control: &Control) -> Option<BaseProducer> {
    loop {
        if control.stop.load(Ordering::SeqCst) {
            return None;
        }
        let producer: Result<BaseProducer, _> = spec
            .source
            .client_config()
            .set("transactional.id", id)
            .set("transaction.timeout.ms", "60000")
            .set("linger.ms", "5")
            .create();
        match producer {
            Ok(p) => match p.init_transactions(TXN_TIMEOUT) {
                Ok(()) => return Some(p),
                Err(_) => std::thread::sleep(Duration::from_millis(500)),
            },
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

/// Stream 1: transactions of 1–20 records at half the rate; about one in
/// seven aborted on purpose.
fn txn_writer(spec: WorkloadSpec, control: Arc<Control>, ledger: Arc<Mutex<Ledger>>) {
    let id = format!("chaos-workload-{}", spec.run);
    let mut maker = Maker::new(&spec, 1);
    let mut shape = Rng::derive(spec.seed, "transactions");
    let Some(mut producer) = txn_producer(&spec, &id, &control) else {
        return;
    };
    let per_record = 2.0 / f64::from(spec.rate.max(2));
    while park(&control, || {}) {
        let n = shape.range(1, 21) as usize;
        let on_purpose = shape.chance(15);
        let batch: Vec<(Meta, Encoded)> = (0..n).map(|_| maker.next(None, on_purpose)).collect();
        let metas: Vec<Meta> = batch.iter().map(|(m, _)| m.clone()).collect();
        let started = Instant::now();
        let outcome = run_transaction(&producer, &spec.topic, &batch, on_purpose);
        let outcome = match outcome {
            TxnEnd::Done(o) => o,
            TxnEnd::Broken(o) => {
                // A new producer with the same id fences this one and ends
                // its open transaction (aborting it unless it was already
                // being committed — then the outcome is uncertain).
                drop(producer);
                ledger_record(&ledger, o, on_purpose, &metas);
                match txn_producer(&spec, &id, &control) {
                    Some(p) => producer = p,
                    None => return,
                }
                continue;
            }
        };
        ledger_record(&ledger, outcome, on_purpose, &metas);
        let pace = Duration::from_secs_f64(per_record * n as f64);
        if let Some(rest) = pace.checked_sub(started.elapsed()) {
            std::thread::sleep(rest);
        }
    }
}

fn ledger_record(ledger: &Mutex<Ledger>, outcome: Outcome, on_purpose: bool, metas: &[Meta]) {
    let outcome = if on_purpose {
        Outcome::Deliberate
    } else {
        outcome
    };
    lock(ledger).record(outcome, metas);
}

/// How a transaction ended.
enum TxnEnd {
    /// Ended cleanly as this outcome; the producer is reusable.
    Done(Outcome),
    /// Ended as this outcome; the producer must be replaced.
    Broken(Outcome),
}

fn run_transaction(
    producer: &BaseProducer,
    topic: &str,
    batch: &[(Meta, Encoded)],
    on_purpose: bool,
) -> TxnEnd {
    let abort = |producer: &BaseProducer| match producer.abort_transaction(TXN_TIMEOUT) {
        Ok(()) => TxnEnd::Done(Outcome::Aborted),
        // Not committed: the replacement producer's init aborts it.
        Err(_) => TxnEnd::Broken(Outcome::Aborted),
    };
    if producer.begin_transaction().is_err() {
        return TxnEnd::Broken(Outcome::Aborted);
    }
    for (meta, e) in batch {
        let mut pending = record(topic, e, meta.partition);
        loop {
            match producer.send(pending) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    producer.poll(Duration::from_millis(20));
                    pending = back;
                }
                Err(_) => return abort(producer),
            }
        }
        producer.poll(Duration::ZERO);
    }
    if on_purpose {
        // Flush first so the aborted records really reach the log.
        if producer.flush(TXN_TIMEOUT).is_err() {
            return abort(producer);
        }
        return abort(producer);
    }
    for _ in 0..3 {
        match producer.commit_transaction(TXN_TIMEOUT) {
            Ok(()) => return TxnEnd::Done(Outcome::Committed),
            Err(KafkaError::Transaction(e)) if e.is_retriable() => continue,
            Err(KafkaError::Transaction(e)) if e.txn_requires_abort() => return abort(producer),
            Err(_) => return TxnEnd::Broken(Outcome::Uncertain),
        }
    }
    TxnEnd::Broken(Outcome::Uncertain)
}

/// Consumes the topic as group `spec.group` at about a third of the write
/// rate, committing every few records, so that when the workload stops the
/// group has consumed part of the topic.
///
/// Scenarios run side by side, and another one may be restarting the source
/// broker (the group coordinator) when this one stops: the group keeps
/// consuming and committing until it has a committed position, for up to
/// [`GROUP_COMMIT_DEADLINE`], so the group check never sees an empty group.
fn group_consumer(spec: WorkloadSpec, stop: Arc<AtomicBool>, consumed: Arc<AtomicU64>) {
    let consumer: BaseConsumer = match spec
        .source
        .client_config()
        .set("group.id", &spec.group)
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("auto.offset.reset", "earliest")
        .create()
    {
        Ok(c) => c,
        Err(e) => return eprintln!("group consumer {}: {e}", spec.group),
    };
    // The scenario's group is new, so it starts at the beginning. Not at
    // `Stored`: on fresh brokers this consumer's first request creates
    // __consumer_offsets, and a consumer that had to fetch its stored
    // offsets then was seen never to start (nothing consumed, nothing
    // committed in 100 s).
    let mut tpl = TopicPartitionList::new();
    for p in 0..spec.partitions {
        let _ = tpl.add_partition_offset(&spec.topic, p, Offset::Beginning);
    }
    if let Err(e) = consumer.assign(&tpl) {
        return eprintln!("group consumer {}: assign: {e}", spec.group);
    }
    let pace = Duration::from_secs_f64(3.0 / f64::from(spec.rate.max(3)));
    let mut since_commit = 0;
    let mut committed_once = false;
    let mut stopped_at = None;
    loop {
        if stop.load(Ordering::SeqCst) {
            let since = *stopped_at.get_or_insert_with(Instant::now);
            if since_commit == 0 && committed_once {
                return;
            }
            if since.elapsed() > GROUP_COMMIT_DEADLINE {
                return eprintln!(
                    "group consumer {}: no committed position {GROUP_COMMIT_DEADLINE:?} after the workload stopped",
                    spec.group
                );
            }
        }
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            let _ = m.offset();
            consumed.fetch_add(1, Ordering::Relaxed);
            since_commit += 1;
            if stopped_at.is_none() {
                std::thread::sleep(pace);
            }
        }
        let due = since_commit >= 25 || (stopped_at.is_some() && since_commit > 0);
        if due && consumer.commit_consumer_state(CommitMode::Sync).is_ok() {
            since_commit = 0;
            committed_once = true;
        }
    }
}

/// How long the group consumer keeps trying to commit after the workload
/// stopped (a broker restart of a side-by-side scenario takes seconds).
const GROUP_COMMIT_DEADLINE: Duration = Duration::from_secs(90);
