# xjob-executor, the ready-made executor to run next to an app, built from the repository root:
#   docker build -f deploy/docker/executor.Dockerfile \
#     --build-arg XJOB_GIT_SHA="$(git rev-parse --short HEAD)" -t xjob-executor:0.1.0 .
# XJOB_GIT_SHA names the commit in the executor's `xjob_executor_build_info` metric.
# Stage 1 compiles; stage 2 is a slim Debian (bash included, for shell glue jobs) with the
# binaries, the example config, and an unprivileged user. Script languages other than shell
# need their interpreter in the image: derive from this one and apt-get install python3,
# nodejs or php-cli, then enable them in [glue].

FROM rust:1.90-bookworm AS build
# A build argument is in the environment of the RUN below: option_env!("XJOB_GIT_SHA") reads it.
ARG XJOB_GIT_SHA=unknown
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p xjob-sidecar --bin xjob-executor --bin xjob-probe \
    && install -m 0755 target/release/xjob-executor target/release/xjob-probe /usr/local/bin/

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/xjob-executor --create-home xjob
COPY --from=build /usr/local/bin/xjob-executor /usr/local/bin/xjob-probe /usr/local/bin/
COPY deploy/sidecar/xjob-executor.toml /etc/xjob/xjob-executor.toml
USER 10001:10001
WORKDIR /var/lib/xjob-executor
ENV XJOB_CONFIG=/etc/xjob/xjob-executor.toml \
    XJOB_LOG_DIR=/var/lib/xjob-executor/logs
EXPOSE 9999
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
    CMD ["xjob-probe", "http://127.0.0.1:9999"]
ENTRYPOINT ["xjob-executor"]
