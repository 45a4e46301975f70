#!/usr/bin/env bash
# Builds runlog's images without any base-image registry: each scripts/images/<name>.sh assembles a rootfs
# tarball from host files or the Debian rootfs, imports it, and pushes it to the local registry.
# Each image script is idempotent (it skips work when its image is already in the registry with the
# same input hash) and prints the pushed digest reference on its last stdout line.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STATE_DIR="${RUNLOG_SETUP_DIR:-/var/lib/runlog-setup}"
mkdir -p "$STATE_DIR/images"
shopt -s nullglob
for script in "$HERE"/images/*.sh; do
  name="$(basename "$script" .sh)"
  ref="$(bash "$script" | tail -n 1)"
  [ -n "$ref" ] || { echo "[setup] error: image script $name printed no reference" >&2; exit 1; }
  printf '%s\n' "$ref" > "$STATE_DIR/images/$name.ref"
  echo "[setup] image $name: $ref" >&2
done
