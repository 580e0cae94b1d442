# The xjob admin (`xjob serve`), built from the repository root:
#   docker build -f deploy/docker/admin.Dockerfile \
#     --build-arg XJOB_GIT_SHA="$(git rev-parse --short HEAD)" -t xjob-admin:0.1.0 .
# XJOB_GIT_SHA names the commit in the admin's `xjob_build_info` metric (`unknown` when unset).
# Stage 1 compiles in the Rust image; stage 2 is a slim Debian with the two binaries only,
# run as an unprivileged user. protoc comes vendored with the build, nothing else is needed.

FROM rust:1.90-bookworm AS build
# A build argument is in the environment of the RUN below: option_env!("XJOB_GIT_SHA") reads it.
ARG XJOB_GIT_SHA=unknown
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p xjob-admin --bin xjob -p xjob-sidecar --bin xjob-probe \
    && install -m 0755 target/release/xjob target/release/xjob-probe /usr/local/bin/

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/xjob --create-home xjob
COPY --from=build /usr/local/bin/xjob /usr/local/bin/xjob-probe /usr/local/bin/
USER 10001:10001
WORKDIR /var/lib/xjob
# Listen on every interface inside the container; SQLite (when no XJOB_DATABASE_URL is given)
# lives in the data dir, which should be a volume. No transparent huge pages for the admin's
# allocator even where the host's kernel hands them out unasked: with them the admin held a third to
# 60 % more memory (docs/operations.md, *Memory and huge pages*).
ENV XJOB_LISTEN=0.0.0.0:8080 \
    XJOB_DATA_DIR=/var/lib/xjob \
    MIMALLOC_ALLOW_THP=0
EXPOSE 8080
# gRPC health: NOT_SERVING while the database is unreachable.
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
    CMD ["xjob-probe", "http://127.0.0.1:8080", "xjob.v1.JobAdmin"]
ENTRYPOINT ["xjob"]
CMD ["serve"]
