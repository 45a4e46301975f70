#!/usr/bin/env bash
# runtime-python: a public at-run runtime artifact (never started by a runner). Its only content is the fixed
# export directory /at-run/runtime, copied out of a stopped container into a runtime volume:
#   /at-run/runtime/bin/python3          Debian's python3.11 (links glibc, libm, libz, libexpat: the
#                                        at-run-sandbox image provides those)
#   /at-run/runtime/lib/python3.11       its standard library (no test suite, no build config), compiled to
#                                        unchecked-hash bytecode (valid whatever mtimes the copy gets)
#   /at-run/runtime/adapter/worker.py    the worker protocol v1 language adapter (runtimes/python/adapter)
# Python finds its prefix from the binary's location, so the tree is relocatable to /opt/at-run/runtime and is
# run with `-I -B` (isolated, never writes bytecode). Prints localhost:<port>/runtime-python@sha256:… last.
set -euo pipefail
IMAGE_NAME=runtime-python
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source=../../runtimes/build/image-lib.sh
source "$REPO/runtimes/build/image-lib.sh"

image_preflight
PY_BIN="${RUNLOG_PYTHON_BIN:-/usr/bin/python3.11}"
PY_LIB="${RUNLOG_PYTHON_LIB:-/usr/lib/python3.11}"
[ -x "$PY_BIN" ] && [ -f "$PY_LIB/os.py" ] || idie "python3.11 not installed (apt-get install python3.11-minimal libpython3.11-stdlib, or run \`npm run setup\`)"
image_staging

stage_file "$(readlink -f "$PY_BIN")" at-run/runtime/bin/python3 0755
mkdir -p "$STAGING/at-run/runtime/lib"
# Copy the stdlib keeping mtimes (bytecode validity) but not ownership; leave out what a sandboxed worker never
# uses and what would not be relocatable (sitecustomize.py is an absolute link into /etc).
tar -C "$(dirname "$PY_LIB")" \
  --exclude='python3.11/test' --exclude='python3.11/config-3.11-*' --exclude='python3.11/ensurepip' \
  --exclude='python3.11/idlelib' --exclude='python3.11/tkinter' --exclude='python3.11/turtledemo' \
  --exclude='python3.11/lib2to3' --exclude='python3.11/sitecustomize.py' --exclude='python3.11/EXTERNALLY-MANAGED' \
  --exclude='python3.11/site-packages' --exclude='python3.11/dist-packages' \
  -cf - python3.11 | tar -C "$STAGING/at-run/runtime/lib" --no-same-owner -xf -
# Only relative links that stay inside the tree may remain.
while IFS= read -r link; do
  target="$(readlink "$link")"
  case "$target" in /*|*..*) ilog "dropping non-relocatable link ${link#"$STAGING"/} -> $target"; rm -f "$link" ;; esac
done < <(find "$STAGING" -type l)
# Bytecode that never looks at source mtimes: runlog's archive re-serialization sets every mtime to 0, which
# would make timestamp-checked .pyc files stale (recompiled in memory on every start, since -B never writes).
find "$STAGING/at-run/runtime/lib" -name '__pycache__' -type d -prune -exec rm -rf {} +
"$PY_BIN" -I -m compileall -q -f -j 0 --invalidation-mode unchecked-hash \
  -s "$STAGING/at-run/runtime" -p /opt/at-run/runtime "$STAGING/at-run/runtime/lib/python3.11" >/dev/null \
  || idie "compileall failed"
stage_file "$REPO/runtimes/python/adapter/worker.py" at-run/runtime/adapter/worker.py 0644
find "$STAGING" -type d -exec chmod 0755 {} +
find "$STAGING" -type f -perm /111 -exec chmod 0755 {} + -o -type f -exec chmod 0644 {} +
ilog "$("$PY_BIN" --version 2>&1)"

image_publish "${BASH_SOURCE[0]}" \
  'LABEL dev.mainasara.at-run.role=runtime' \
  'LABEL dev.mainasara.at-run.export=/at-run/runtime'
