"""The lock teacher as a token-level inference engine: what the agent-native job's synthesis serves.

The agent-native job's SFT data must be in the agent's own chat format, token for token: the
prompts ale-flow's loop sends through the ModelProxy, rendered by the InferenceService's chat
template, and the completions as the policy would sample them. So the teacher is not an ale-flow
``Model`` (as in the GEM job's synthesis) but an ``InferenceEngine`` behind a real InferenceService:
the agent, the proxy, the sandboxes and the verifier are the ones training uses, and the proxy's
records of the teacher's episodes are the demos (``ale_roll.rollout.agent_native.records_to_turns``).

The engine is stateless: each prompt holds the whole episode so far (the tool calls the teacher
made and the lock's answers), from which it redoes the per-digit binary search and answers the next
guess as a tool call in the policy's tool-call frame. With a seeded probability per guess it slips
(one digit random), so some episodes fail and the verifier's filter has work to do.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass
from typing import Any

from ale_rock.tasks.lock_family import BASE

CALL = '<tool_call>\n{"name": "shell", "arguments": {"command": "python3 lock.py GUESS"}}\n</tool_call>'
"""The tool call the policy makes (the word vocabulary holds its frame as four tokens)."""
FRAME = ['<tool_call>', '{"name": "shell", "arguments": {"command": "python3 lock.py', '"}}', '</tool_call>']
"""The tool-call frame as word-vocabulary entries (each one token)."""
FEEDBACK = ["higher", "lower", "correct", "open", "closed", "invalid"]
"""The lock's answers (each one token)."""

_GUESS = re.compile(r"lock\.py((?:\s+\d)+)")
_ANSWER = re.compile(r"<tool_response>\s*((?:\S+\s*)+?)\s*</tool_response>")


def lock_vocab(extra: list[str] | None = None) -> list[str]:
    """The word vocabulary of the agent-native lock policy: digits, the lock's answers, the tool-call
    frame, the tool-response tags and the chat roles; everything else in a prompt is ``[UNK]``."""
    words = [str(d) for d in range(BASE)] + FEEDBACK + FRAME + ["<tool_response>", "</tool_response>",
                                                               "system", "user", "assistant", "tool", ":"]
    return words + [w for w in (extra or []) if w not in words]


def episode_so_far(text: str) -> list[tuple[list[int], list[str]]]:
    """(guess, answer words) pairs in a decoded prompt, in order (the answer ``[]`` while pending)."""
    guesses = [[int(d) for d in m.group(1).split()] for m in _GUESS.finditer(text)]
    answers = [m.group(1).split() for m in _ANSWER.finditer(text)]
    return [(g, answers[i] if i < len(answers) else []) for i, g in enumerate(guesses)]


def next_guess(history: list[tuple[list[int], list[str]]], digits: int, rng: random.Random, slip: float) -> list[int]:
    """DigitLock's per-digit binary search over the answers so far (``expert_guess``); a slip
    replaces one digit at random. Pairs without a full answer (an invalid guess) are skipped."""
    from ale_rock.envs.games.digit_lock import expert_guess

    guess = expert_guess([(g, a) for g, a in history if len(g) == digits and len(a) == digits], digits, BASE)
    if rng.random() < slip:
        guess[rng.randrange(digits)] = rng.randrange(BASE)
    return guess


@dataclass
class LockTeacherEngine:
    """An ``InferenceEngine`` that plays the lock as the teacher (see the module docstring)."""

    tokenizer: Any
    digits: int = 3
    max_turns: int = 5
    slip: float = 0.08
    """Per-guess probability of one wrong digit (seeded by the prompt: the same prompt, the same reply)."""
    version: int = 0
    max_model_len = 0  # no length check of its own

    @property
    def policy_version(self) -> int:
        return self.version

    def reply(self, prompt_ids: list[int]) -> str:
        """The teacher's next message for a prompt."""
        text = self.tokenizer.decode(list(prompt_ids))
        history = episode_so_far(text)
        last = history[-1][1] if history else []
        if last[:1] == ["open"]:
            return "open"
        if len(history) >= self.max_turns or last[:1] == ["closed"]:
            return "closed"
        rng = random.Random(hashlib.sha256(str(list(prompt_ids)).encode()).digest())
        return CALL.replace("GUESS", " ".join(map(str, next_guess(history, self.digits, rng, self.slip))))

    def generate(self, prompts: Any, params: Any, request_ids: Any = None) -> list[Any]:
        from ale_roll.engines.base import Generation
        from ale_roll.types import StopReason

        out = []
        for i, p in enumerate(prompts):
            ids = [*self.tokenizer.encode(self.reply(list(p)), add_special_tokens=False), self.tokenizer.eos_token_id]
            out.append(Generation(request_ids[i] if request_ids else f"r{i}", ids, [0.0] * len(ids), StopReason.STOP,
                                  self.version, list(p)))
        return out

    def abort(self, request_id: str) -> bool:
        return False

    def close(self) -> None:
        """Nothing to release."""

    def update_weights(self, weights: Any, version: int) -> Any:
        raise NotImplementedError("the teacher has no weights")
