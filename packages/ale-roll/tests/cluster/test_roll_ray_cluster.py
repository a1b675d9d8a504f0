"""cluster.mode=ray: a short real RL run with the roles as Ray actors on a private local instance.

The run is real (tiny random-init model, GuessTheNumber in-process in the rollout workers, REINFORCE
steps on the train actor, verified weight pushes to the inference actor); afterwards no process
of the Ray session is left. The default local mode must not import Ray at all.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from ale_roll.config import ConfigError, build_config

HAS_RAY = importlib.util.find_spec("ray") is not None
HAS_ENVS = importlib.util.find_spec("ale_rock") is not None
WORDS = [str(i) for i in range(1, 21)] + ["higher", "lower", "wrong", "Invalid", "Correct", "guess", ".", ";"]


def _raw(out: Path, **cluster: object) -> dict:
    return {
        "name": "ray", "output_dir": str(out), "iterations": 2, "seed": 3,
        "model": {"tiny": {"arch": "llama", "vocab_size": 300, "hidden_size": 64, "num_layers": 1, "num_heads": 2,
                           "num_kv_heads": 2, "head_dim": 32, "intermediate_size": 128,
                           "max_position_embeddings": 256}, "word_vocab": WORDS},
        "engine": {"torch_threads": 1},
        "rollout": {"batch_size": 8, "episodes_in_flight": 8, "async_ratio": 1, "max_turns": 5, "max_new_tokens": 1,
                    "filters": ["env_noise"], "observation_template": "{observation} :", "env_threads": True,
                    "generate_timeout_s": 60, "env_timeout_s": 30},
        "algorithm": {"loss": "reinforce"},
        "checkpoint": {"every": 1, "keep": 2},
        "eval": {"episodes": 2},
        "metrics": {"tensorboard": False, "plot": False, "progress": False},
        "cluster": cluster,
    }


def _session_processes(temp_dir: str) -> list[psutil.Process]:
    """Live processes whose command line names the session directory (gcs_server, raylet, ...)."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and temp_dir in " ".join(p.info["cmdline"] or []):
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def _wait_gone(procs: list[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout_s
    alive = procs
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if _alive(p)]
        time.sleep(0.2)
    return alive


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:  # exited between the two calls
        return False


@pytest.mark.slow
@pytest.mark.skipif(not HAS_RAY, reason="ray is not installed (pip install 'ale-roll[ray]')")
@pytest.mark.skipif(not HAS_ENVS, reason="ale-rock (environments) is not installed")
def test_rl_run_with_roles_as_ray_actors_syncs_verified_weights_and_leaves_no_process(tmp_path: Path) -> None:
    from ale_roll.cluster import build_ray_cluster
    from ale_roll.engines.weight_sync import ProbeCheck, dedupe_tied, fingerprint
    from ale_roll.metrics import read_jsonl
    from ale_roll.trainer.controller import Controller

    temp_dir = tempfile.mkdtemp(prefix="ar-", dir="/tmp")  # short: Ray's socket paths live under it
    out = tmp_path / "run"
    cfg = build_config(_raw(out, mode="ray", address="local", num_cpus=2, temp_dir=temp_dir, num_rollout_workers=2,
                            train={"num_cpus": 0.5}, inference={"num_cpus": 0.5}, rollout_worker={"num_cpus": 0.25},
                            start_timeout_s=240, call_timeout_s=120))
    me = psutil.Process()
    try:
        with build_ray_cluster(cfg) as cluster:
            spawned = me.children(recursive=True)
            assert spawned and _session_processes(temp_dir), "a local Ray instance runs for the cluster"
            assert os.getpid() not in cluster.pids.values()
            assert len(set(cluster.pids.values())) == 4  # train, inference, 2 rollout workers: separate processes

            summary = Controller(cfg, policy=cluster.policy, env_factory=cluster.env_factory).run()

            assert summary["step"] == 2
            assert cluster.policy.train.policy_version == 2
            assert cluster.inference_version() == 2  # asked from the actor, not the proxy's cache
            update = cluster.last_weight_update()
            assert update.version == 2
            assert update.fingerprint == fingerprint(dedupe_tied(cluster.policy.train.export_weights()))
            # The loaded weights are in use: the inference actor's logprobs match the train actor's.
            prompt = tuple(cluster.policy.tokenizer.encode("guess 10 : higher :"))
            assert ProbeCheck(cluster.policy.train, prompt, max_tokens=4, tolerance=1e-3).run(
                cluster.policy.inference) <= 1e-3
            stats = cluster.rollout_stats()
            assert all(s["created"] > 0 for s in stats), stats  # both workers served episodes
            # Finished episodes close their env; only episodes cancelled at the end of training
            # (at most the in-flight ones, while creating their env) may leave one open.
            assert sum(s["created"] for s in stats) > 2 * cfg.rollout.episodes_in_flight, stats
            assert sum(s["open"] for s in stats) <= cfg.rollout.episodes_in_flight, stats
            # What the SFT warm-up does to the optimizer works on the actor's optimizer.
            cluster.policy.train.set_lr(1e-3)
            assert cluster.policy.train.get_lr() == 1e-3  # read back from the actor's optimizer
            cluster.policy.train.reset_optimizer()
            spawned += [p for p in me.children(recursive=True) if p not in spawned]

        records = [r for r in read_jsonl(out / "metrics.jsonl") if "reward/mean" in r]
        assert [r["policy_version"] for r in records] == [1.0, 2.0]
        assert all("train/grad_norm" in r and "train/loss" in r for r in records), records[0].keys()
        assert (out / "checkpoints" / "step-000002" / "engine").is_dir()  # written by the train actor
        assert "eval/success" in summary["final"]

        leftover = _wait_gone(spawned, timeout_s=60) + _session_processes(temp_dir)
        assert not leftover, [(p.pid, p.name()) for p in leftover]
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.skipif(not HAS_RAY, reason="ray is not installed (pip install 'ale-roll[ray]')")
@pytest.mark.skipif(not HAS_ENVS, reason="ale-rock (environments) is not installed")
def test_roles_land_on_the_nodes_their_custom_resources_pin_and_a_run_completes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two Ray nodes on this machine (a head and a second raylet), each declaring its own custom
    resource; the run joins them by address, as it would a real multi-machine cluster."""
    from ale_roll.cluster import build_ray_cluster
    from ale_roll.trainer.controller import Controller
    from ray.cluster_utils import Cluster

    temp_dir = tempfile.mkdtemp(prefix="ap-", dir="/tmp")  # short: Ray's socket paths live under it
    # Ray also writes the cluster's address under $RAY_TMPDIR (/tmp/ray): keep that private too, so
    # no other Ray run on this machine (`address: auto`) finds this cluster.
    monkeypatch.setenv("RAY_TMPDIR", temp_dir)
    os.mkdir(os.path.join(temp_dir, "ray"))  # Ray writes the file there but makes the dir only for its default
    nodes = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": {"learner": 1}, "temp_dir": temp_dir, "include_dashboard": False})
    try:
        rollout_node = nodes.add_node(num_cpus=1, resources={"rollout": 2})
        nodes.wait_for_nodes()
        raw = _raw(tmp_path / "run", mode="ray", address=nodes.address, num_rollout_workers=1,
                   train={"num_cpus": 0.5, "resources": {"learner": 1}},
                   inference={"num_cpus": 0.25, "resources": {"rollout": 1}},
                   rollout_worker={"num_cpus": 0.25, "resources": {"rollout": 1}},
                   start_timeout_s=240, call_timeout_s=120)
        raw.update(iterations=1, eval={"episodes": 1}, checkpoint={"every": 0})
        cfg = build_config(raw)
        with build_ray_cluster(cfg) as cluster:
            head_id, rollout_id = nodes.head_node.node_id, rollout_node.node_id
            assert head_id != rollout_id
            assert cluster.nodes == {"train": head_id, "inference": rollout_id, "rollout_worker_0": rollout_id}, \
                cluster.nodes
            summary = Controller(cfg, policy=cluster.policy, env_factory=cluster.env_factory).run()
            assert summary["step"] == 1
            assert cluster.inference_version() == 1  # weights crossed from the head node's actor
            assert all(s["created"] > 0 for s in cluster.rollout_stats())
    finally:
        nodes.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)


def test_custom_resource_pins_are_checked(tmp_path: Path) -> None:
    cfg = build_config(_raw(tmp_path, train={"resources": {"learner": 1}}))
    assert cfg.cluster.train.resources == {"learner": 1.0}
    assert cfg.cluster.inference.resources == {}
    # 0 would pin nothing (Ray ignores it): refused, naming the key.
    with pytest.raises(ConfigError, match=r"cluster.train.resources"):
        build_config(_raw(tmp_path, train={"resources": {"learner": 0}}))


def test_cluster_mode_ray_without_ray_is_a_config_error_naming_the_key(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    local = build_config(_raw(tmp_path))
    assert local.cluster.mode == "local"
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(ConfigError, match=r"cluster\.mode=ray needs Ray: pip install 'ale-roll\[ray\]'"):
        build_config(_raw(tmp_path, mode="ray"))
    # A config validated where Ray was importable still fails clearly when the cluster is built.
    from ale_roll.cluster import build_ray_cluster

    cfg = local.model_copy(update={"cluster": local.cluster.model_copy(update={"mode": "ray"})})
    with pytest.raises(ConfigError, match=r"cluster\.mode=ray needs Ray"):
        build_ray_cluster(cfg)


def test_cluster_keys_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'cluster.num_rollout_worker'.*did you mean 'cluster.num_rollout_workers'"):
        build_config(_raw(tmp_path, num_rollout_worker=2))
    with pytest.raises(ConfigError, match=r"cluster.train.num_cpus"):
        build_config(_raw(tmp_path, train={"num_cpus": -1}))


def test_local_mode_never_imports_ray(tmp_path: Path) -> None:
    code = ("import sys, json; from ale_roll.config import build_config; import ale_roll.trainer.controller, ale_roll.cli; "
            "import ale_roll.cluster; build_config(json.loads(sys.argv[1])); "
            "assert 'ray' not in sys.modules, 'ray imported'")
    import json

    run = subprocess.run([sys.executable, "-c", code, json.dumps(_raw(tmp_path))], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]


def test_loss_metrics_filled_in_a_pickled_copy_travel_back(tmp_path: Path) -> None:
    """The pieces of the train proxy that do not need Ray: loss metrics filled in a pickled copy."""
    import pickle

    from ale_roll.cluster.actors import closure_dicts

    captured: dict[str, float] = {}

    def loss_fn(x: float) -> float:
        captured["loss"] = x
        return x

    remote_copy = pickle.loads(pickle.dumps(closure_dicts(loss_fn)))  # what the actor would send back
    assert remote_copy == [{}]
    remote_copy[0]["loss"] = 1.5
    for mine, theirs in zip(closure_dicts(loss_fn), remote_copy, strict=True):
        mine.update(theirs)
    assert captured == {"loss": 1.5}
