#!/usr/bin/env bash
# A Docker engine whose storage can cap each container's disk: dockerd on a btrfs file system
# held in a sparse loop file, with the btrfs storage driver (so `--storage-opt size=` works; on
# overlay2-over-ext4 it does not, and the docker backend then refuses disk limits it cannot keep).
# A new file system gets btrfs simple quotas where the kernel has them (6.7+), else classic
# qgroups; an existing one keeps its mode (delete ALE_DOCKER_IMG to change it). `start` logs which.
#
# Usage: scripts/docker_engine.sh start|stop|status
#   start   idempotent: create the loop file + btrfs once, mount it, start dockerd, wait until it
#           answers (ALE_DOCKER_START_TIMEOUT_S, default 60), print dockerd's pid
#   stop    SIGTERM dockerd by its pid (SIGKILL after 20 s), unmount the file system
#   status  "running <pid> <driver>" (exit 0) or "stopped" (exit 1)
# Env: ALE_DOCKER_IMG (default /var/lib/ale-docker.img), ALE_DOCKER_IMG_SIZE (default 24G, sparse),
#      ALE_DOCKER_MNT (default /var/lib/ale-docker), ALE_DOCKER_SOCK (default /var/run/docker.sock).
# Needs root, btrfs-progs (scripts/setup.sh installs it) and a kernel with btrfs and loop devices.
set -euo pipefail

IMG=${ALE_DOCKER_IMG:-/var/lib/ale-docker.img}
SIZE=${ALE_DOCKER_IMG_SIZE:-24G}
MNT=${ALE_DOCKER_MNT:-/var/lib/ale-docker}
SOCK=${ALE_DOCKER_SOCK:-/var/run/docker.sock}
TIMEOUT=${ALE_DOCKER_START_TIMEOUT_S:-60}
PIDFILE=/var/run/ale-dockerd.pid
LOG=/var/log/ale-dockerd.log
log() { printf '\033[1m[docker-engine]\033[0m %s\n' "$*" >&2; }

our_pid() {  # dockerd's pid when the one we started still runs, else nothing
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = dockerd ] \
    && echo "$pid"
}
answers() { docker -H "unix://$SOCK" info >/dev/null 2>&1; }
quota_mode() {  # squota | qgroup | none: how the mounted file system counts quotas
  local dir=/sys/fs/btrfs/$(blkid -o value -s UUID "$IMG")/qgroups
  if [ -r "$dir/mode" ]; then cat "$dir/mode"; elif [ -d "$dir" ]; then echo qgroup; else echo none; fi
}
enable_simple_quota() {  # BTRFS_IOC_QUOTA_CTL(BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA); fails on kernels < 6.7
  python3 - "$MNT" <<'PY' || log "simple quotas not available here: classic qgroups"
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fcntl.ioctl(fd, (3 << 30) | (16 << 16) | (0x94 << 8) | 40, bytearray(struct.pack("QQ", 4, 0)))
PY
}

start() {
  [ "$(id -u)" = 0 ] || { log "needs root"; exit 1; }
  local pid
  if pid=$(our_pid) && answers; then echo "$pid"; return 0; fi
  if answers; then log "another engine already answers on $SOCK: not starting a second"; exit 1; fi
  command -v mkfs.btrfs >/dev/null || { log "mkfs.btrfs missing: apt-get install btrfs-progs"; exit 1; }
  if ! mountpoint -q "$MNT"; then
    mkdir -p "$MNT" "$(dirname "$IMG")"
    if [ ! -s "$IMG" ] || [ "$(blkid -o value -s TYPE "$IMG" 2>/dev/null)" != btrfs ]; then
      log "creating $IMG ($SIZE, sparse, btrfs)"
      rm -f "$IMG"
      truncate -s "$SIZE" "$IMG"
      mkfs.btrfs -q "$IMG" >/dev/null
    fi
    mount -o loop "$IMG" "$MNT"
    # A new file system gets simple quotas where the kernel has them (6.7+): a container's size
    # then counts only its own writes, and dropping a removed container's snapshot costs no
    # quota walk (classic qgroups kept btrfs-cleaner on a whole core for minutes under container
    # churn here: every sandbox's first commands and every docker run waited behind it).
    # btrfs-progs < 6.7 cannot ask for them, so the ioctl is made directly.
    [ "$(quota_mode)" = none ] && enable_simple_quota || true
  fi
  # Quotas on before the engine writes anything, and accounting made consistent (a file system
  # whose quotas were turned on late, e.g. by dockerd itself, silently stops enforcing limits).
  if [ "$(quota_mode)" != squota ]; then
    btrfs quota enable "$MNT"
    btrfs quota rescan -w "$MNT" >/dev/null
  fi
  log "quotas: $(quota_mode)"
  mkdir -p "$MNT/data"
  # setsid: dockerd must not get the caller's terminal signals (Ctrl-C of a test run).
  setsid dockerd --host "unix://$SOCK" --data-root "$MNT/data" --storage-driver btrfs \
    --pidfile "$PIDFILE" >>"$LOG" 2>&1 </dev/null &
  pid=$!
  local deadline=$((SECONDS + TIMEOUT))
  until answers; do
    if ! kill -0 "$pid" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
      log "dockerd did not start (log $LOG):"; tail -20 "$LOG" >&2
      kill "$pid" 2>/dev/null || true
      exit 1
    fi
    sleep 0.1
  done
  echo "$pid"
}

stop() {
  local pid
  if pid=$(our_pid); then
    kill "$pid"
    for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && { log "dockerd $pid ignored SIGTERM: SIGKILL"; kill -9 "$pid" || true; sleep 0.5; }
  fi
  rm -f "$PIDFILE"
  if mountpoint -q "$MNT"; then
    for _ in $(seq 20); do umount "$MNT" 2>/dev/null && break; sleep 0.25; done
    mountpoint -q "$MNT" && { log "cannot unmount $MNT (still busy)"; exit 1; }
  fi
  return 0
}

status() {
  local pid
  if pid=$(our_pid) && answers; then
    echo "running $pid $(docker -H "unix://$SOCK" info --format '{{.Driver}}' 2>/dev/null)"
  else
    echo stopped; return 1
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
