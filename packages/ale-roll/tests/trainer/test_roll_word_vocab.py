"""word_vocab entries that the pre-tokenizer would split are one token: a tool call's fixed JSON
frame costs a tiny model a few tokens, the arguments' words stay one token each, and the text the
model produces parses as a tool call and re-renders to the same ids."""

from __future__ import annotations

from pathlib import Path

from ale_rock.proxy.prompt import render_call
from ale_rock.proxy.toolcalls import parse_tool_calls
from ale_roll.trainer.setup import SPECIAL_TOKENS, word_tokenizer
from transformers import AutoTokenizer

FRAME = ['<tool_call>', '{"name": "shell", "arguments": {"command": "python3 lock.py', '"}}', '</tool_call>']
WORDS = [str(d) for d in range(10)] + ["higher", "lower", "correct", ":", *FRAME, "<tool_response>", "</tool_response>"]


def test_plain_words_stay_one_token_each() -> None:
    tok = word_tokenizer(["start", "higher", ":", "7"])
    assert tok.encode("start : 7 higher", add_special_tokens=False) == [4, 6, 7, 5]  # specials 0-2, [UNK] 3
    assert tok.encode("start lock.py", add_special_tokens=False) == [4, 3, 3, 3]  # not an entry: split, unknown


def test_tool_call_frame_round_trips(tmp_path: Path) -> None:
    tok = word_tokenizer(WORDS)
    text = '<tool_call>\n{"name": "shell", "arguments": {"command": "python3 lock.py 4 0 9"}}\n</tool_call>'
    ids = tok.encode(text, add_special_tokens=False)
    vocab = tok.get_vocab()
    assert ids == [vocab[FRAME[0]], vocab[FRAME[1]], vocab["4"], vocab["0"], vocab["9"], vocab[FRAME[2]], vocab[FRAME[3]]]
    assert max(ids) < len(tok) == len(SPECIAL_TOKENS) + 1 + len(WORDS)  # phrases keep their vocabulary ids
    content, calls = parse_tool_calls(tok.decode(ids), "c")
    assert content is None and len(calls) == 1 and calls[0]["function"]["name"] == "shell"
    assert calls[0]["function"]["arguments"] == '{"command": "python3 lock.py 4 0 9 "}'
    # The proxy renders the call back into the next prompt as the very ids the model sampled.
    assert tok.encode(render_call(calls[0]), add_special_tokens=False) == ids
    tok.save_pretrained(tmp_path)
    assert AutoTokenizer.from_pretrained(tmp_path).encode(text, add_special_tokens=False) == ids


def test_unknown_runs_are_one_token_each(tmp_path: Path) -> None:
    tok = word_tokenizer(WORDS, unknown_runs=True)
    vocab = tok.get_vocab()
    prose = "You are an agent. It has 3 digits, each 0-9; answers: higher, lower or correct."
    pieces = tok.convert_ids_to_tokens(tok.encode(prose, add_special_tokens=False))
    # Only whole entries survive; each stretch of other words and punctuation between them is one [UNK].
    assert pieces == ["[UNK]", "3", "[UNK]", "0", "[UNK]", "9", "[UNK]", ":", "higher", "[UNK]", "lower", "[UNK]",
                      "correct", "[UNK]"]
    # An entry glued to other characters is not that entry ("highers", "7a"), but punctuation is its own token.
    assert tok.convert_ids_to_tokens(tok.encode("highers 7a 7", add_special_tokens=False)) == ["[UNK]", "7"]
    # The tool call is the same 7 tokens as without runs, and parses and re-renders to them.
    text = '<tool_call>\n{"name": "shell", "arguments": {"command": "python3 lock.py 4 0 9"}}\n</tool_call>'
    ids = tok.encode(text, add_special_tokens=False)
    assert ids == word_tokenizer(WORDS).encode(text, add_special_tokens=False)
    content, calls = parse_tool_calls(tok.decode(ids), "c")
    assert tok.encode(render_call(calls[0]), add_special_tokens=False) == ids
    # A ChatML conversation keeps its structure: the specials stay, the role and the prose after it are one run.
    chat = tok.apply_chat_template([{"role": "system", "content": "Be careful: inspect before you change."},
                                    {"role": "user", "content": "<tool_response>\nhigher lower correct\n</tool_response>"}],
                                   tokenize=False, add_generation_prompt=True)
    assert tok.convert_ids_to_tokens(tok.encode(chat, add_special_tokens=False)) == [
        "<|im_start|>", "[UNK]", ":", "[UNK]", "<|im_end|>", "<|im_start|>", "[UNK]", "<tool_response>",
        "higher", "lower", "correct", "</tool_response>", "<|im_end|>", "<|im_start|>", "[UNK]"]
    assert vocab["[UNK]"] == 3
    tok.save_pretrained(tmp_path)
    assert AutoTokenizer.from_pretrained(tmp_path).encode(chat, add_special_tokens=False) == tok.encode(
        chat, add_special_tokens=False)
