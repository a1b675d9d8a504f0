"""Agent-native episodes: an unmodified agent process calls the ModelProxy with its episode's
credential, then the hidden tests give the reward and the proxy's records are the trajectory."""

from __future__ import annotations

import json
from typing import Any

from ale_rock.envs.sandbox import LocalDirProvider
from ale_rock.envs.terminal import find_task
from ale_rock.proxy.episode import run_agent_episode

# A stdlib-only agent: two model calls, the replies saved, then the task's work (here, the
# reference solution, so the reward is known).
AGENT = b"""
import json, os, urllib.request
base, key = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
def chat(messages):
    body = json.dumps({"model": os.environ["OPENAI_MODEL"], "messages": messages, "max_tokens": 6, "seed": 1})
    req = urllib.request.Request(base + "/chat/completions", data=body.encode(),
                                 headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=60))["choices"][0]["message"]["content"]
msgs = [{"role": "user", "content": "Summarize sales.csv"}]
first = chat(msgs)
msgs += [{"role": "assistant", "content": first}, {"role": "user", "content": "Now do it."}]
second = chat(msgs)
json.dump([first, second], open(".agent_replies.json", "w"))
"""


def test_agent_native_episode_records_calls_and_scores_with_hidden_tests(
    tiny_inference: Any, proxy_server: Any
) -> None:
    addr, servicer = tiny_inference
    task = find_task("csv-sales-rollup")
    files = {"agent.py": AGENT, ".ale_solution/solve.sh": task.solution["solve.sh"]}
    result = run_agent_episode(
        task,
        "python3 agent.py && cat .agent_replies.json && echo && bash .ale_solution/solve.sh",
        proxy_address=proxy_server.grpc_address,
        provider=LocalDirProvider(),
        upstream="inference",
        upstream_target=addr,
        model="tiny",
        agent_files=files,
        budget_s=120,
    )
    assert result.agent_exit_code == 0, result.agent_output
    assert result.reward == 1.0 and result.success and len(result.tests) >= 2
    replies = json.loads(result.agent_output.strip().splitlines()[0])
    assert [r.index for r in result.records] == [0, 1]
    for rec, reply in zip(result.records, replies):
        assert servicer.tok.decode(rec.completion_token_ids, skip_special_tokens=True) == reply
        assert rec.prompt_token_ids and rec.policy_version == 7
    # The second prompt is the template applied once to the full conversation the agent sent.
    msgs = result.records[1].request["messages"]
    text = servicer.tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    assert result.records[1].prompt_token_ids == servicer.tok(text, add_special_tokens=False)["input_ids"]
    assert proxy_server.proxy.book.get(result.episode_id).closed


def test_agent_over_budget_is_cut_and_scored(tiny_inference: Any, proxy_server: Any) -> None:
    addr, _ = tiny_inference
    result = run_agent_episode(
        find_task("csv-sales-rollup"),
        "sleep 30",
        proxy_address=proxy_server.grpc_address,
        provider=LocalDirProvider(),
        upstream="inference",
        upstream_target=addr,
        budget_s=0.5,
    )
    assert result.agent_timed_out and result.reward == 0.0 and not result.success and result.records == []
    assert [e["kind"] for e in result.safety_events] == ["limit_hit"]
