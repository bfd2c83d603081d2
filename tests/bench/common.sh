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
#   bench_load TOPIC RECORDS SIZE PARTITIONS
#                                      creates TOPIC on the source and fills every
#                                      partition evenly (BlockPartitioner.java)
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
}

kafka() { java -Xmx512m -cp "$EOSMIRROR_KAFKA_LIB/*:$work/classes" -Dlog4j2.configurationFile="$work/tools-log4j2.properties" "$@"; }

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
  kafka org.apache.kafka.tools.TopicCommand --bootstrap-server "$EOSMIRROR_SOURCE_BOOTSTRAP" --create \
    --topic "$topic" --partitions "$partitions" >/dev/null
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
