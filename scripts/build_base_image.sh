#!/usr/bin/env bash
# Build the Docker backend's default base image (there is no registry here): a Debian bookworm
# minbase rootfs with python3 (3.11, the same as the host venv, so the Rocklet's dependencies can
# be bind-mounted from the worker's venv at run time), a non-root `sandbox` user (uid/gid 1000)
# and a /workspace dir it owns, imported with `docker import`.
#
# Idempotent and cached: it does nothing when the image tag exists; the rootfs tarball is kept in
# $ALE_CACHE_DIR so a fresh engine re-imports it in about a second instead of re-bootstrapping.
#
# Usage: scripts/build_base_image.sh [--force]
# Env:   ALE_ROCK_BASE_IMAGE (tag, default below; the docker backend reads the same variable),
#        ALE_CACHE_DIR (default ~/.cache/ale), DEBIAN_MIRROR (default http://deb.debian.org/debian).
set -euo pipefail

# Bump the suffix whenever the rootfs recipe below changes.
TAG=${ALE_ROCK_BASE_IMAGE:-ale-rock-base:bookworm-py311-v1}
CACHE_DIR=${ALE_CACHE_DIR:-$HOME/.cache/ale}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
TARBALL="$CACHE_DIR/$(echo "$TAG" | tr '/:' '__').tar"
FORCE=0
[ "${1:-}" = "--force" ] && FORCE=1
log() { printf '\033[1m[base-image]\033[0m %s\n' "$*"; }

if ! command -v docker >/dev/null || ! docker info >/dev/null 2>&1; then
  log "no reachable Docker engine: not building $TAG (docker-marked tests will be skipped)"
  exit 0
fi
if [ $FORCE = 0 ] && docker image inspect "$TAG" >/dev/null 2>&1; then
  log "$TAG exists"
  exit 0
fi

if [ $FORCE = 1 ] || [ ! -s "$TARBALL" ]; then
  if ! command -v debootstrap >/dev/null; then
    [ "$(id -u)" = 0 ] || { log "debootstrap missing: apt-get install debootstrap"; exit 1; }
    log "apt-get install debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
  fi
  [ "$(id -u)" = 0 ] || { log "debootstrap needs root"; exit 1; }
  mkdir -p "$CACHE_DIR"
  ROOTFS=$(mktemp -d /tmp/ale-rootfs.XXXXXX)
  trap 'rm -rf "$ROOTFS"' EXIT
  log "debootstrap bookworm (minbase + python3) into $ROOTFS"
  debootstrap --variant=minbase --include=python3 bookworm "$ROOTFS" "$MIRROR" >/tmp/ale-debootstrap.log 2>&1 \
    || { tail -20 /tmp/ale-debootstrap.log; exit 1; }
  # The sandbox user; the Rocklet and every command run as it (never root).
  echo 'sandbox:x:1000:1000:ALE sandbox:/workspace:/bin/bash' >>"$ROOTFS/etc/passwd"
  echo 'sandbox:x:1000:' >>"$ROOTFS/etc/group"
  echo 'sandbox:*:19000:0:99999:7:::' >>"$ROOTFS/etc/shadow"
  mkdir -p "$ROOTFS/workspace" "$ROOTFS/run/ale" "$ROOTFS/opt/ale"
  chown 1000:1000 "$ROOTFS/workspace" "$ROOTFS/run/ale"
  # Smaller image, faster import: package caches and docs are not needed inside a sandbox.
  rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* \
    "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/locale/*
  # mktemp -d made the rootfs dir 0700 and the tarball's "./" entry becomes the container's "/":
  # a non-root sandbox user could then not even reach /usr/bin.
  chmod 0755 "$ROOTFS"
  tar -C "$ROOTFS" --numeric-owner -cf "$TARBALL.tmp" .
  mv "$TARBALL.tmp" "$TARBALL"
fi

log "docker import $TARBALL -> $TAG"
docker import \
  --change 'USER 1000:1000' \
  --change 'WORKDIR /workspace' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/bash"]' \
  "$TARBALL" "$TAG" >/dev/null
docker image inspect "$TAG" --format '{{.Id}} {{.Size}}'
