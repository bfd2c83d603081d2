# The benchmarks' shared set-up (sourced, not run): the release build, a
# work dir, the local clusters and Apache's tools.
#
#   source "$repo/tests/bench/common.sh"
#   bench_build [CARGO BUILD ARGS...]  release build (default: the eosmirror and
#                                      eosmirror-chaos binaries); sets bin, work, cluster
#   cleanup() { ...stop the bench's own processes...; bench_finish; }
#   trap cleanup EXIT
#   bench_clusters                     uses the running local clusters, or starts
#                                      full-JIT ones; sets their addresses; defines `kafka`
#   bench_topics=REGEX                 topics bench_finish deletes from clusters that
#                                      outlive the bench
#   bench_create_topic BOOTSTRAP TOPIC PARTITIONS
#                                      creates TOPIC on the cluster at BOOTSTRAP
#   bench_load TOPIC RECORDS SIZE PARTITIONS
#                                      creates TOPIC on the source and fills every
#                                      partition evenly (BlockPartitioner.java)
#   bench_ingest_limit TOPIC RECORDS SIZE PARTITIONS PRODUCER_CONFIG
#                                      the target's transactional ingest limit;
#                                      sets limit_rps and limit_mbps
#   bench_wait_committed RECORDS PARTITIONS "PIDS" METRICS_URL...
#                                      waits for eosmirror's own count of committed
#                                      records; sets committed_at and middle
#   bench_cpu_seconds PID              CPU seconds (user + system) of a live process
#   bench_check_copy TOPIC TARGET_TOPIC OUT
#                                      checks the copy record by record (report in
#                                      OUT, its first lines printed); fails if not exact
#
# bench_finish stops the clusters bench_clusters started, or deletes the
# bench's topics from running ones (a few thousand-partition runs take a
# broker to its open-file limit; a few runs of gigabytes filled the disk),
# and removes the work dir.

bench_started_clusters=0
bench_topics=""

bench_build() {
  cluster="$repo/tests/kafka/cluster"
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eosmirror/target}"
  if (($#)); then
    cargo build --release --quiet "$@"
  else
    cargo build --release --quiet -p eosmirror -p eosmirror-chaos --bins
  fi
  bin="$CARGO_TARGET_DIR/release"
  work="$(mktemp -d)"
}

bench_clusters() {
  if ! "$cluster" status >/dev/null; then
    bench_started_clusters=1
    EOSMIRROR_KAFKA_JVM_OPTS="" "$cluster" up
  else
    echo "bench: using the running clusters (their JVM options are whatever they were started with)"
  fi
  eval "$("$cluster" env)"
  printf 'status=error\nrootLogger.level=error\n' >"$work/tools-log4j2.properties"
  bench_check_readahead "${EOSMIRROR_KAFKA_WORK:-$repo/target/kafka-local}"
}

# Warns when the disk under the brokers' data (DIR) reads ahead more than
# 1 MB. A broker memory-maps each partition's sparse 10 MB index files, and
# with a large readahead every fault on a new one reads (zero-fills) up to
# the readahead: on December 4 an 8 MB readahead had the target broker
# spend most of the machine in the kernel's memset for a minute and more
# after a topic of 5,000 partitions was created, and eosmirror copied
# 8-11k records/s instead of about 200k (tests/bench/RESULTS.md).
bench_check_readahead() {
  local dev sys kb
  dev="$(basename "$(df --output=source "$1" 2>/dev/null | tail -n 1)")"
  sys="/sys/class/block/$dev"
  [[ -e "$sys/partition" ]] && sys="$(readlink -f "$sys/..")"
  kb="$(cat "$sys/queue/read_ahead_kb" 2>/dev/null)" || return 0
  if ((kb > 1024)); then
    echo "bench: warning: $dev reads ahead $kb KB; a broker may zero-fill that much of each new partition's index files on first use, which slowed copies into thousands of new partitions (as root: echo 128 > $sys/queue/read_ahead_kb)"
  fi
}

kafka() { java -Xmx512m -cp "$EOSMIRROR_KAFKA_LIB/*:$work/classes" -Dlog4j2.configurationFile="$work/tools-log4j2.properties" "$@"; }

# bench_create_topic BOOTSTRAP TOPIC PARTITIONS: TOPIC with the broker's
# defaults otherwise.
bench_create_topic() {
  kafka org.apache.kafka.tools.TopicCommand --bootstrap-server "$1" --create --topic "$2" --partitions "$3" >/dev/null
}

# bench_load TOPIC RECORDS SIZE PARTITIONS: every partition gets its share
# of the records in runs of consecutive ones (round-robin made one-record
# batches that a source broker took minutes to write at 5,000 partitions;
# the default sticky partitioner left most partitions empty). Deliveries
# may wait up to 15 minutes on a loaded broker, and the load fails loudly
# unless the topic then holds every record (a copy would otherwise be
# waited for forever). One request in flight: a fresh topic's first batch
# to a partition can fail while the broker is still creating it, and a
# second batch accepted before its retry leaves the idempotent producer
# retrying an out-of-order sequence until the delivery timeout (seen at
# 1,000 partitions).
bench_load() {
  local topic="$1" records="$2" size="$3" partitions="$4" held
  if [[ ! -f "$work/classes/BlockPartitioner.class" ]]; then
    mkdir -p "$work/classes"
    javac -nowarn -cp "$EOSMIRROR_KAFKA_LIB/*" -d "$work/classes" "$repo/tests/bench/BlockPartitioner.java"
  fi
  bench_create_topic "$EOSMIRROR_SOURCE_BOOTSTRAP" "$topic" "$partitions"
  kafka org.apache.kafka.tools.ProducerPerformance --topic "$topic" --num-records "$records" \
    --record-size "$size" --throughput -1 \
    --producer-props bootstrap.servers="$EOSMIRROR_SOURCE_BOOTSTRAP" acks=all linger.ms=5 batch.size=262144 \
      max.in.flight.requests.per.connection=1 partitioner.class=BlockPartitioner block.records=$(((records + partitions - 1) / partitions)) \
      delivery.timeout.ms=900000 >/dev/null
  held="$(kafka org.apache.kafka.tools.GetOffsetShell --bootstrap-server "$EOSMIRROR_SOURCE_BOOTSTRAP" \
    --topic "$topic" --time -1 | awk -F: '{ s += $NF } END { print s + 0 }')"
  if ((held != records)); then
    echo "bench: loading $topic wrote $held of $records records (the source broker lost deliveries); not a valid run" >&2
    exit 1
  fi
}

# bench_ingest_limit TOPIC RECORDS SIZE PARTITIONS PRODUCER_CONFIG: the
# target's transactional ingest limit, the bar a copy is measured against:
# Apache's ProducerPerformance writing RECORDS records of SIZE bytes in
# 200 ms transactions (eosmirror's default commit interval) into a fresh
# TOPIC of PARTITIONS partitions on the target alone, with the producer
# properties in PRODUCER_CONFIG. Sets limit_rps and limit_mbps. TOPIC is
# deleted once measured, so the copies do not share the broker with its
# open files: a second 5,000-partition topic took the target broker past
# its 20,000 open files (December 5).
bench_ingest_limit() {
  local topic="$1" records="$2" size="$3" partitions="$4" config="$5" line
  bench_create_topic "$EOSMIRROR_TARGET_BOOTSTRAP" "$topic" "$partitions"
  echo "bench: ingest limit into $topic: ProducerPerformance, transactional (200 ms transactions), into the target alone"
  line="$(kafka org.apache.kafka.tools.ProducerPerformance --topic "$topic" --num-records "$records" \
    --record-size "$size" --throughput -1 --transactional-id "$topic" --transaction-duration-ms 200 \
    --producer.config "$config" --producer-props acks=all linger.ms=5 batch.size=262144 | tail -n 1)"
  echo "  $line"
  read -r limit_rps limit_mbps <<<"$(echo "$line" |
    sed -n 's/.* records sent, \([0-9.]*\) records\/sec (\([0-9.]*\) MB\/sec).*/\1 \2/p')"
  kafka org.apache.kafka.tools.TopicCommand --bootstrap-server "$EOSMIRROR_TARGET_BOOTSTRAP" --delete \
    --topic "$topic" >/dev/null
}

# bench_wait_committed RECORDS PARTITIONS "PIDS" URL...: waits until the
# eosmirror processes PIDS (their metrics at URL...) have committed RECORDS
# records in total (eosmirror_records_replicated_total, counted when a
# transaction's commit returns); sets committed_at (date +%s.%N then) and
# middle (records/s between the 10% and 90% marks). Returns 1 if one of
# PIDS exits first. A reader on the target sharing the 2 cores could not
# count as fast as eosmirror commits: at 100 partitions it counted the last
# of 2M records 5 s after eosmirror's log showed it committed. Scrapes are
# 0.1 s apart, 0.5 s at 5,000 partitions (whose metrics are large).
bench_wait_committed() {
  local records="$1" partitions="$2" pids="$3" poll t10="" t90="" n=0 pid url
  shift 3
  poll=$(echo "x = $partitions / 10000; if (x < 0.1) x = 0.1; x" | bc -l)
  while :; do
    for pid in $pids; do kill -0 "$pid" 2>/dev/null || return 1; done
    n=0
    for url in "$@"; do
      n=$((n + $( (curl -s "$url" || true) |
        awk '/^eosmirror_records_replicated_total/ { s += $NF } END { printf "%d", s }')))
    done
    if [[ -z "$t10" ]] && ((n >= records / 10)); then t10=$(date +%s.%N); fi
    if [[ -z "$t90" ]] && ((n >= records - records / 10)); then t90=$(date +%s.%N); fi
    if ((n >= records)); then break; fi
    sleep "$poll"
  done
  committed_at=$(date +%s.%N)
  middle=$(echo "d = $t90 - $t10; if (d < 0.001) d = 0.001; ($records - 2 * ($records / 10)) / d" | bc -l)
}

bench_cpu_seconds() {
  local utime stime
  read -r utime stime <<<"$(awk '{print $14, $15}' "/proc/$1/stat")"
  echo "($utime + $stime) / $(getconf CLK_TCK)" | bc -l
}

bench_check_copy() {
  local status=0
  "$bin/eosmirror-chaos" compare --source "$EOSMIRROR_SOURCE_BOOTSTRAP" --target "$EOSMIRROR_TARGET_BOOTSTRAP" \
    --topic "$1" --target-topic "$2" >"$3" || status=1
  sed 's/^/  /' "$3" | head -n 4
  return "$status"
}

bench_finish() {
  if ((bench_started_clusters)); then
    "$cluster" down >/dev/null
  elif [[ -n "$bench_topics" && -n "${EOSMIRROR_SOURCE_BOOTSTRAP:-}" ]]; then
    local b
    for b in "$EOSMIRROR_SOURCE_BOOTSTRAP" "$EOSMIRROR_TARGET_BOOTSTRAP"; do
      kafka org.apache.kafka.tools.TopicCommand --bootstrap-server "$b" --delete \
        --topic "$bench_topics" --if-exists >/dev/null 2>&1 || true
    done
  fi
  rm -rf "$work"
}
