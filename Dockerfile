# The agent in a container, for Kubernetes Jobs and CI runners: the binary, git (checkouts,
# diffs) and bubblewrap (the command sandbox), run as a non-root user.
#
#   docker build -t agent .
#   docker run --rm -e ANTHROPIC_API_KEY -v "$PWD:/work" agent -p "explain this repository"
#
# The sandbox needs unprivileged user namespaces: under Docker's default seccomp profile
# they work; where a cluster forbids them, see deploy/kubernetes/README.md.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p agent

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends git bubblewrap ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 agent
COPY --from=build /src/target/release/agent /usr/local/bin/agent
USER 10001
WORKDIR /work
ENTRYPOINT ["agent"]
