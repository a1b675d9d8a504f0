#!/usr/bin/env bash
# `make images`: the service images, built from the project's own base image with no registry.
#
#   ale-rock-base (scripts/build_base_image.sh)
#     └ ale-services   venv /opt/ale: ale-proto, ale-rock[docker,proxy], ale-flow + bubblewrap
#         ├ ale-admin, ale-worker, ale-proxy          (thin: user + entrypoint)
#         └ ale-roll   + ale-roll and its CPU torch stack
#             └ ale-inference, ale-trainer            (thin)
#
# The packages come from the wheels scripts/dist.py builds (`make dist`), the third-party wheels
# from .cache/dist-deps (scripts/setup.sh) and, for ale-roll, .cache/images/roll-deps (downloaded
# once with the host's pip configuration). Cached: every image carries the label `ale.inputs`, a
# hash of what it is built from (its Dockerfile, its parent's hash, the package sources); an image
# whose label matches is not rebuilt, so a second run takes about a second.
#
# Usage: deploy/images/build.sh [ROLE...]   roles: admin worker proxy inference trainer (default: all)
# Env:   ALE_IMAGE_TAG (default: latest), ALE_ROCK_BASE_IMAGE (the base image's tag),
#        ALE_IMAGES_FORCE=1 (rebuild even when the labels match).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
HERE=deploy/images
TAG=${ALE_IMAGE_TAG:-latest}
BASE=${ALE_ROCK_BASE_IMAGE:-ale-rock-base:bookworm-py311-v1}
PY=${PYTHON:-$ROOT/.venv/bin/python}
CACHE=$ROOT/.cache/images
log() { printf '\033[1m[images]\033[0m %s\n' "$*" >&2; }

ROLES=("$@")
[ ${#ROLES[@]} -gt 0 ] || ROLES=(admin worker proxy inference trainer)
for r in "${ROLES[@]}"; do
  case $r in admin|worker|proxy|inference|trainer) ;; *) log "unknown role $r"; exit 2 ;; esac
done
docker info >/dev/null 2>&1 || { log "no reachable Docker engine (scripts/docker_engine.sh start)"; exit 1; }
ALE_ROCK_BASE_IMAGE=$BASE bash scripts/build_base_image.sh >&2

# A hash of files' names and contents (tracked and untracked, .gitignore'd ones excluded).
hash_paths() {
  git ls-files -co --exclude-standard -- "$@" | LC_ALL=C sort | while read -r f; do
    [ -f "$f" ] && printf '%s\0' "$f"; done | xargs -0 sha256sum | sha256sum | cut -c1-20
}
label_of() { docker image inspect -f '{{index .Config.Labels "ale.inputs"}}' "$1" 2>/dev/null || true; }
fresh() { [ "${ALE_IMAGES_FORCE:-0}" != 1 ] && [ "$(label_of "$1")" = "$2" ]; }

WHEELS=""  # wheels of the packages an image needs, built once per run as scripts/dist.py builds them
wheelhouse() {  # wheelhouse PACKAGE... (dirs under packages/)
  [ -n "$WHEELS" ] || WHEELS=$(mktemp -d /tmp/ale-images-dist.XXXXXX)
  local todo=() p
  for p in "$@"; do ls "$WHEELS/dist/$(echo "$p" | tr - _)"-*.whl >/dev/null 2>&1 || todo+=("$p"); done
  [ ${#todo[@]} -gt 0 ] || return 0
  log "building the wheels of ${todo[*]} (scripts/dist.py's build_one: sdist, then a wheel from it)"
  "$PY" - "$WHEELS/dist" "${todo[@]}" <<'PY' >/dev/null
import sys
from pathlib import Path

sys.path.insert(0, "scripts")
import dist  # noqa: E402

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
for name in sys.argv[2:]:
    dist.build_one(dist.ROOT / "packages" / name, out)
PY
}
CTX=""
cleanup() { rm -rf "$WHEELS" "$CTX"; }
trap cleanup EXIT
new_ctx() { rm -rf "$CTX"; CTX=$(mktemp -d /tmp/ale-images-ctx.XXXXXX); mkdir -p "$CTX/wheels"
  mkdir "$CTX/pip" && cp -r "$("$PY" -c 'import os, pip; print(os.path.dirname(pip.__file__))')" "$CTX/pip/"; }
# build IMAGE DOCKERFILE HASH CONTEXT [--build-arg ...]
# The image a tag named before a rebuild is left untagged: removed (when nothing else uses it), so
# rebuilds after source changes do not pile up 200 MB images.
drop_old() { [ -z "$1" ] || [ "$1" = "$(docker image inspect -f '{{.Id}}' "$2")" ] || docker image rm "$1" >/dev/null 2>&1 || true; }
build() {
  local image=$1 file=$2 h=$3 ctx=$4; shift 4
  local t0=$SECONDS old
  old=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
  docker build -q -f "$file" --label "ale.inputs=$h" -t "$image" "$@" "$ctx" >/dev/null
  drop_old "$old" "$image"
  log "built $image in $((SECONDS - t0)) s"
}

# --- the services layer
[ -d .cache/dist-deps ] || { log ".cache/dist-deps missing: run scripts/setup.sh (make setup)"; exit 1; }
BWRAP_DEB=$(ls /var/cache/apt/archives/bubblewrap_*.deb 2>/dev/null | head -1 || true)
if [ -z "$BWRAP_DEB" ]; then  # same Debian release as the base image: the host's package fits
  mkdir -p "$CACHE/debs"
  BWRAP_DEB=$(ls "$CACHE"/debs/bubblewrap_*.deb 2>/dev/null | head -1 || true)
  [ -n "$BWRAP_DEB" ] || { (cd "$CACHE/debs" && apt-get download -qq bubblewrap) && BWRAP_DEB=$(ls "$CACHE"/debs/bubblewrap_*.deb | head -1); }
fi
BASE_ID=$(docker image inspect -f '{{.Id}}' "$BASE")
SERVICES_H=$( { echo "$BASE_ID $(basename "$BWRAP_DEB")"; ls .cache/dist-deps; cat "$HERE/services.Dockerfile";
  hash_paths packages/ale-proto packages/ale-rock packages/ale-flow ':!packages/*/tests'; } | sha256sum | cut -c1-20)
if ! fresh "ale-services:$TAG" "$SERVICES_H"; then
  wheelhouse ale-proto ale-rock ale-flow; new_ctx
  cp "$WHEELS"/dist/ale_proto-*.whl "$WHEELS"/dist/ale_rock-*.whl "$WHEELS"/dist/ale_flow-*.whl .cache/dist-deps/*.whl "$CTX/wheels/"
  mkdir "$CTX/debs" && cp "$BWRAP_DEB" "$CTX/debs/"
  build "ale-services:$TAG" "$HERE/services.Dockerfile" "$SERVICES_H" "$CTX" --build-arg "BASE=$BASE"
fi

# --- the ale-roll layer, only when a role needs it
ROLL_H=""
if printf '%s\n' "${ROLES[@]}" | grep -qx 'inference\|trainer'; then
  ROLL_H=$( { echo "$SERVICES_H"; cat "$HERE/roll.Dockerfile"; hash_paths packages/ale-roll ':!packages/*/tests'; } \
    | sha256sum | cut -c1-20)
  if ! fresh "ale-roll:$TAG" "$ROLL_H"; then
    wheelhouse ale-proto ale-roll; new_ctx
    DEPS_H=$(cat packages/ale-roll/pyproject.toml packages/ale-proto/pyproject.toml | sha256sum | cut -c1-16)
    if [ "$(cat "$CACHE/roll-deps.hash" 2>/dev/null)" != "$DEPS_H" ]; then
      log "downloading ale-roll's third-party wheels into $CACHE/roll-deps (once)"
      rm -rf "$CACHE/roll-deps" && mkdir -p "$CACHE/roll-deps"
      # torch pinned like scripts/setup.sh. Which build (CPU or CUDA) is your pip configuration's:
      # for CPU torch set PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu (docs/deploy.md).
      "$PY" -m pip download -q -d "$CACHE/roll-deps" --find-links "$WHEELS/dist" ale-roll "torch==2.13.0" \
        2>&1 | grep -v "is ignored" >&2 || true
      rm -f "$CACHE"/roll-deps/ale_*
      ls "$CACHE"/roll-deps/torch-*.whl >/dev/null || { log "pip download failed"; exit 1; }
      echo "$DEPS_H" >"$CACHE/roll-deps.hash"
    fi
    cp "$WHEELS"/dist/ale_proto-*.whl "$WHEELS"/dist/ale_roll-*.whl "$CACHE"/roll-deps/*.whl "$CTX/wheels/"
    build "ale-roll:$TAG" "$HERE/roll.Dockerfile" "$ROLL_H" "$CTX" --build-arg "SERVICES=ale-services:$TAG"
  fi
fi

# --- the roles: an entrypoint (and a user) each. Their Dockerfiles hold only metadata, applied here
# with one `docker commit --change ...` (`docker build -f <role>.Dockerfile` gives the same image,
# but the classic builder makes a container and a commit per instruction: several times slower).
role_image() {  # role_image IMAGE DOCKERFILE PARENT HASH
  local image=$1 file=$2 parent=$3 h=$4 line cid old t0=$SECONDS
  local changes=(--change "LABEL ale.inputs=$h")
  while IFS= read -r line || [ -n "$line" ]; do
    case $line in
      ''|'#'*|ARG\ *|FROM\ *) ;;
      ENTRYPOINT\ *|CMD\ *|USER\ *|ENV\ *|EXPOSE\ *|VOLUME\ *|WORKDIR\ *|LABEL\ *) changes+=(--change "$line") ;;
      *) log "$file: '$line' needs a real build; only metadata instructions are supported here"; exit 1 ;;
    esac
  done <"$file"
  old=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
  cid=$(docker create "$parent")
  docker commit "${changes[@]}" "$cid" "$image" >/dev/null
  docker rm "$cid" >/dev/null
  drop_old "$old" "$image"
  log "built $image in $((SECONDS - t0)) s"
}
for role in "${ROLES[@]}"; do
  case $role in inference|trainer) parent=ale-roll:$TAG; ph=$ROLL_H ;; *) parent=ale-services:$TAG; ph=$SERVICES_H ;; esac
  h=$( { echo "$ph"; cat "$HERE/$role.Dockerfile"; } | sha256sum | cut -c1-20)
  if fresh "ale-$role:$TAG" "$h"; then log "ale-$role:$TAG is up to date"; continue; fi
  role_image "ale-$role:$TAG" "$HERE/$role.Dockerfile" "$parent" "$h"
done
for role in "${ROLES[@]}"; do echo "ale-$role:$TAG"; done
