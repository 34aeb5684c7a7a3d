# syntax=docker/dockerfile:1
#
# envhost in a container: one session per container (or pod), the project
# mounted at /workspace, driven over the container's stdio
# (`docker run -i`, `kubectl attach`) or `docker exec -i` / `kubectl exec -i`.
# See docs/scale.md.
#
#   docker build -t envhost .
#   docker run -i --rm -v "$PWD:/workspace" envhost
#
# The build stage makes the static binary (scripts/build-static --release
# does the same outside Docker); the final image holds bash, python3 and
# that one file, and runs as an unprivileged user.

FROM rust:1.95-bookworm AS build
# musl-gcc compiles the one C dependency (zstd, for the plugin code cache).
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/* \
 && rustup target add x86_64-unknown-linux-musl
WORKDIR /src
COPY . .
RUN cargo build --locked --release --target x86_64-unknown-linux-musl -p envhost \
 && strip -o /envhost target/x86_64-unknown-linux-musl/release/envhost

FROM debian:bookworm-slim
# bash and python3 are the bash and python environments; git and
# ca-certificates are what agents reach for first (drop them for a smaller
# image).
RUN apt-get update \
 && apt-get install -y --no-install-recommends bash python3 git ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 1000 --shell /bin/bash agent \
 && mkdir /workspace \
 && chown agent:agent /workspace
COPY --from=build /envhost /usr/local/bin/envhost
# Numeric, so that Kubernetes' runAsNonRoot can verify it.
USER 1000:1000
WORKDIR /workspace
# Checks that this container can run a session: the project is usable and
# bash and python answer (docs/scale.md, "Health checks").
HEALTHCHECK --interval=30s --timeout=15s --start-period=5s --retries=3 \
    CMD ["envhost", "healthcheck", "--project", "/workspace"]
# envhost is PID 1: it reaps every orphan and ends everything on SIGTERM.
ENTRYPOINT ["envhost"]
CMD ["serve", "--project", "/workspace"]
