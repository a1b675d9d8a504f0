"""A task's ``[environment]`` as a SandboxSpec, and the operator's SandboxPolicy over it (pure logic;
the sandboxes themselves: tests/episode/test_rock_episode_environment.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ale_rock.envs.sandbox import LocalDirProvider, SandboxPolicy, SandboxSpec, SandboxSpecRefused
from ale_rock.tasks import load_task
from ale_rock.tasks.environment import sandbox_spec


def _task(root: Path, env: str) -> object:
    (root / "tests").mkdir(parents=True)
    (root / "task.toml").write_text('schema_version = "1.4"\n[task]\nname = "t/x"\n[environment]\n' + env)
    (root / "instruction.md").write_text("x\n")
    (root / "tests/test.sh").write_text("true\n")
    return load_task(root)


def test_the_tasks_environment_becomes_one_spec(tmp_path: Path) -> None:
    t = _task(tmp_path / "a", 'workdir = "/app"\ncpus = 1.5\nmemory_mb = 300\nnetwork_mode = "allowlist"\n'
                              'allowed_hosts = ["pypi.org:443", "files.example"]\n[environment.env]\nK = "v"\n')
    spec = sandbox_spec(t)  # type: ignore[arg-type]
    assert spec == SandboxSpec(image="", workdir="/app", env={"K": "v"}, cpu=1.5, memory_bytes=300 * 2**20,
                               allow=(("pypi.org", 443), "files.example"))
    assert spec.create_kwargs() == {"image": "", "workdir": "/app", "env": {"K": "v"}, "cpu": 1.5,
                                    "memory": 300 * 2**20, "allow": [("pypi.org", 443), "files.example"]}
    # Another work dir on docker's base image: a read-only root with the work dir its own mount.
    assert spec.for_backend("docker").read_only_root and not spec.for_backend("local").read_only_root
    # allowed_hosts without allowlist (or public, which ALE runs as no-network) open nothing.
    for mode in ("no-network", "public"):
        t = _task(tmp_path / mode, f'network_mode = "{mode}"\nallowed_hosts = ["pypi.org"]\n')
        assert sandbox_spec(t).allow == ()  # type: ignore[arg-type]


def test_the_policy_fills_defaults_and_refuses_more_naming_the_field() -> None:
    policy = SandboxPolicy(default_cpu=0.5, default_memory_bytes=2**29, max_cpu=2, max_memory_bytes=2**30)
    assert policy.admit(SandboxSpec()) == SandboxSpec(cpu=0.5, memory_bytes=2**29)
    assert policy.admit(SandboxSpec(cpu=2, memory_bytes=2**30)).cpu == 2  # at the bound: as asked
    with pytest.raises(SandboxSpecRefused, match=r"\[environment\].cpus: the task asks for 4 CPUs; .* at most 2") as e:
        policy.admit(SandboxSpec(cpu=4))
    assert e.value.field == "[environment].cpus"
    with pytest.raises(SandboxSpecRefused, match=r"\[environment\].memory_mb: the task asks for 2048 MiB"):
        policy.admit(SandboxSpec(memory_bytes=2**31))
    with pytest.raises(SandboxSpecRefused, match=r"\[environment\].allowed_hosts: .*pypi.org:443.* no network"):
        SandboxPolicy(task_egress=False).admit(SandboxSpec(allow=(("pypi.org", 443),)))
    assert SandboxPolicy(task_egress=False).admit(SandboxSpec()).allow == ()
    # The model proxy is the operator's to grant (eval and training do), never a task's.
    for rule in ("model-proxy", ("Model-Proxy.", 80)):
        with pytest.raises(SandboxSpecRefused, match=r"(?i)allowed_hosts: model-proxy.* reserved to the operator"):
            SandboxPolicy().admit(SandboxSpec(allow=(rule,)))


def test_local_provider_applies_env_and_the_policy() -> None:
    p = LocalDirProvider(SandboxPolicy(max_cpu=1))
    sid = p.create({}, SandboxSpec(env={"ALE_X": "y"}))
    try:
        assert p.exec(sid, "echo $ALE_X", 10).output.strip() == "y"
    finally:
        p.delete(sid)
    with pytest.raises(SandboxSpecRefused):
        p.create({}, SandboxSpec(cpu=2))
    assert not p._runners
