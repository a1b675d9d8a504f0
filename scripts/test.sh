#!/usr/bin/env bash
# Everything `make test` runs: lint, type checks, the proto contract checks and every pytest test.
# Starts a Docker engine for the docker-marked tests when none is running, and stops it afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
V=.venv/bin
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

DOCKERD_PID=""
cleanup() {
  if [ -n "$DOCKERD_PID" ]; then
    kill "$DOCKERD_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 0.2; done
  fi
}
trap cleanup EXIT

if command -v dockerd >/dev/null && ! docker info >/dev/null 2>&1; then
  step "starting dockerd"
  mkdir -p /tmp/ale-dockerd
  dockerd --host unix:///var/run/docker.sock >/tmp/ale-dockerd/dockerd.log 2>&1 &
  DOCKERD_PID=$!
  for _ in $(seq 100); do docker info >/dev/null 2>&1 && break; sleep 0.2; done
  docker info >/dev/null 2>&1 || { echo "dockerd did not start:"; tail -20 /tmp/ale-dockerd/dockerd.log; exit 1; }
fi

if docker info >/dev/null 2>&1; then
  step "docker base image"
  bash scripts/build_base_image.sh
fi

# DeepSpeed JIT-builds its ops once into this cache. A build killed midway leaves a `lock` file that
# makes every later build wait forever; no build runs before this point, so stale locks can go.
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-$HOME/.cache/ale-torch-extensions}
mkdir -p "$TORCH_EXTENSIONS_DIR"
find "$TORCH_EXTENSIONS_DIR" -name lock -type f -delete 2>/dev/null || true

step "ruff"
$V/ruff check .
step "mypy"
$V/mypy packages/ale-proto/src packages/ale-rock/src packages/ale-flow/src packages/ale-roll/src src
step "buf lint"
(cd packages/ale-proto && npx --no-install buf lint)
step "pytest"
# Every resource a test may skip on is installed and started above: a skip here is a failure.
ALE_REQUIRE_ALL=1 $V/python -m pytest -q -ra "$@"
