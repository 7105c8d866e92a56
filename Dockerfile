# skilld's container image: the server, the bundled skills and what they
# need to run (python3, bash, procps), as a non-root user.
#
# Build it from source (compiles in the official Rust image):
#
#   docker build -t skilld .
#
# or around a binary built outside, here or in CI (the Rust stage is then
# never fetched; the binary must be built for Debian bookworm's glibc):
#
#   cargo build --release --locked
#   docker build -t skilld --target runtime-prebuilt \
#       --build-context skilld-bin=target/release .
#
# (podman build takes the same arguments; give it --format docker, or the
# OCI format drops the HEALTHCHECK.)
#
# Run it:
#
#   docker run -d --name skilld -p 127.0.0.1:8080:8080 -v skilld-data:/data \
#       -e SKILLD_TOKENS="agent:invoke:$(openssl rand -hex 24),admin:admin:$(openssl rand -hex 24)" \
#       skilld
#
# The server listens on 0.0.0.0:8080 so that a published port reaches it,
# and skilld refuses a non-loopback address without tokens: started
# without SKILLD_TOKENS (or a config file with [[tokens]]) the container
# exits at once with "refusing to listen on 0.0.0.0:8080 without tokens".
# That is on purpose: anyone who reaches the port could otherwise run
# tools. Only on a network you trust completely, pass -e SKILLD_INSECURE=true
# to serve without tokens.
#
# Every setting is an environment variable (see README.md): the image sets
# SKILLD_BIND, SKILLD_DATA_DIR (/data, a volume: the SQLite run log unless
# SKILLD_DATABASE_URL names PostgreSQL; a directory mounted there must be
# writable by uid 10001), SKILLD_WORKSPACE (/workspace, the
# tools' working directory: mount a project there) and SKILLD_SKILLS (the
# bundled skills; to add your own, mount them and set e.g.
# SKILLD_SKILLS=bundled=/usr/local/share/skilld/skills,user=/skills).
# The git skill's tools need git, which the image leaves out to stay small:
# add it with --build-arg EXTRA_PACKAGES=git.

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin skilld \
    && install -D -m 0755 target/release/skilld /out/skilld

# Everything but the binary; the two stages after it add the binary from
# one source or the other.
FROM debian:bookworm-slim AS runtime-base
ARG EXTRA_PACKAGES=""
# tini is PID 1: it forwards signals to skilld and reaps any process a tool
# leaves behind.
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends bash python3 procps tini ${EXTRA_PACKAGES}; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/*; \
    useradd --uid 10001 --user-group --create-home --home-dir /home/skilld \
        --shell /usr/sbin/nologin skilld; \
    install -d -o skilld -g skilld -m 0750 /data /workspace; \
    install -d -o skilld -g skilld -m 0711 /scratch
COPY skills/ /usr/local/share/skilld/skills/

# NO_COLOR: the logs (stderr) go to a log driver, not a terminal.
ENV SKILLD_BIND=0.0.0.0:8080 \
    SKILLD_DATA_DIR=/data \
    SKILLD_WORKSPACE=/workspace \
    SKILLD_SCRATCH_DIR=/scratch \
    SKILLD_SKILLS=bundled=/usr/local/share/skilld/skills \
    NO_COLOR=1
VOLUME ["/data"]
WORKDIR /workspace
EXPOSE 8080
# Numeric, so that runAsNonRoot-style checks can tell it is not root.
USER 10001:10001

# Ready means the run log answers and the skills are loaded (GET /readyz).
# python3 is in the image for the skills anyway, so the check costs no curl;
# it asks the port SKILLD_BIND names.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python3", "-I", "-c", "import os, urllib.request; host, _, port = os.environ.get('SKILLD_BIND', '0.0.0.0:8080').rpartition(':'); host = {'0.0.0.0': '127.0.0.1', '[::]': '[::1]', '': '127.0.0.1'}.get(host, host); urllib.request.urlopen(f'http://{host}:{port}/readyz', timeout=4)"]

ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/skilld"]
CMD ["serve"]

# `--target runtime-prebuilt`: the binary comes from the build context named
# skilld-bin (a directory holding `skilld`), and the Rust stage is skipped.
FROM runtime-base AS runtime-prebuilt
COPY --from=skilld-bin skilld /usr/local/bin/skilld

# The default target: the binary compiled in the build stage.
FROM runtime-base AS runtime
COPY --from=build /out/skilld /usr/local/bin/skilld
