"""Append-only context formatting for GEM mode: token ids are never re-derived from text.

The context of turn k+1 is *exactly* the token ids of turn k's context, followed by the ids the
engine generated, followed by the ids of the observation:

    prompt_1   = encode(system_prompt + template(obs_0))
    prompt_k+1 = prompt_k + completion_k + encode(template(obs_k))

Only new text (an observation) is ever tokenized, and each piece is tokenized on its own; the
completion ids the engine sampled are appended verbatim (including a stop token if it emitted
one). Tokenizing the whole transcript again could merge tokens across a boundary (BPE) and give
ids the policy never produced — the exact trajectory is what the losses need. The template
therefore must contain everything the model needs between its completion and its next turn
(e.g. a ChatML `<|im_end|>\\n<|im_start|>user\\n{observation}<|im_end|>\\n<|im_start|>assistant\\n`).
`rewrite` ((regex, replacement) pairs, applied in order with `re.sub`) shortens an observation
before it is templated: for a tiny word-level model the game's prose is noise — every word
outside its vocabulary becomes `[UNK]`, and "4 guesses left" puts numbers that are not guesses
into the context. Encodings are cached by text (observations repeat), so only new text costs a
tokenizer call; decodings of short completions (an action of a few tokens, as in games and
single-turn answers) are cached by ids the same way: a synchronous step decodes hundreds of them
on the event loop, and a tokenizer's `decode` costs ~50 µs of Python each.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

_DECODE_CACHE_TOKENS = 16
"""Completions up to this many tokens have their action text cached."""


class Tokenizer(Protocol):
    """The two tokenizer methods formatting needs (a transformers tokenizer has both)."""

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = ...) -> str: ...


class ChatFormat:
    """Builds the first prompt and the observation ids appended after every completion."""

    def __init__(self, tokenizer: Any, system_prompt: str = "", observation_template: str = "{observation}\n",
                 rewrite: Sequence[tuple[str, str]] = ()) -> None:
        if "{observation}" not in observation_template:
            raise ValueError("observation_template must contain '{observation}'")
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        self.template = observation_template
        self.rewrite = [(re.compile(pattern), repl) for pattern, repl in rewrite]
        self._cache: dict[str, list[int]] = {}
        self._decoded: dict[tuple[int, ...], str] = {}

    def _encode(self, text: str) -> list[int]:
        ids = self._cache.get(text)
        if ids is None:
            ids = list(self.tokenizer.encode(text, add_special_tokens=False))
            if len(self._cache) < 100_000:  # bounded: free-form observations rarely repeat
                self._cache[text] = ids
        return list(ids)

    def observation_text(self, observation: str) -> str:
        """The observation after the `rewrite` rules (what the model reads)."""
        for pattern, repl in self.rewrite:
            observation = pattern.sub(repl, observation)
        return observation

    def initial(self, observation: str) -> list[int]:
        """Token ids of the first prompt."""
        return self._encode(self.system_prompt + self.template.format(observation=self.observation_text(observation)))

    def observation(self, observation: str) -> list[int]:
        """Token ids appended to the context after a completion."""
        return self._encode(self.template.format(observation=self.observation_text(observation)))

    def action_text(self, completion_ids: Sequence[int]) -> str:
        """The text the environment receives (special tokens such as EOS dropped)."""
        if len(completion_ids) > _DECODE_CACHE_TOKENS:  # long free-form completions rarely repeat
            return str(self.tokenizer.decode(list(completion_ids), skip_special_tokens=True)).strip()
        key = tuple(completion_ids)
        text = self._decoded.get(key)
        if text is None:
            text = str(self.tokenizer.decode(list(completion_ids), skip_special_tokens=True)).strip()
            if len(self._decoded) < 100_000:
                self._decoded[key] = text
        return text

    def encode_action(self, text: str) -> list[int]:
        """Ids of an action given as text — only for demonstrations (SFT data), never for sampled turns."""
        return self._encode(text)
