# syntax=docker/dockerfile:1
# genjobs and its fal simulator in a slim image. Build: docker build -t genjobs .
# The dependencies are compiled in a layer of their own (cargo-chef), so that a change to the
# project's code rebuilds only the project.

FROM rust:1.89-bookworm AS chef
RUN cargo install cargo-chef --locked
WORKDIR /src

FROM chef AS planner
COPY . .
RUN cargo chef prepare --recipe-path recipe.json

FROM chef AS build
COPY --from=planner /src/recipe.json recipe.json
RUN cargo chef cook --release --locked --recipe-path recipe.json
COPY . .
RUN cargo build --release --locked -p genjobs -p genjobs-upstream-sim

# No libpq and no OpenSSL are needed: Postgres is reached with tokio-postgres, HTTPS with rustls.
FROM debian:bookworm-slim AS runtime
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --no-create-home genjobs
COPY --from=build /src/target/release/genjobs /src/target/release/genjobs-upstream-sim /usr/local/bin/
USER genjobs
ENV GENJOBS_BIND=0.0.0.0:8080 \
    GENJOBS_LOG_FORMAT=json
EXPOSE 8080
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
    CMD curl -fsS http://127.0.0.1:8080/healthz || exit 1
ENTRYPOINT ["genjobs"]
