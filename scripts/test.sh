#!/usr/bin/env bash
# Everything `make test` runs: lint, type checks, the proto contract checks and every pytest test.
# Starts a Docker engine for the docker-marked tests when none is running, and stops it afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
V=.venv/bin
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

ENGINE_STARTED=""
cleanup() {
  if [ -n "$ENGINE_STARTED" ]; then bash scripts/docker_engine.sh stop || true; fi
}
trap cleanup EXIT

# The engine runs on a btrfs loop file (scripts/docker_engine.sh) so docker sandboxes' disk limits
# bind (--storage-opt size=); an engine that already runs is used as it is.
if command -v dockerd >/dev/null && ! docker info >/dev/null 2>&1; then
  step "starting dockerd (btrfs, scripts/docker_engine.sh)"
  ENGINE_STARTED=1
  bash scripts/docker_engine.sh start >/dev/null
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
