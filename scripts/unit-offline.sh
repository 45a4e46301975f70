#!/usr/bin/env bash
# The unit tier with every real part out of reach: a private network namespace (loopback only: no registry, no
# PostgreSQL, no internet) and a private mount namespace in which the Docker socket is /dev/null (a connection to
# it fails as with dockerd stopped). Nothing outside this process tree changes: dockerd keeps running for everyone
# else. A unit test that needs Docker, the network or another part fails here. Needs root (unshare), as CI has.
# Usage: bash scripts/unit-offline.sh [vitest args…]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec unshare --mount --net bash -c '
  set -euo pipefail
  ip link set lo up
  mount --make-rprivate /
  for sock in /run/docker.sock /var/run/docker.sock; do
    if [ -S "$sock" ]; then mount --bind /dev/null "$sock"; fi
  done
  export DOCKER_HOST=unix:///nonexistent/docker.sock
  # Proof the parts are out of reach before the tier runs (each must fail).
  if node -e "require(\"node:net\").connect(\"/var/run/docker.sock\").on(\"connect\", () => process.exit(0)).on(\"error\", () => process.exit(1))"; then
    echo "unit-offline: the Docker socket still answers" >&2; exit 1
  fi
  if node -e "require(\"node:net\").connect(5000, \"127.0.0.1\").on(\"connect\", () => process.exit(0)).on(\"error\", () => process.exit(1))"; then
    echo "unit-offline: the registry still answers" >&2; exit 1
  fi
  echo "unit-offline: Docker socket, registry and network out of reach; running the unit tier"
  exec npx vitest run --project unit "$@"
' unit-offline "$@"
