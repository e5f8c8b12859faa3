#!/usr/bin/env bash
# Starts Debian's PostgreSQL cluster for the test suite and prepares the `siwa` role and the
# `siwa_test` database. Idempotent: safe to run again while the cluster is already up.
# Installs nothing (CI installs the `postgresql` package); must run as root.
# Prints the line to eval: export SIWA_TEST_POSTGRES_URL=...
set -euo pipefail

log() { echo "postgres.sh: $*" >&2; }

if [ ! -d /usr/lib/postgresql ]; then
    log "PostgreSQL is not installed (apt-get install postgresql)"
    exit 1
fi
# The highest installed major version, e.g. 15 on Debian 12.
version="$(ls /usr/lib/postgresql | sort -n | tail -n 1)"
cluster=main
port=5432

if ! pg_lsclusters -h 2>/dev/null | awk '{print $1" "$2}' | grep -qx "$version $cluster"; then
    log "creating cluster $version/$cluster"
    pg_createcluster "$version" "$cluster" --port="$port" >&2
fi

status="$(pg_lsclusters -h | awk -v v="$version" -v c="$cluster" '$1==v && $2==c {print $4}')"
if [ "$status" != "online" ]; then
    log "starting cluster $version/$cluster"
    pg_ctlcluster "$version" "$cluster" start >&2
fi

# The cluster's real port (a pre-existing cluster may not be on 5432).
port="$(pg_lsclusters -h | awk -v v="$version" -v c="$cluster" '$1==v && $2==c {print $3}')"

for _ in $(seq 1 60); do
    if pg_isready -q -h 127.0.0.1 -p "$port"; then break; fi
    sleep 0.5
done
if ! pg_isready -q -h 127.0.0.1 -p "$port"; then
    log "cluster $version/$cluster did not become ready on port $port"
    exit 1
fi

psql_admin() { runuser -u postgres -- psql -p "$port" -v ON_ERROR_STOP=1 -qtA "$@"; }

# The test suites run many cases in parallel, each with its own small pool: the default of 100
# connections is not enough. Raising it needs a restart, done once.
if [ "$(psql_admin -c "SHOW max_connections")" -lt 500 ]; then
    log "raising max_connections to 500"
    psql_admin -c "ALTER SYSTEM SET max_connections = 500" >/dev/null
    pg_ctlcluster "$version" "$cluster" restart >&2
    for _ in $(seq 1 60); do
        if pg_isready -q -h 127.0.0.1 -p "$port"; then break; fi
        sleep 0.5
    done
fi

if [ "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname = 'siwa'")" != "1" ]; then
    log "creating role siwa"
    psql_admin -c "CREATE ROLE siwa LOGIN PASSWORD 'siwa'"
fi
# Tests that reach the database only through DATABASE_URL (the built binary) each create a database of
# their own (Tests/SIWATestSupport/PrivatePostgresDatabase.swift) and drop it.
if [ "$(psql_admin -c "SELECT rolcreatedb FROM pg_roles WHERE rolname = 'siwa'")" != "t" ]; then
    log "letting role siwa create databases"
    psql_admin -c "ALTER ROLE siwa CREATEDB"
fi
if [ "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname = 'siwa_test'")" != "1" ]; then
    log "creating database siwa_test"
    psql_admin -c "CREATE DATABASE siwa_test OWNER siwa"
fi

echo "export SIWA_TEST_POSTGRES_URL=postgres://siwa:siwa@127.0.0.1:${port}/siwa_test"
