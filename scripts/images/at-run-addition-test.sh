#!/usr/bin/env bash
# at-run-addition-test: a tiny addition artifact for tests. Additions are never started; a runner copies their
# fixed /at-run/addition directory into a volume mounted read-only at /opt/at-run/additions/<n>.
#   /at-run/addition/hello.txt   "hello from an addition\n"
# Prints localhost:<port>/at-run-addition-test@sha256:… last on stdout.
set -euo pipefail
IMAGE_NAME=at-run-addition-test
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../../runtimes/build/image-lib.sh
source "$HERE/../../runtimes/build/image-lib.sh"

image_preflight
image_staging
mkdir -p "$STAGING/at-run/addition"
printf 'hello from an addition\n' > "$STAGING/at-run/addition/hello.txt"
chmod 0755 "$STAGING/at-run" "$STAGING/at-run/addition" && chmod 0644 "$STAGING/at-run/addition/hello.txt"
touch -d @0 "$STAGING/at-run/addition/hello.txt"

image_publish "${BASH_SOURCE[0]}" \
  'LABEL dev.mainasara.at-run.role=addition' \
  'LABEL dev.mainasara.at-run.export=/at-run/addition'
