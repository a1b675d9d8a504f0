"""Stateful tool-use environments: tool calls as JSON, the final state decides the reward."""

from __future__ import annotations

import json
from typing import Any

from ale_rock.envs import make
from ale_rock.envs.tools.calls import parse_tool_call


def call(tool: str, **arguments: Any) -> str:
    return json.dumps({"name": tool, "arguments": arguments})


def test_tool_call_shapes_parse() -> None:
    assert parse_tool_call('<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>').arguments == {
        "x": 1
    }
    openai_shape = {"type": "function", "function": {"name": "a", "arguments": '{"x": 2}'}}
    assert parse_tool_call(json.dumps(openai_shape)).arguments == {"x": 2}
    assert parse_tool_call(json.dumps({"tool_calls": [openai_shape]})).name == "a"


def solve_filesystem(env: Any) -> list[tuple]:
    listing = env.step(call("list_dir", path="/srv/app"))[0].split("\n")
    logs = sorted(n for n in listing if n.endswith(".log"))
    results = [env.step(call("move", src=f"/srv/app/{n}", dst="/archive")) for n in logs]
    results.append(env.step(call("delete", path="/srv/app/tmp")))
    results.append(
        env.step(call("write_file", path="/archive/INDEX", content="".join(n + "\n" for n in logs)))
    )
    return results


def test_filesystem_solved_by_tool_calls() -> None:
    env = make("tool:FileSystem-v0")
    obs, info = env.reset(seed=4)
    assert "submit" in info["tools"] and {t["function"]["name"] for t in env.tools} >= {"move", "delete"}
    assert all(r[1:3] == (0.0, False) for r in solve_filesystem(env))
    obs, reward, term, trunc, info = env.step(call("submit"))
    assert (reward, term, info["success"]) == (1.0, True, True)


def test_filesystem_wrong_final_state_scores_zero_and_errors_are_observations() -> None:
    env = make("tool:FileSystem-v0")
    env.reset(seed=4)
    obs, r, term, trunc, info = env.step("move everything please")
    assert info["error"] == "malformed_tool_call" and obs.startswith("Error") and not term
    obs, r, term, trunc, info = env.step(call("read_file", path="/nope"))
    assert info["error"] == "tool_failed" and "no such file" in obs
    obs, r, term, trunc, info = env.step(call("frobnicate"))
    assert info["error"] == "unknown_tool"
    obs, r, term, trunc, info = env.step(call("move", source="/a"))
    assert info["error"] == "bad_arguments"
    solve_filesystem(env)
    env.step(
        call("delete", path="/srv/app/" + next(p.split("/")[-1] for p in env.files if p.endswith(".py")))
    )
    obs, reward, term, trunc, info = env.step(call("submit"))
    assert reward == 0.0 and term and info["wrong_paths"]


def _billing_facts(env: Any) -> tuple[str, str, str, int]:
    name = env.customers[env.target[0]]["name"]
    cid = env.step(call("find_customer", name=name))[0]
    for line in env.step(call("list_invoices", customer_id=cid))[0].splitlines():
        iid, amount = line.split(" amount=")
        charges = env.step(call("list_charges", invoice_id=iid))[0].splitlines()
        if len(charges) == 2:
            return cid, iid, charges[1].split()[0], int(amount)
    raise AssertionError("no duplicate found")


def test_billing_refund_duplicate_and_credit_wins() -> None:
    env = make("tool:Billing-v0")
    env.reset(seed=11)
    cid, _iid, dup, amount = _billing_facts(env)
    env.step(call("refund", charge_id=dup, amount_cents=amount))
    env.step(call("add_credit", customer_id=cid, amount_cents=amount // 10))
    obs, reward, term, trunc, info = env.step(call("submit"))
    assert reward == 1.0 and info["refunds"] == {dup: amount}


def test_billing_touching_the_wrong_charge_fails() -> None:
    env = make("tool:Billing-v0")
    env.reset(seed=11)
    cid, _iid, dup, amount = _billing_facts(env)
    original = sorted(c for c in env.charges if c != dup)[0]
    env.step(call("refund", charge_id=original, amount_cents=100))
    env.step(call("refund", charge_id=dup, amount_cents=amount))
    env.step(call("add_credit", customer_id=cid, amount_cents=amount // 10))
    obs, r, term, trunc, info = env.step(call("refund", charge_id=dup, amount_cents=1))
    assert info["error"] == "tool_failed"  # over-refund refused
    assert env.step(call("submit"))[1] == 0.0


def test_tool_env_turn_limit_truncates_with_a_score() -> None:
    env = make("tool:Billing-v0", max_turns=2)
    env.reset(seed=1)
    env.step(call("find_customer", name="nobody"))
    obs, reward, term, trunc, info = env.step(call("find_customer", name="nobody"))
    assert trunc and not term and reward == 0.0 and "turn limit" in obs
