#!/usr/bin/env bash
# PostgreSQL for the cluster store and its tests: Debian's postgresql (15), one server on loopback with a
# `runlog` role and database, data under $STATE_DIR/postgres. Idempotent like the dockerd step: installs when the
# binaries are missing, initialises once, starts the server when nothing answers, creates the role and database
# when they are missing. Prints nothing on stdout; writes RUNLOG_PG_URL into $STATE_DIR/env (by setup.sh).
set -euo pipefail
STATE_DIR="${RUNLOG_SETUP_DIR:-/var/lib/runlog-setup}"
PG_PORT="${RUNLOG_PG_PORT:-5432}"
PG_DATA="$STATE_DIR/postgres/data"
PG_LOG="$STATE_DIR/postgres/server.log"
log() { printf '[setup-postgres] %s\n' "$*" >&2; }
die() { printf '[setup-postgres] error: %s\n' "$*" >&2; exit 1; }

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
if [ -z "$(pg_bin)" ] || [ ! -x "$(pg_bin)/pg_ctl" ]; then
  log "installing postgresql"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  # policy-rc.d keeps the package from starting Debian's own cluster (we run ours, on our data directory).
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  rm -f /usr/sbin/policy-rc.d
fi
BIN="$(pg_bin)"
as_pg() { runuser -u postgres -- "$@"; }
answers() { "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" 2>/dev/null; }

if ! answers; then
  mkdir -p "$STATE_DIR/postgres"
  chown postgres:postgres "$STATE_DIR/postgres"
  if [ ! -f "$PG_DATA/PG_VERSION" ]; then
    log "initialising a cluster at $PG_DATA"
    as_pg "$BIN/initdb" -D "$PG_DATA" -U postgres --auth-local=peer --auth-host=scram-sha-256 -E UTF8 >/dev/null
  fi
  # A server killed with -9 leaves postmaster.pid behind; pg_ctl refuses to start only while its pid lives.
  log "starting postgres on 127.0.0.1:$PG_PORT (log: $PG_LOG)"
  as_pg "$BIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -c port=$PG_PORT -c unix_socket_directories=/tmp -c synchronous_commit=on -c fsync=on -c max_connections=200" \
    start >/dev/null || { tail -20 "$PG_LOG" >&2; die "postgres did not start"; }
  answers || die "postgres did not answer on 127.0.0.1:$PG_PORT"
fi

psql_pg() { as_pg psql -X -q -h /tmp -p "$PG_PORT" -d postgres -v ON_ERROR_STOP=1 "$@"; }
if [ "$(psql_pg -tAc "SELECT 1 FROM pg_roles WHERE rolname='runlog'")" != 1 ]; then
  log "creating role runlog"
  psql_pg -c "CREATE ROLE runlog LOGIN CREATEDB PASSWORD 'runlog'"
fi
if [ "$(psql_pg -tAc "SELECT 1 FROM pg_database WHERE datname='runlog'")" != 1 ]; then
  log "creating database runlog"
  psql_pg -c "CREATE DATABASE runlog OWNER runlog"
fi
log "postgres: postgres://runlog@127.0.0.1:$PG_PORT/runlog"
