#!/usr/bin/env bash
# egress-proxy: the runner-owned proxy that is a network-granted execution's only way out (docs/decisions/0012).
# The pinned LTS Node.js and the proxy's TypeScript sources, which Node runs as they are (its built-in type
# stripping): no npm dependency, no shell, no package manager.
#   /usr/bin/node                         the pinned Node (scripts/install-node.sh --pinned)
#   /usr/lib/x86_64-linux-gnu             the loader and the libraries node links (glibc, libstdc++, libgcc_s)
#   /egress/src/adapters/egress/proxy/    the proxy (main.ts is the entry point)
#   /egress/src/domain/at-run/egress-*.ts the pure decision rules it imports
# It runs as 65533:65533. The build runs `main.ts --selftest` on the staged tree, so a source the proxy imports
# but the image lacks fails here, not at an execution's first request. Prints localhost:<port>/egress-proxy@sha256:…
# as its last stdout line.
set -euo pipefail
IMAGE_NAME=egress-proxy
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source=../../runtimes/build/image-lib.sh
source "$REPO/runtimes/build/image-lib.sh"

image_preflight
[ "$(uname -m)" = x86_64 ] || idie "this script assembles an amd64 userland; host is $(uname -m)"
NODE_VERSION="$(bash "$REPO/scripts/install-node.sh" --pinned)"
NODE_BIN="$(bash "$REPO/scripts/install-node.sh" --install "$NODE_VERSION")/bin/node"
[ -x "$NODE_BIN" ] || idie "no node binary at $NODE_BIN"
image_staging

MULTIARCH=/usr/lib/x86_64-linux-gnu
stage_lib() { # soname: from the host's multiarch directory, with what it links
  local src
  src="$(readlink -f "$MULTIARCH/$1")" || idie "shared library $1 not found"
  [ -e "$src" ] || idie "shared library $1 not found on the host"
  [ -e "$STAGING/usr/lib/x86_64-linux-gnu/$1" ] && return 0
  stage_file "$src" "usr/lib/x86_64-linux-gnu/$1" 0755
}
stage_lib ld-linux-x86-64.so.2
for lib in $(ldd "$NODE_BIN" | awk '/=>/ && $3 ~ /^\// {print $1}'); do stage_lib "$lib"; done
# Name lookups go through the proxy's own resolver (node:dns Resolver), never NSS; files only, for localhost.
stage_lib libnss_files.so.2

stage_file "$(readlink -f "$NODE_BIN")" usr/bin/node 0755
for f in "$REPO"/src/adapters/egress/proxy/*.ts "$REPO"/src/domain/at-run/egress-*.ts; do
  stage_file "$f" "egress/${f#"$REPO"/}" 0644
done
# Node treats .ts by the nearest package.json's type: ESM, as in the repository.
printf '{"type":"module","private":true}\n' > "$STAGING/egress/package.json"

cd "$STAGING"
mkdir -p usr/lib64 etc tmp proc sys dev run
ln -s ../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 usr/lib64/ld-linux-x86-64.so.2
ln -s usr/lib lib && ln -s usr/lib64 lib64 && ln -s usr/bin bin
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\negress:x:65533:65533:egress proxy:/tmp:/usr/sbin/nologin\n' > etc/passwd
printf 'root:x:0:\negress:x:65533:\n' > etc/group
printf 'passwd: files\ngroup: files\nhosts: files\n' > etc/nsswitch.conf
printf '/usr/lib/x86_64-linux-gnu\n' > etc/ld.so.conf
: > etc/hosts; : > etc/hostname; : > etc/resolv.conf
/sbin/ldconfig -r "$STAGING" -C /etc/ld.so.cache -f /etc/ld.so.conf 2>/dev/null || idie "ldconfig failed"
chmod 0644 etc/* && chmod 1777 tmp
cd - >/dev/null

# Every module the entry point imports is in the tree: run it, from the staged copy, with the pinned Node.
"$NODE_BIN" --disable-warning=ExperimentalWarning "$STAGING/egress/src/adapters/egress/proxy/main.ts" --selftest >&2 \
  || idie "the staged proxy does not run (main.ts --selftest failed): a source it imports is missing?"

image_publish "${BASH_SOURCE[0]}" \
  'USER 65533:65533' \
  'WORKDIR /tmp' \
  'ENTRYPOINT ["/usr/bin/node", "--disable-warning=ExperimentalWarning", "/egress/src/adapters/egress/proxy/main.ts"]' \
  'LABEL dev.mainasara.at-run.role=egress-proxy'
