#!/usr/bin/env bash
# npm test: typecheck, lint, the public API report, the unit and e2e tiers, then the int tier in two lanes at once.
#
# The int tier's files run one at a time within a lane, because they share one Docker daemon and 2 cores. The
# cluster's files (several nodes on one PostgreSQL log: test/int/cluster/, project `int-cluster`) wait mostly on
# lease TTLs and the database, and touch Docker lightly, so their lane runs beside the other lane (`int`, the
# PostgreSQL store's files among it, which keeps the two lanes about as long): each file keeps its own home,
# labels, schemas and throwaway postmaster, and nothing in either lane restarts dockerd or the shared PostgreSQL. The e2e tier (a Docker Engine restart among it) runs alone, before them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

npx tsc --noEmit
npx eslint .
# Prettier formats the code (.prettierrc.json, .prettierignore); `npm run format` rewrites what differs.
npx prettier --check . >/dev/null || { npx prettier --list-different . >&2; echo "npm test: the files above are not formatted: run npm run format" >&2; exit 1; }
# The public surface (etc/runlog.api.md, API Extractor): a change to it fails here until the report is
# regenerated with `npm run api:report` and committed, so every change to the API is a reviewed diff.
npm run --silent api:check || { echo "npm test: the public API differs from etc/runlog.api.md: run npm run api:report, review the diff, commit it" >&2; exit 1; }
# The generated reference (docs/reference/): the unit tier compares the pages rendered in memory; this compares them
# all, the library API's included, which TypeDoc renders from src/index.ts's TSDoc (too slow for the unit tier).
npx tsx scripts/docs.ts --check
npx vitest run --project unit --project e2e

status_file="$(mktemp)"
cluster_lane=""
cleanup() {
  [ -n "$cluster_lane" ] && kill "$cluster_lane" 2>/dev/null || true
  rm -f "$status_file"
}
trap cleanup EXIT
# The cluster lane in the background, its lines prefixed so both lanes read apart in one log.
(
  set +e
  npx vitest run --project int-cluster 2>&1 | sed -u 's/^/[int-cluster] /'
  echo "${PIPESTATUS[0]}" >"$status_file"
) &
cluster_lane=$!
int_status=0
npx vitest run --project int || int_status=$?
wait "$cluster_lane" || true
cluster_lane=""
cluster_status="$(cat "$status_file" 2>/dev/null || echo 1)"
[ -n "$cluster_status" ] || cluster_status=1
echo "int lanes: int lane exit $int_status, cluster lane exit $cluster_status"
[ "$int_status" = 0 ] && [ "$cluster_status" = 0 ]
