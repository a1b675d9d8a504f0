"""Unit tests of the Admin's plain-Python logic: state machine, quotas, scheduler, auth, store, validation."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from ale_proto.v1 import common_pb2, sandbox_pb2
from ale_rock.admin import validation
from ale_rock.admin.auth import Authenticator
from ale_rock.admin.config import AdminConfig, QuotaConfig, parse_key_list
from ale_rock.admin.errors import AdminError, Code
from ale_rock.admin.quotas import admit
from ale_rock.admin.scheduler import Demand, pick_worker
from ale_rock.admin.state import State, can_transition, check_transition
from ale_rock.admin.store import SandboxRecord, Store, Usage, WorkerRecord


def test_state_machine_allows_the_lifecycle_and_refuses_resurrection() -> None:
    assert can_transition(State.PENDING, State.RUNNING)
    assert can_transition(State.RUNNING, State.STOPPED)
    assert can_transition(State.STOPPED, State.DELETED)
    assert can_transition(State.RUNNING, State.LOST)
    assert not can_transition(State.DELETED, State.RUNNING)
    assert not can_transition(State.LOST, State.RUNNING)
    assert not can_transition(State.STOPPED, State.RUNNING)
    with pytest.raises(AdminError) as e:
        check_transition("sb-000000000000", State.FAILED, State.STOPPED)
    assert e.value.code == Code.FAILED_PRECONDITION


def test_admission_names_the_quota_that_is_exceeded() -> None:
    quota = QuotaConfig(max_sandboxes=2, max_cpu_millis=3000, max_memory_bytes=2**30)
    admit("ns", 1000, 2**20, quota, Usage(1, 1000, 2**20), global_active=1, global_cap=10)
    cases = [
        (Usage(2, 0, 0), 10, "max_sandboxes"),
        (Usage(1, 2500, 0), 10, "max_cpu_millis"),
        (Usage(1, 0, 2**30), 10, "max_memory_bytes"),
        (Usage(0, 0, 0), 1, "max_concurrent_sandboxes"),
    ]
    for usage, cap, name in cases:
        with pytest.raises(AdminError) as e:
            admit("ns", 1000, 2**20, quota, usage, global_active=1, global_cap=cap)
        assert e.value.code == Code.RESOURCE_EXHAUSTED
        assert e.value.metadata["quota"] == name
        assert name in e.value.message


def _worker(wid: str, cpu: int = 4000, mem: int = 8 * 2**30, alive: bool = True, **kw: object) -> WorkerRecord:
    return WorkerRecord(id=wid, address="127.0.0.1:1", cpu_millis=cpu, memory_bytes=mem, max_sandboxes=0,
                        alive=alive, **kw)  # type: ignore[arg-type]


def test_scheduler_prefers_free_resources_and_skips_dead_or_full_workers() -> None:
    ws = [_worker("a"), _worker("b"), _worker("dead", cpu=64000, alive=False)]
    allocated = {"a": Usage(3, 3000, 2**30), "b": Usage(1, 1000, 2**30)}
    assert pick_worker(ws, allocated, Demand(500, 2**20)).id == "b"
    assert pick_worker(ws, {"b": Usage(4, 4000, 0)}, Demand(500, 2**20)).id == "a"
    with pytest.raises(AdminError) as e:
        pick_worker(ws, {"a": Usage(4, 4000, 0), "b": Usage(4, 4000, 0)}, Demand(500, 2**20))
    assert e.value.code == Code.RESOURCE_EXHAUSTED
    with pytest.raises(AdminError) as e:
        pick_worker([_worker("x", alive=False)], {}, Demand(1, 1))
    assert e.value.code == Code.UNAVAILABLE
    docker_only = [_worker("d", backends=["docker"]), _worker("l", backends=["local"])]
    assert pick_worker(docker_only, {}, Demand(1, 1, backend="local")).id == "l"


def test_auth_maps_keys_to_namespaces_and_checks_join_tokens() -> None:
    auth = Authenticator({"k1": "alpha", "k2": "beta"}, "join")
    assert auth.namespace_of([("authorization", "Bearer k2")]) == "beta"
    for md in ([], [("authorization", "Bearer nope")], [("authorization", "k1")]):
        with pytest.raises(AdminError) as e:
            auth.namespace_of(md)
        assert e.value.code == Code.UNAUTHENTICATED
    auth.check_join_token([("authorization", "Bearer join")])
    with pytest.raises(AdminError):
        auth.check_join_token([("authorization", "Bearer k1")])
    with pytest.raises(AdminError):
        Authenticator({}, "").check_join_token([("authorization", "Bearer ")])


def test_store_survives_reopen_and_accounts_active_usage(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = Store(db)
    now = time.time()
    for i, state in enumerate([State.RUNNING, State.PENDING, State.STOPPED]):
        store.insert_sandbox(SandboxRecord(
            id=f"sb-00000000000{i}", namespace="ns", state=state, spec={"image": "x"}, cpu_millis=1000,
            memory_bytes=100, expire_time=now + 60, worker_id="w", request_id=f"r{i}"))
    store.upsert_worker(_worker("w"))
    store.update_sandbox("sb-000000000000", state=State.FAILED, message="boom")
    store.close()
    again = Store(db)
    rec = again.get_sandbox("sb-000000000000")
    assert rec is not None and rec.state == State.FAILED and rec.message == "boom" and rec.spec == {"image": "x"}
    assert again.usage(namespace="ns") == Usage(1, 1000, 100)
    assert again.find_by_request_id("ns", "r2") is not None
    assert [w.id for w in again.list_workers()] == ["w"]
    assert again._read("PRAGMA journal_mode")[0][0] == "wal"


def test_config_from_file_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "admin.yaml"
    f.write_text("port: 0\napi_keys: {a: one}\nquotas: {one: {max_sandboxes: 3}}\n")
    monkeypatch.setenv("ALE_ROCK_API_KEYS", "b=two")
    monkeypatch.setenv("ALE_ROCK_JOIN_TOKEN", "tok")
    cfg = AdminConfig.load(f)
    assert cfg.api_keys == {"a": "one", "b": "two"} and cfg.join_token == "tok"
    assert cfg.quota_for("one").max_sandboxes == 3 and cfg.quota_for("two") == cfg.default_quota
    with pytest.raises(ValueError):
        parse_key_list("novalue")
    with pytest.raises(ValueError):
        AdminConfig(unknown_field=1)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (sandbox_pb2.SandboxSpec(resources=common_pb2.Resources(cpu_millis=10**9)), "spec.resources.cpu_millis"),
        (sandbox_pb2.SandboxSpec(resources=common_pb2.Resources(memory_bytes=1)), "spec.resources.memory_bytes"),
        (sandbox_pb2.SandboxSpec(image="bad image!"), "spec.image"),
        (sandbox_pb2.SandboxSpec(workdir="relative"), "spec.workdir"),
        (sandbox_pb2.SandboxSpec(env={"1BAD": "x"}), "spec.env['1BAD']"),
        (sandbox_pb2.SandboxSpec(labels={"Upper": "x"}), "spec.labels['Upper']"),
        (sandbox_pb2.SandboxSpec(ttl_seconds=10**9), "spec.ttl_seconds"),
        (sandbox_pb2.SandboxSpec(network=sandbox_pb2.NetworkPolicy(allow=[sandbox_pb2.EgressRule(host="a b")])),
         "spec.network.allow[0].host"),
    ],
)
def test_create_spec_validation_names_the_field(spec: sandbox_pb2.SandboxSpec, field: str) -> None:
    with pytest.raises(AdminError) as e:
        validation.create_spec(spec, AdminConfig())
    assert e.value.code == Code.INVALID_ARGUMENT and e.value.field == field


def test_create_spec_fills_defaults() -> None:
    out = validation.create_spec(sandbox_pb2.SandboxSpec(), AdminConfig(default_ttl_seconds=42))
    assert out.resources.cpu_millis == 1000 and out.workdir == "/workspace" and out.ttl_seconds == 42


def test_exec_and_path_validation() -> None:
    cfg = AdminConfig(max_command_bytes=100)
    bad = [
        (sandbox_pb2.ExecSpec(), "spec.command"),
        (sandbox_pb2.ExecSpec(command="x" * 101), "spec.command"),
        (sandbox_pb2.ExecSpec(command="ls", argv=["ls"]), "spec.command"),
        (sandbox_pb2.ExecSpec(command="ls", cwd="rel"), "spec.cwd"),
        (sandbox_pb2.ExecSpec(argv=[""]), "spec.argv[0]"),
    ]
    for spec, field in bad:
        with pytest.raises(AdminError) as e:
            validation.exec_spec(spec, cfg)
        assert e.value.field == field
    for p in ("", "rel/path", "/a\x00b", "/" + "a" * 5000):
        with pytest.raises(AdminError):
            validation.path(p)
    for sid in ("", "sb-123", "SB-000000000000", "sb-00000000000g", "../etc"):
        with pytest.raises(AdminError) as e:
            validation.sandbox_id(sid)
        assert e.value.field == "sandbox_id"


def test_scheduler_tells_a_backend_nobody_offers_from_a_full_cluster() -> None:
    """No live worker offers the backend (or the GPUs): FAILED_PRECONDITION naming the field, a
    permanent condition; workers that could run it but are full: RESOURCE_EXHAUSTED."""
    docker_only = [_worker("d1", backends=["docker"]), _worker("d2", backends=["docker"], gpus=1)]
    with pytest.raises(AdminError) as e:
        pick_worker(docker_only, {}, Demand(1, 1, backend="local"))
    assert e.value.code == Code.FAILED_PRECONDITION and e.value.field == "spec.backend"
    assert "'local'" in e.value.message and "docker" in e.value.message
    with pytest.raises(AdminError) as e:
        pick_worker(docker_only, {}, Demand(1, 1, backend="docker", gpus=2))
    assert e.value.code == Code.FAILED_PRECONDITION and e.value.field == "spec.resources.gpus"
    assert pick_worker(docker_only, {}, Demand(1, 1, backend="docker", gpus=1)).id == "d2"
    full = {"d1": Usage(4, 4000, 0), "d2": Usage(4, 4000, 0)}
    with pytest.raises(AdminError) as e:
        pick_worker(docker_only, full, Demand(500, 1, backend="docker"))
    assert e.value.code == Code.RESOURCE_EXHAUSTED and e.value.metadata["quota"] == "cluster_capacity"
    # A worker that lists no backends takes any: not a precondition failure.
    assert pick_worker([_worker("any")], {}, Demand(1, 1, backend="local")).id == "any"


def test_an_image_is_refused_at_create_when_no_worker_could_start_it() -> None:
    """The local backend starts no image: asked for explicitly, or with only local workers live,
    an image is INVALID_ARGUMENT on spec.image at create — not a sandbox that goes FAILED later."""
    with pytest.raises(AdminError) as e:
        validation.create_spec(
            sandbox_pb2.SandboxSpec(image="python:3.12", backend=sandbox_pb2.SANDBOX_BACKEND_LOCAL), AdminConfig()
        )
    assert e.value.code == Code.INVALID_ARGUMENT and e.value.field == "spec.image"
    local_only = [_worker("l1", backends=["local"]), _worker("l2", backends=["local"])]
    with pytest.raises(AdminError) as e:
        pick_worker(local_only, {}, Demand(1, 1, image=True))
    assert e.value.code == Code.INVALID_ARGUMENT and e.value.field == "spec.image"
    assert pick_worker(local_only, {}, Demand(1, 1)).id in ("l1", "l2")  # no image: fine
    mixed = [*local_only, _worker("d", backends=["docker"])]
    assert pick_worker(mixed, {}, Demand(1, 1, image=True)).id == "d"  # placed where it can start


def test_every_worker_backend_has_a_contract_value_and_round_trips():
    # A backend missing from the contract registered as LOCAL (the kubernetes worker did) and the
    # admin then placed local-backend sandboxes on it.
    import typing

    from ale_rock.admin.convert import backend_from_name, backend_name
    from ale_rock.worker.config import WorkerConfig

    choices = typing.get_args(WorkerConfig.model_fields["backend"].annotation)
    assert "kubernetes" in choices
    values = {backend_from_name(b) for b in choices}
    assert sandbox_pb2.SANDBOX_BACKEND_UNSPECIFIED not in values and len(values) == len(choices)
    assert [backend_name(backend_from_name(b)) for b in choices] == list(choices)
