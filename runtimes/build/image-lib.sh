# Shared helpers for scripts/images/*.sh (sourced, not run). Images are assembled from host files into a
# staging directory, hashed, imported with `docker import` (no base-image registry) and pushed to the local
# registry. The tag is the input hash, so a script whose inputs did not change does nothing but print the
# digest reference the registry already holds. Logs go to stderr; the reference is the LAST stdout line.
set -euo pipefail

REGISTRY_ADDR="${RUNLOG_REGISTRY_ADDR:-127.0.0.1:5000}"
REGISTRY_PORT="${REGISTRY_ADDR##*:}"
# Docker trusts localhost:<port> as an insecure registry by default; 127.0.0.1 is the same listener.
PUSH_HOST="localhost:${REGISTRY_PORT}"
IMAGE_LIB_FILE="${BASH_SOURCE[0]}"

ilog() { printf '[image %s] %s\n' "${IMAGE_NAME:-?}" "$*" >&2; }
idie() { printf '[image %s] error: %s\n' "${IMAGE_NAME:-?}" "$*" >&2; exit 1; }

image_preflight() {
  command -v docker >/dev/null 2>&1 || idie "docker CLI missing: run \`npm run setup\`"
  curl -sf --unix-socket /var/run/docker.sock http://localhost/_ping >/dev/null 2>&1 \
    || idie "Docker Engine not answering on /var/run/docker.sock: run \`npm run setup\`"
  curl -sf "http://${REGISTRY_ADDR}/v2/" >/dev/null 2>&1 \
    || idie "registry not answering on ${REGISTRY_ADDR}: run \`npm run setup\`"
}

# Fresh staging directory, removed on exit.
image_staging() {
  STAGING="$(mktemp -d "${TMPDIR:-/tmp}/runlog-image-${IMAGE_NAME}.XXXXXX")"
  trap 'rm -rf "$STAGING"' EXIT
  chmod 0755 "$STAGING"
}

# Copies a file's bytes (following links) to <staging>/<dest> with the given mode.
stage_file() { # src dest mode
  install -D -m "$3" "$1" "$STAGING/$2"
}

# Input hash over: this library, the calling script, the image config (--change lines), and the staged tree
# (paths, types, modes, link targets and file contents). mtimes are not hashed (they are kept in the tar so
# Python's cached bytecode stays valid, but they do not change what the image does).
image_input_hash() { # script changes...
  local script="$1"; shift
  {
    sha256sum "$IMAGE_LIB_FILE" "$script" | awk '{print $1}'
    printf '%s\n' "$@"
    (cd "$STAGING" && find . -mindepth 1 -printf '%P\t%y\t%m\t%l\n' | LC_ALL=C sort)
    (cd "$STAGING" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum)
  } | sha256sum | cut -c1-32
}

# Prints the registry digest of <name>:<tag>, or nothing when the registry does not hold it.
registry_digest() { # name tag
  curl -sf -I \
    -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
    -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    "http://${REGISTRY_ADDR}/v2/$1/manifests/$2" 2>/dev/null \
    | tr -d '\r' | awk -F': ' 'tolower($1)=="docker-content-digest"{print $2}' || true
}

# image_publish <script> [--change lines...]: skip-or-build, then print the digest reference on stdout.
image_publish() {
  local script="$1"; shift
  local hash digest tag started
  started=$(date +%s%N)
  hash="$(image_input_hash "$script" "$@")"
  tag="${PUSH_HOST}/${IMAGE_NAME}:${hash}"
  digest="$(registry_digest "$IMAGE_NAME" "$hash")"
  if [ -n "$digest" ]; then
    ilog "registry already holds ${IMAGE_NAME}:${hash}; not rebuilding"
  else
    local size changes=()
    size=$(du -sb "$STAGING" | cut -f1)
    for c in "$@"; do changes+=(--change "$c"); done
    ilog "importing $(numfmt --to=iec "$size") as ${tag}"
    # Root-owned, numeric ids, sorted: the tar does not depend on who ran the build.
    tar --numeric-owner --owner=0 --group=0 --sort=name --xattrs-exclude='*' -C "$STAGING" -cf - . \
      | docker import "${changes[@]}" --message "runlog ${IMAGE_NAME} ${hash}" - "$tag" >&2
    docker push "$tag" >&2
    digest="$(registry_digest "$IMAGE_NAME" "$hash")"
    [ -n "$digest" ] || idie "pushed ${tag} but the registry reports no digest for it"
    ilog "pushed in $(( ($(date +%s%N) - started) / 1000000 )) ms"
  fi
  printf '%s/%s@%s\n' "$PUSH_HOST" "$IMAGE_NAME" "$digest"
}
