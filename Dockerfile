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
#
# ENVHOST_FROM names where /envhost comes from: the `source` stage (the
# default), or an image that holds only a static envhost built outside
# Docker at /envhost. scripts/test-docker builds this file on a machine
# that can pull no image (so no Rust image either): it imports the binary
# scripts/build-static made as such an image and passes its name here;
# BuildKit then never looks at the `source` stage. Everything after that
# stage is built as shipped. (Build with BuildKit: the default since Docker
# 23, DOCKER_BUILDKIT=1 before. There is no `# syntax=` line, which would
# make BuildKit pull its Dockerfile frontend image first: every instruction
# here is in the frontend built into Docker 20.10 and later.)
ARG ENVHOST_FROM=source

FROM rust:1.95-bookworm AS source
# musl-gcc compiles the one C dependency (zstd, for the plugin code cache).
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/* \
 && rustup target add x86_64-unknown-linux-musl
WORKDIR /src
COPY . .
RUN cargo build --locked --release --target x86_64-unknown-linux-musl -p envhost \
 && strip -o /envhost target/x86_64-unknown-linux-musl/release/envhost

# The stage the final one copies from, chosen by ENVHOST_FROM.
FROM ${ENVHOST_FROM} AS binary

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
COPY --from=binary /envhost /usr/local/bin/envhost
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
