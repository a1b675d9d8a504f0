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


class CountingGenerator:
    """A deterministic policy (the guess is a function of the context), one request per prompt."""

    policy_version = 4

    def __init__(self, tokenizer: Any) -> None:
        self.tok, self.singles = tokenizer, 0
        self.fail_call = 0
        """The n-th request (1-based) fails; 0: none."""

    def _one(self, prompt: list[int]) -> Generation:
        ids = self.tok.encode(str(1 + (sum(prompt) * 7 + len(prompt)) % 20), add_special_tokens=False)
        return Generation("r", ids, [-0.5] * len(ids), "stop", self.policy_version)

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Generation:
        self.singles += 1
        if self.singles == self.fail_call:
            raise ConnectionError("inference server went away")
        return self._one(prompt_ids)


class CountingBatchGenerator(CountingGenerator):
    """The same policy taking many prompts per request; counts the requests' sizes."""

    def __init__(self, tokenizer: Any) -> None:
        super().__init__(tokenizer)
        self.calls: list[int] = []

    async def generate_many(self, prompts: Any, params: SamplingParams) -> list[Generation]:
        self.calls.append(len(prompts))
        return [self._one(p) for p in prompts]


def test_run_batch_plays_like_run_in_lock_step(model_dir: Path) -> None:
    """Many in-process episodes in lock-step: one generation per turn for all, the same trajectories as
    one `run` each; an env dying or a failed request ends only its own episode."""
    from ale_roll.rollout.episode import EpisodeSpec

    tok = load_tokenizer(model_dir)
    fmt = ChatFormat(tok, observation_template="{observation} :")
    DiesMidEpisode.failed = set()

    def runner(gen: Any) -> EpisodeRunner:
        return EpisodeRunner(lambda: DiesMidEpisode(rock_envs.make("game:GuessTheNumber-v0"), {3}), gen, fmt,
                             SamplingParams(max_tokens=1), max_turns=5, env_threads=False)

    specs = [EpisodeSpec(seed, f"s{seed}", f"g{seed // 4}", f"e{seed}") for seed in range(8)]
    many, single = CountingBatchGenerator(tok), CountingGenerator(tok)
    batched_runner, single_runner = runner(many), runner(single)
    got = asyncio.run(batched_runner.run_batch(specs))
    DiesMidEpisode.failed = set()
    want = asyncio.run(single_runner.run_batch(specs))  # fallback: one `run` each, concurrent `generate`s

    assert isinstance(got[3], rock_envs.SandboxLost) and isinstance(want[3], rock_envs.SandboxLost)
    assert many.calls and many.calls[0] == 8 and many.calls == sorted(many.calls, reverse=True)
    assert len(many.calls) <= 5 and single.singles == sum(many.calls)
    for spec, a, b in zip(specs, got, want, strict=True):
        if spec.seed == 3:
            continue
        assert not isinstance(a, BaseException) and not isinstance(b, BaseException)
        assert a.to_dict() == b.to_dict()
        assert (a.episode_id, a.group_id, a.initial_state_id, a.policy_version) == (spec.episode_id, spec.group_id,
                                                                                    spec.initial_state_id, 4)
        assert is_prefix_consistent(a) and a.reward == a.metadata["env_reward"]
    times, want_times = batched_runner.times.take(), single_runner.times.take()
    assert times["rollout/episodes"] == want_times["rollout/episodes"] == 7
    assert times["rollout/tokens"] == want_times["rollout/tokens"]  # the dead episode's turns count in both

    # A request that fails ends its episode only (the 6th of the first turn: seed 5's).
    flaky = CountingGenerator(tok)
    flaky.fail_call = 6
    DiesMidEpisode.failed = set()
    out = asyncio.run(runner(flaky).run_batch(specs))
    assert isinstance(out[5], ConnectionError)
    assert sum(isinstance(t, BaseException) for t in out) == 2  # seed 3's env and seed 5's request


class EchoEngine:
    """Answers every prompt with its last token + 1; records the size of every engine call."""

    policy_version = 0

    def __init__(self, delay_s: float = 0.0) -> None:
        self.calls: list[int] = []
        self.aborted: list[str] = []
        self.delay_s = delay_s

    def generate(self, prompts: Any, params: SamplingParams, request_ids: Any = None) -> list[Generation]:
        self.calls.append(len(prompts))
        time.sleep(self.delay_s)
        return [Generation(r, [p[-1] + 1], [-0.1], "stop", 0, list(p)) for r, p in zip(request_ids, prompts, strict=True)]

    def abort(self, request_id: str) -> bool:
        self.aborted.append(request_id)
        return True


def test_generate_many_is_one_engine_call_and_has_a_timeout() -> None:
    engine, slow = EchoEngine(), EchoEngine(delay_s=0.2)
    gen = BatchingGenerator(engine, max_batch=64)  # type: ignore[arg-type]
    slow_gen = BatchingGenerator(slow, timeout_s=0.05)  # type: ignore[arg-type]

    async def go() -> list[Generation]:
        try:
            out = await gen.generate_many([[k, k] for k in range(40)], SamplingParams(max_tokens=1))
            with pytest.raises(GenerationTimeout):
                await slow_gen.generate_many([[1], [2]], SamplingParams(max_tokens=1))
            return out
        finally:
            await gen.close()
            await slow_gen.close()

    out = asyncio.run(go())
    assert [g.token_ids for g in out] == [[k + 1] for k in range(40)]  # in order, each its own prompt's
    assert engine.calls == [40]  # queued together: no request went out alone ahead of the rest
    assert len(slow.aborted) == 2
