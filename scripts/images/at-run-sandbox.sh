#!/usr/bin/env bash
# at-run-sandbox: the runner-owned image every at-run execution runs in (operator-owned, never chosen by a
# record). A minimal glibc userland and nothing else: no shell, no package manager, no setuid binaries.
#   /usr/lib/x86_64-linux-gnu   loader, libc and the shared libraries language runtimes commonly link
#   /etc/passwd, /etc/group     root and the unprivileged `atrun` user (65532:65532) the sandbox runs as
#   /opt/at-run/{runtime,app,additions}   mount points for the read-only runtime, code and addition volumes
#   /opt/at-run/work            mount point of the per-execution writable tmpfs; /tmp links there
# The image has no ENTRYPOINT/CMD: the runner computes the command from the runtime record's launcher
# (/opt/at-run/runtime/<launcher> <args, {entrypoint} -> /opt/at-run/app/<entrypoint>>), never via a shell.
# Prints localhost:<port>/at-run-sandbox@sha256:… as its last stdout line.
set -euo pipefail
IMAGE_NAME=at-run-sandbox
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../../runtimes/build/image-lib.sh
source "$HERE/../../runtimes/build/image-lib.sh"

image_preflight
[ "$(uname -m)" = x86_64 ] || idie "this script assembles an amd64 userland; host is $(uname -m)"
image_staging

MULTIARCH=/usr/lib/x86_64-linux-gnu
# Shared objects by SONAME. glibc first (they must come from one glibc build), then the usual runtime deps.
SONAMES=(
  ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libresolv.so.2 libutil.so.1
  libanl.so.1 libnss_files.so.2
  libstdc++.so.6 libgcc_s.so.1 libz.so.1 libexpat.so.1 libffi.so.8 libbz2.so.1.0 liblzma.so.5
  libuuid.so.1 libcrypt.so.1 libsqlite3.so.0 libssl.so.3 libcrypto.so.3
)

find_lib() { # soname -> path on the host (or in the Debian rootfs)
  local d
  for d in "$MULTIARCH" /lib/x86_64-linux-gnu "${ROOTFS_DIR:-/var/lib/runlog-setup/rootfs/debian-bookworm}$MULTIARCH"; do
    [ -e "$d/$1" ] && { printf '%s\n' "$d/$1"; return 0; }
  done
  return 1
}

declare -A staged=()
stage_lib() {
  local soname="$1" src dep
  [ -n "${staged[$soname]:-}" ] && return 0
  src="$(find_lib "$soname")" || idie "shared library $soname not found on the host (install its Debian package)"
  stage_file "$src" "usr/lib/x86_64-linux-gnu/$soname" 0755
  staged[$soname]=1
  # Pull in whatever it links to, so the set is closed.
  while read -r dep; do stage_lib "$dep"; done < <(ldd "$src" 2>/dev/null | awk '/=>/ && $3 ~ /^\// {print $1}')
}
for so in "${SONAMES[@]}"; do stage_lib "$so"; done

cd "$STAGING"
mkdir -p usr/bin usr/sbin usr/lib64 etc opt/at-run/runtime opt/at-run/app opt/at-run/additions opt/at-run/work \
  proc sys dev run var
ln -s ../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 usr/lib64/ld-linux-x86-64.so.2
ln -s usr/lib lib && ln -s usr/lib64 lib64 && ln -s usr/bin bin && ln -s usr/sbin sbin
ln -s /opt/at-run/work tmp
ln -s /opt/at-run/work var/tmp
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\natrun:x:65532:65532:at-run sandbox:/opt/at-run/work:/usr/sbin/nologin\n' > etc/passwd
printf 'root:x:0:\natrun:x:65532:\n' > etc/group
printf 'passwd: files\ngroup: files\nhosts: files\n' > etc/nsswitch.conf
printf '/usr/lib/x86_64-linux-gnu\n' > etc/ld.so.conf
: > etc/hosts; : > etc/hostname; : > etc/resolv.conf
/sbin/ldconfig -r "$STAGING" -C /etc/ld.so.cache -f /etc/ld.so.conf 2>/dev/null || idie "ldconfig failed"
chmod 0644 etc/* && chmod 0755 opt/at-run opt/at-run/*
cd - >/dev/null

image_publish "${BASH_SOURCE[0]}" \
  'USER 65532:65532' \
  'WORKDIR /opt/at-run/work' \
  'LABEL dev.mainasara.at-run.role=sandbox'
