# A stand-in for the official postgres:15-bookworm image, built from
# Debian's packages on the local debian:bookworm-slim, for tests/container/run
# (no image registry is reachable there). It honours what docker-compose.yml
# uses of the official image: POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB,
# the data directory /var/lib/postgresql/data and pg_isready on PATH.
FROM debian:bookworm-slim
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends postgresql-common; \
    sed -ri 's/^#?\s*(create_main_cluster)\s*=.*/\1 = false/' /etc/postgresql-common/createcluster.conf; \
    apt-get install -y --no-install-recommends postgresql-15; \
    rm -rf /var/lib/apt/lists/*; \
    install -d -o postgres -g postgres -m 0700 /var/lib/postgresql/data; \
    install -d -o postgres -g postgres -m 2775 /var/run/postgresql
COPY postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint
ENV PATH=/usr/lib/postgresql/15/bin:$PATH \
    PGDATA=/var/lib/postgresql/data
VOLUME ["/var/lib/postgresql/data"]
EXPOSE 5432
# SIGINT is PostgreSQL's fast shutdown; SIGTERM's smart shutdown waits for
# the instances' connections to close, past podman stop's timeout.
STOPSIGNAL SIGINT
USER postgres
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint"]
