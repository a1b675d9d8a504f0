"""GEM-mode episodes with a real tiny model, the real EnvService, and an env that dies mid-episode."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from ale_roll.buffer.sample_buffer import BufferConfig, FrontierEntry, SampleBuffer
from ale_roll.config import build_config
from ale_roll.engines.base import Generation, SamplingParams
from ale_roll.engines.hf_engine import HFInferenceEngine
from ale_roll.models import load_tokenizer
from ale_roll.rollout import BatchingGenerator, ChatFormat, EpisodeRunner, GenerationTimeout, RolloutScheduler
from ale_roll.trainer.setup import prepare_model_dir
from ale_roll.types import flatten_trajectory, is_prefix_consistent

rock_envs = pytest.importorskip("ale_rock.envs", reason="ale-rock (environments) is not installed")
WORDS = [str(i) for i in range(1, 21)] + ["higher", "lower", "wrong", "Invalid", "Correct", "guess", ".", ";"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ep")
    cfg = build_config({"output_dir": str(out), "model": {
        "tiny": {"arch": "llama", "vocab_size": 300, "hidden_size": 64, "num_layers": 1, "num_heads": 2,
                 "num_kv_heads": 2, "head_dim": 32, "intermediate_size": 128, "max_position_embeddings": 256},
        "word_vocab": WORDS}})
    return prepare_model_dir(cfg)


class DiesMidEpisode:
    """Wraps a gem env; the first episode of each listed seed loses its sandbox at the 2nd step."""

    failed: set[int] = set()

    def __init__(self, inner: Any, seeds: set[int]) -> None:
        self.inner, self.seeds, self.seed, self.steps = inner, seeds, None, 0

    def reset(self, seed: int | None = None) -> Any:
        self.seed, self.steps = seed, 0
        return self.inner.reset(seed)

    def step(self, action: str) -> Any:
        self.steps += 1
        if self.seed in self.seeds and self.seed not in self.failed and self.steps == 2:
            self.failed.add(self.seed)
            raise rock_envs.SandboxLost("sandbox killed mid-episode")
        return self.inner.step(action)

    def close(self) -> None:
        self.inner.close()


def _runner(model_dir: Path, env_factory: Any) -> tuple[EpisodeRunner, BatchingGenerator]:
    tok = load_tokenizer(model_dir)
    gen = BatchingGenerator(HFInferenceEngine.from_pretrained(model_dir), max_batch=16, window_s=0.002, timeout_s=60)
    fmt = ChatFormat(tok, observation_template="{observation} :")
    return EpisodeRunner(env_factory, gen, fmt, SamplingParams(max_tokens=1), max_turns=5, env_timeout_s=30), gen


def test_episodes_through_the_env_service_are_token_exact(model_dir: Path) -> None:
    from ale_rock.envs.server import EnvServerConfig, serve_env_service

    server = serve_env_service(EnvServerConfig(port=0))
    try:
        import grpc

        channel = grpc.insecure_channel(server.address)
        runner, gen = _runner(model_dir, lambda: rock_envs.make("game:GuessTheNumber-v0", address=server.address,
                                                                channel=channel, rpc_timeout_s=30))

        async def go() -> list[Any]:
            try:
                return list(await asyncio.gather(*(runner.run(seed=s, initial_state_id=f"s{s}") for s in range(6))))
            finally:
                await gen.close()

        trajs = asyncio.run(go())
        channel.close()
    finally:
        server.stop()
    fmt = runner.fmt
    for traj in trajs:
        assert 1 <= len(traj.turns) <= 5 and traj.policy_version == 0
        assert is_prefix_consistent(traj)
        context = list(traj.turns[0].prompt_ids)
        for turn in traj.turns:
            assert len(turn.completion_ids) == 1 and len(turn.logprobs) == 1 and turn.logprobs[0] <= 0
            if turn.observation_text:  # observation ids are the template's encoding of exactly that text
                assert turn.observation_ids == fmt.observation(turn.observation_text)
            context += turn.completion_ids + turn.observation_ids
        flat = flatten_trajectory(traj)
        assert flat.input_ids == context[:len(flat.input_ids)]
        assert sum(flat.loss_mask) == len(traj.turns)
        assert traj.reward == traj.metadata["env_reward"]


def test_env_dying_mid_episode_is_resampled(model_dir: Path) -> None:
    DiesMidEpisode.failed = set()
    runner, gen = _runner(model_dir, lambda: DiesMidEpisode(rock_envs.make("game:GuessTheNumber-v0"), {0, 2}))
    buffer = SampleBuffer(BufferConfig(async_ratio=1))

    async def episode(entry: FrontierEntry) -> Any:
        return await runner.run(seed=entry.seed, initial_state_id=entry.initial_state_id,
                                episode_id=entry.episode_id)

    async def go() -> Any:
        sched = RolloutScheduler(buffer, episode, batch_size=4, episodes_in_flight=4, async_ratio=1)
        task = asyncio.create_task(sched.run())
        try:
            return await buffer.aget_batch(4, timeout=120), sched
        finally:
            sched.stop()
            await task
            await gen.close()

    batch, sched = asyncio.run(go())
    by_seed = {t.seed: t for t in batch}
    # Seeds 0 and 2 may have finished before their second step (a lucky first guess); any that died were retried.
    assert DiesMidEpisode.failed  # (both first guesses right has probability < 0.3%)
    assert sched.stats.rejected["rollout_exception"] == len(DiesMidEpisode.failed)
    for seed in DiesMidEpisode.failed:
        if seed in by_seed:
            assert by_seed[seed].metadata["attempts"] == 2
    assert buffer.dropped.total() == 0


class SlowEngine:
    policy_version = 0

    def __init__(self) -> None:
        self.aborted: list[str] = []

    def generate(self, prompts: Any, params: SamplingParams, request_ids: Any = None) -> list[Generation]:
        time.sleep(0.5)
        return [Generation(r, [1], [0.0], "stop", 0) for r in request_ids]

    def abort(self, request_id: str) -> bool:
        self.aborted.append(request_id)
        return True


def test_generation_has_a_timeout_and_aborts_the_request() -> None:
    engine = SlowEngine()
    gen = BatchingGenerator(engine, timeout_s=0.05)  # type: ignore[arg-type]

    async def go() -> None:
        try:
            with pytest.raises(GenerationTimeout):
                await gen.generate([1, 2], SamplingParams(max_tokens=1))
        finally:
            await gen.close()

    asyncio.run(go())
    assert len(engine.aborted) == 1
