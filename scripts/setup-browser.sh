#!/usr/bin/env bash
# Installs a browser for the web inspector's end-to-end test: Debian's own `chromium` package (apt, no
# browser download from anywhere else). Idempotent: does nothing when /usr/bin/chromium is there and runs.
set -euo pipefail

log() { printf '[setup-browser] %s\n' "$*" >&2; }
die() { printf '[setup-browser] error: %s\n' "$*" >&2; exit 1; }

CHROMIUM=/usr/bin/chromium

if [ -x "$CHROMIUM" ] && "$CHROMIUM" --headless --no-sandbox --version >/dev/null 2>&1; then
  log "chromium: $("$CHROMIUM" --version 2>/dev/null | head -1)"
  exit 0
fi

[ "$(id -u)" = 0 ] || die "run as root (it installs the Debian chromium package with apt)"
log "installing chromium (Debian package)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
# policy-rc.d keeps packages' init scripts from starting daemons during the install.
created_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  created_policy=1
fi
# fonts-liberation: readable text in screenshots (chromium's headless mode has no fonts of its own).
apt-get install -y -qq --no-install-recommends chromium fonts-liberation >/dev/null
[ "$created_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d

[ -x "$CHROMIUM" ] || die "apt installed chromium but $CHROMIUM is missing"
log "chromium: $("$CHROMIUM" --version 2>/dev/null | head -1)"
