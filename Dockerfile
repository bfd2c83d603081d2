# syntax=docker/dockerfile:1
# eosmirror's container image: the release binary on a slim glibc base, run
# as a non-root user.
#
#   docker build -t eosmirror .
#   docker run --rm eosmirror run --help
#
# Not built in this project's CI (its machines have no Docker engine); the
# tested path is tests/quickstart.

# Build stage. Vendored OpenSSL and librdkafka (see Cargo.toml) compile with
# gcc, make, perl and pkg-config. Debian bookworm here and below, so the
# binary meets the glibc it was linked against.
FROM rust:1-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc make perl pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# Cache mounts (BuildKit) keep downloaded crates and compiled dependencies
# between builds; the binary is copied out of the cached target dir.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p eosmirror --bin eosmirror \
 && cp target/release/eosmirror /usr/local/bin/eosmirror

# Runtime stage: the binary links only glibc (OpenSSL, librdkafka, zstd and
# zlib are static); ca-certificates for SASL_SSL/SSL clusters.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --create-home --home-dir /var/lib/eosmirror \
      --shell /usr/sbin/nologin eosmirror
COPY --from=build /usr/local/bin/eosmirror /usr/local/bin/eosmirror
USER eosmirror
WORKDIR /var/lib/eosmirror
# The state dir is a cache (rebuilt from the target); mount a volume at
# /var/lib/eosmirror to keep it across container restarts.
ENV EOSMIRROR_STATE_DIR=/var/lib/eosmirror/state
ENTRYPOINT ["/usr/local/bin/eosmirror"]
CMD ["--help"]
