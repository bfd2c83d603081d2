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

kafka() { java -Xmx512m -cp "$EOSMIRROR_KAFKA_LIB/*" -Dlog4j2.configurationFile="$work/tools-log4j2.properties" "$@"; }

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
