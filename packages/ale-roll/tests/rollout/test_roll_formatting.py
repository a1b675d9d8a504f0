"""ChatFormat: observation rewrite rules and the encode cache (a word-level tokenizer, no model)."""

from __future__ import annotations

from ale_roll.rollout import ChatFormat
from ale_roll.trainer.setup import word_tokenizer

RULES = [(r"^I picked.*$", "start"), (r"^\d+ is wrong; the number is (higher|lower)\..*$", r"\1")]


def test_rewrite_rules_shorten_observations_in_order() -> None:
    tok = word_tokenizer(["start", "higher", "lower", ":", "7"])
    fmt = ChatFormat(tok, observation_template="{observation} :", rewrite=RULES)
    assert tok.convert_ids_to_tokens(fmt.initial("I picked a number between 1 and 20.")) == ["start", ":"]
    ids = fmt.observation("7 is wrong; the number is lower. 3 guesses left.")
    assert tok.convert_ids_to_tokens(ids) == ["lower", ":"]
    assert fmt.observation_text("unmatched text") == "unmatched text"  # no rule, no change
    # Without rules the prose reaches the model as [UNK]s — what the rules are for.
    plain = ChatFormat(tok, observation_template="{observation} :")
    assert tok.unk_token_id in plain.observation("7 is wrong; the number is lower. 3 guesses left.")


def test_cached_encodings_are_not_shared_lists() -> None:
    fmt = ChatFormat(word_tokenizer(["lower", ":"]), observation_template="{observation} :")
    first = fmt.observation("lower")
    first.append(99)  # a caller extending its context must not corrupt the cache
    assert fmt.observation("lower") == first[:-1]


def test_action_texts_are_decoded_once_per_completion() -> None:
    tok = word_tokenizer(["7", "lower", ":"])
    calls: list[list[int]] = []
    decode = tok.decode

    def counting(ids: list[int], **kw: object) -> str:
        calls.append(list(ids))
        return decode(ids, **kw)  # type: ignore[arg-type]

    tok.decode = counting  # type: ignore[method-assign]
    fmt = ChatFormat(tok)
    seven = tok.convert_tokens_to_ids(["7"]) + [tok.eos_token_id]
    assert [fmt.action_text(seven) for _ in range(3)] == ["7"] * 3  # EOS dropped, as before
    assert calls == [seven]
    long = tok.convert_tokens_to_ids(["lower"]) * 40  # long completions are decoded every time (not kept)
    assert fmt.action_text(long) == fmt.action_text(long) == " ".join(["lower"] * 40)
    assert len(calls) == 3
