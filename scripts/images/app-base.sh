#!/usr/bin/env bash
# Builds `app-base`, the base image of ContainerRunner app instances, without any base-image registry:
#   the cached Debian bookworm minbase rootfs (the same tree ProotRunner uses as --rootfs)
#   + the host's `node` binary at /usr/local/bin/node (the rootfs already has every library node links:
#     libc, libm, libdl, libpthread, libstdc++, libgcc_s).
# The tarball is imported (`docker import`), tagged `in-<input hash>`, pushed to the local registry, and the
# pushed reference `localhost:<port>/app-base@sha256:…` is printed as the LAST stdout line (everything else
# goes to stderr). PRoot leaves empty placeholders for its bind targets in the shared rootfs (/aura, /data,
# /workspace, /usr/local/bin/node): they are neither hashed nor imported. Idempotent: when the registry already holds the tag for the same inputs (this script, the
# node binary, the rootfs listing), nothing is built and the existing digest is printed.
set -euo pipefail
STATE_DIR="${RUNLOG_SETUP_DIR:-/var/lib/runlog-setup}"
REGISTRY_ADDR="${RUNLOG_REGISTRY_ADDR:-127.0.0.1:5000}"
ROOTFS="${ROOTFS_DIR:-${RUNLOG_ROOTFS:-$STATE_DIR/rootfs/debian-bookworm}}"
NODE_BIN="$(readlink -f "${RUNLOG_NODE_BIN:-$(command -v node)}")"
NAME=app-base
REPO="localhost:${REGISTRY_ADDR##*:}/$NAME"

log() { printf '[image %s] %s\n' "$NAME" "$*" >&2; }
die() { printf '[image %s] error: %s\n' "$NAME" "$*" >&2; exit 1; }

[ -f "$ROOTFS/.runlog-complete" ] || die "no Debian rootfs at $ROOTFS: run 'npm run setup'"
[ -x "$NODE_BIN" ] || die "no node binary found on the host"

hash="$( {
  sha256sum < "${BASH_SOURCE[0]}"
  sha256sum < "$NODE_BIN"
  (cd "$ROOTFS" && find . -xdev \( -path ./aura -o -path ./data -o -path ./workspace -o -path ./usr/local/bin/node \) -prune -o -printf '%P\t%s\t%T@\t%m\t%l\n' | LC_ALL=C sort | sha256sum)
} | sha256sum | cut -c1-16)"
tag="in-$hash"

digest_of_tag() {
  curl -sf -o /dev/null -D - \
    -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
    "http://$REGISTRY_ADDR/v2/$NAME/manifests/$1" 2>/dev/null \
    | tr -d '\r' | awk -F': ' 'tolower($1)=="docker-content-digest"{print $2}'
}

digest="$(digest_of_tag "$tag" || true)"
if [ -n "$digest" ]; then
  log "up to date ($tag)"
  echo "$REPO@$digest"
  exit 0
fi

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/add/usr/local/bin"
cp "$NODE_BIN" "$stage/add/usr/local/bin/node"

log "importing $ROOTFS + $NODE_BIN as $REPO:$tag"
# Two steps: the rootfs (without PRoot's placeholders), then node appended, so the excludes never drop it.
tar --numeric-owner -cf "$stage/image.tar" \
    -C "$ROOTFS" \
    --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' --exclude='./.runlog-complete' \
    --exclude='./var/cache/apt/archives/*.deb' --exclude='./var/lib/apt/lists/*' \
    --exclude='./aura' --exclude='./data' --exclude='./workspace' --exclude='./usr/local/bin/node' \
    .
tar --numeric-owner -rf "$stage/image.tar" -C "$stage/add" ./usr/local/bin/node
docker import --change "LABEL runlog.image=$NAME" --change "LABEL runlog.inputs=$hash" "$stage/image.tar" "$REPO:$tag" >&2

log "pushing $REPO:$tag"
docker push -q "$REPO:$tag" >&2
ref="$(docker image inspect --format '{{range .RepoDigests}}{{println .}}{{end}}' "$REPO:$tag" | grep -m1 "^$REPO@sha256:" || true)"
[ -n "$ref" ] || die "push of $REPO:$tag gave no digest"
echo "$ref"
