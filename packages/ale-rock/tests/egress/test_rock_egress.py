"""Egress: deny by default, allowed hosts through the in-sandbox proxy, denied attempts as events."""

from __future__ import annotations

import grpc
from ale_proto.v1 import common_pb2, rocklet_pb2, rocklet_pb2_grpc
from ale_rock.egress.gateway import TOKEN_METADATA_KEY, EgressGateway
from ale_rock.egress.policy import Rule, SafetyLog, decide

# Curl through the sandbox's proxy even for a loopback address (NO_PROXY would skip it).
VIA_PROXY = "curl -s -m 10 --proxy http://127.0.0.1:3128 --noproxy ''"


def test_policy_decisions() -> None:
    assert not decide([], "example.org", 443).allowed
    assert decide([Rule("example.org", 443)], "EXAMPLE.org.", 443).allowed
    assert not decide([Rule("example.org", 443)], "example.org", 80).allowed
    assert decide([Rule("10.0.0.5", 0)], "10.0.0.5", 22).allowed
    # A wildcard never reaches loopback, private or link-local addresses.
    for host in ("127.0.0.1", "10.1.2.3", "169.254.169.254", "192.168.1.1", "localhost", "192.0.2.1"):
        assert not decide([Rule("*", 0)], host, 80).allowed, host


def test_safety_log_keeps_recent_and_counts() -> None:
    log = SafetyLog()
    for i in range(150):
        log.record("sb", "egress_blocked", f"cmd{i}", "x")
    count, recent = log.get("sb")
    assert count == 150 and len(recent) == 100 and recent[-1].command == "cmd149"
    log.forget("sb")
    assert log.get("sb") == (0, [])


def test_gateway_refuses_unknown_token_and_bad_targets(gateway: EgressGateway) -> None:
    stub = rocklet_pb2_grpc.EgressServiceStub(grpc.insecure_channel(f"unix:{gateway.socket_path}"))
    target = rocklet_pb2.ConnectRequest(target=rocklet_pb2.EgressTarget(host="192.0.2.1", port=80))
    first = next(stub.Connect(iter([target]), metadata=[(TOKEN_METADATA_KEY, "forged")]))
    assert first.error.code == common_pb2.ERROR_CODE_UNAUTHENTICATED
    gateway.register("direct", "tok-direct", [])
    bad = rocklet_pb2.ConnectRequest(target=rocklet_pb2.EgressTarget(host="", port=0))
    first = next(stub.Connect(iter([bad]), metadata=[(TOKEN_METADATA_KEY, "tok-direct")]))
    assert first.error.code == common_pb2.ERROR_CODE_INVALID_ARGUMENT
    first = next(stub.Connect(iter([target]), metadata=[(TOKEN_METADATA_KEY, "tok-direct")]))
    assert first.error.code == common_pb2.ERROR_CODE_PERMISSION_DENIED
    assert gateway.safety.get("direct")[0] == 1
    gateway.forget("direct")


def test_denied_by_default_and_recorded_with_the_command(
    sandbox, gateway: EgressGateway, http_server: int
) -> None:
    sid, sh = sandbox([])
    r = sh(f"{VIA_PROXY} -o /dev/null -w '%{{http_code}}' http://192.0.2.1/x")
    assert r.stdout == b"403"
    r = sh(f"{VIA_PROXY} http://127.0.0.1:{http_server}/")
    assert b"hello from host" not in r.stdout
    count, events = gateway.safety.get(sid)
    assert count == 2
    assert events[0].kind == "egress_blocked" and "192.0.2.1:80" in events[0].detail
    assert "curl" in events[0].command and "192.0.2.1" in events[0].command


def test_allowed_host_is_reached_through_the_proxy(
    sandbox, gateway: EgressGateway, remote_server: tuple[str, int]
) -> None:
    ip, port = remote_server
    sid, sh = sandbox([Rule(ip, port)])
    assert sh(f"{VIA_PROXY} http://{ip}:{port}/").stdout == b"hello from afar"
    # CONNECT tunnels (what HTTPS clients use) work too.
    assert sh(f"{VIA_PROXY} -p http://{ip}:{port}/").stdout == b"hello from afar"
    # Without the proxy there is no way out.
    r = sh(f"curl -s -m 5 --noproxy '*' http://{ip}:{port}/; echo rc=$?")
    assert b"hello from afar" not in r.stdout and b"rc=7" in r.stdout
    assert gateway.safety.get(sid)[0] == 0
    # Revoking the rule takes effect on the next connection.
    gateway.set_policy(sid, [])
    assert b"hello from afar" not in sh(f"{VIA_PROXY} http://{ip}:{port}/").stdout


def test_a_rule_to_the_host_itself_opens_nothing(sandbox, gateway: EgressGateway, http_server: int) -> None:
    """Loopback is the host's, not the sandbox's: even a rule naming it is refused at connect time."""
    sid, sh = sandbox([Rule("127.0.0.1", http_server), Rule("localhost", http_server)])
    for host in ("127.0.0.1", "localhost"):
        r = sh(f"{VIA_PROXY} -s -w ' %{{http_code}}' http://{host}:{http_server}/")
        assert b"hello from host" not in r.stdout and r.stdout.endswith(b" 403"), r.stdout
    count, events = gateway.safety.get(sid)
    assert count == 2 and "loopback" in events[0].detail


def test_model_proxy_without_address_is_denied(sandbox, gateway: EgressGateway) -> None:
    sid, sh = sandbox([Rule("model-proxy", 0)])
    r = sh(f"{VIA_PROXY} -o /dev/null -w '%{{http_code}}' http://model-proxy:8080/v1/models")
    assert r.stdout == b"403"
    assert "model proxy" in gateway.safety.get(sid)[1][-1].detail


def test_commands_see_proxy_env(sandbox) -> None:
    _, sh = sandbox([])
    out = sh("echo $HTTP_PROXY; echo $HTTPS_PROXY; echo $NO_PROXY").stdout.decode().split()
    assert out == ["http://127.0.0.1:3128", "http://127.0.0.1:3128", "localhost,127.0.0.1"]
