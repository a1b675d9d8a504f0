"""Parametric easy tasks for RL at scale: the same seed always gives the same task, byte for byte.

Each family draws its parameters (file names, sizes, values, wording) from ``random.Random`` seeded
with ``"family:seed"``, computes the expected answer at generation time, and ships it inside the
hidden tests; the reference solution computes the answer from the files like an agent would.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass

from ale_rock.tasks.models import TESTS_DIR, Difficulty, Domain, Split, Task, TaskSpec, TimeLimits

_CHECKS_SCRIPT = '''import hashlib
import json
import os

from ale_testlib import read, run_all, test

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = json.load(open(os.path.join(HERE, "expected.json")))


def norm(text):
    return [line.rstrip() for line in text.strip().splitlines()]


def make(check):
    def run():
        kind, path = check["kind"], check["path"]
        if kind == "exists":
            assert os.path.isfile(path), f"{path} does not exist"
        elif kind == "lines":
            got = norm(read(path))
            assert got == check["value"], f"{path}: got {got[:5]}... want {check['value'][:5]}..."
        elif kind == "number":
            got = float(read(path).strip())
            assert abs(got - check["value"]) <= check.get("tol", 0), f"{path}: got {got}, want {check['value']}"
        elif kind == "unchanged":
            got = hashlib.sha256(open(path, "rb").read()).hexdigest()
            assert got == check["value"], f"{path} was modified"
        else:
            raise AssertionError(f"unknown check {kind}")

    run.__name__ = check["name"]
    return run


for c in SPEC["checks"]:
    test(make(c))
run_all()
'''


@dataclass
class _Draft:
    """What a family produces; the generator turns it into a :class:`Task`."""

    title: str
    prompt: str
    files: dict[str, str]
    checks: list[dict[str, object]]
    solve: str
    tags: list[str]


def _sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def _pick_name(rng: random.Random, stems: list[str], ext: str) -> str:
    return f"{rng.choice(stems)}{ext}"


_SEP_NAMES = {"\n": "newlines", " ": "spaces", ", ": "commas"}


def _sum_numbers(rng: random.Random) -> _Draft:
    src = _pick_name(rng, ["numbers", "values", "amounts", "readings"], ".txt")
    out = _pick_name(rng, ["sum", "total", "answer"], ".txt")
    nums = [rng.randint(-500, 1000) for _ in range(rng.randint(8, 60))]
    sep = rng.choice(["\n", " ", ", "])
    text = sep.join(map(str, nums)) + "\n"
    return _Draft(
        title=f"Sum the numbers in {src}",
        prompt=f"`{src}` contains integers separated by {_SEP_NAMES[sep]}. "
        f"Write their sum to `{out}` (just the number). Do not modify `{src}`.",
        files={src: text},
        checks=[
            {"name": "output_exists", "kind": "exists", "path": out},
            {"name": "sum_correct", "kind": "number", "path": out, "value": sum(nums)},
            {"name": "input_unchanged", "kind": "unchanged", "path": src, "value": _sha(text)},
        ],
        solve=f"python3 -c \"import re; print(sum(int(x) for x in re.findall(r'-?\\d+', open('{src}').read())))\" > {out}",
        tags=["arithmetic", "files"],
    )


def _count_level(rng: random.Random) -> _Draft:
    src = _pick_name(rng, ["app", "server", "worker", "cron"], ".log")
    out = _pick_name(rng, ["count", "errors", "result"], ".txt")
    levels = ["INFO", "WARN", "ERROR", "DEBUG"]
    want = rng.choice(levels)
    lines = []
    for i in range(rng.randint(15, 80)):
        lvl = rng.choice(levels)
        lines.append(f"2024-01-{1 + i % 28:02d}T{i % 24:02d}:{rng.randint(0, 59):02d}:00 {lvl} job={rng.randint(1, 9)} step {i}")
    text = "\n".join(lines) + "\n"
    n = sum(1 for line in lines if line.split()[1] == want)
    return _Draft(
        title=f"Count {want} lines in {src}",
        prompt=f"Count the lines of `{src}` whose log level (the second field) is `{want}` and write the count "
        f"to `{out}`.",
        files={src: text},
        checks=[
            {"name": "output_exists", "kind": "exists", "path": out},
            {"name": "count_correct", "kind": "number", "path": out, "value": n},
            {"name": "input_unchanged", "kind": "unchanged", "path": src, "value": _sha(text)},
        ],
        solve=f"awk '$2 == \"{want}\"' {src} | wc -l > {out}",
        tags=["logs", "counting"],
    )


_WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu"]


def _sort_unique(rng: random.Random) -> _Draft:
    src = _pick_name(rng, ["words", "names", "tokens"], ".txt")
    out = _pick_name(rng, ["sorted", "unique", "clean"], ".txt")
    words = [rng.choice(_WORDS) for _ in range(rng.randint(10, 50))]
    desc = rng.random() < 0.5
    text = "\n".join(words) + "\n"
    want = sorted(set(words), reverse=desc)
    order = "descending" if desc else "ascending"
    return _Draft(
        title=f"Sort and deduplicate {src}",
        prompt=f"`{src}` has one word per line. Write the distinct words in {order} alphabetical order, one per "
        f"line, to `{out}`.",
        files={src: text},
        checks=[
            {"name": "output_exists", "kind": "exists", "path": out},
            {"name": "words_sorted_unique", "kind": "lines", "path": out, "value": want},
            {"name": "input_unchanged", "kind": "unchanged", "path": src, "value": _sha(text)},
        ],
        solve=f"sort -u {'-r ' if desc else ''}{src} > {out}",
        tags=["text", "sorting"],
    )


def _column_stat(rng: random.Random) -> _Draft:
    src = _pick_name(rng, ["data", "table", "measurements"], ".csv")
    out = _pick_name(rng, ["stat", "result", "answer"], ".txt")
    cols = rng.sample(["price", "qty", "weight", "score", "height", "latency"], 3)
    col = rng.choice(cols)
    stat = rng.choice(["max", "min", "mean"])
    rows = [[round(rng.uniform(0, 100), 2) for _ in cols] for _ in range(rng.randint(5, 40))]
    text = ",".join(cols) + "\n" + "".join(",".join(f"{v:.2f}" for v in r) + "\n" for r in rows)
    vals = [r[cols.index(col)] for r in rows]
    value = {"max": max(vals), "min": min(vals), "mean": sum(vals) / len(vals)}[stat]
    fn = {"max": "max(v)", "min": "min(v)", "mean": "sum(v) / len(v)"}[stat]
    return _Draft(
        title=f"Compute the {stat} of column {col}",
        prompt=f"Write the {stat} of the `{col}` column of `{src}` (a CSV with a header) to `{out}`, "
        "rounded to 2 decimals.",
        files={src: text},
        checks=[
            {"name": "output_exists", "kind": "exists", "path": out},
            {"name": "stat_correct", "kind": "number", "path": out, "value": round(value, 2), "tol": 0.0051},
        ],
        solve=(
            "python3 -c \"import csv; v=[float(r['" + col + "']) for r in csv.DictReader(open('" + src + "'))]; "
            "print(f'{" + fn + ":.2f}')\" > " + out
        ),
        tags=["csv", "statistics"],
    )


def _json_filter(rng: random.Random) -> _Draft:
    src = _pick_name(rng, ["items", "inventory", "records"], ".json")
    out = _pick_name(rng, ["selected", "names", "matches"], ".txt")
    field = rng.choice(["stock", "rating", "size"])
    threshold = rng.randint(20, 80)
    items = [{"name": f"{rng.choice(_WORDS)}-{i}", field: rng.randint(0, 100)} for i in range(rng.randint(6, 30))]
    text = json.dumps(items, indent=1) + "\n"
    want = [it["name"] for it in items if int(it[field]) > threshold]  # type: ignore[call-overload]
    return _Draft(
        title=f"Select items with {field} above {threshold}",
        prompt=f"`{src}` is a JSON list of objects. Write the `name` of every object whose `{field}` is greater "
        f"than {threshold} to `{out}`, one per line, in the original order.",
        files={src: text},
        checks=[
            {"name": "output_exists", "kind": "exists", "path": out},
            {"name": "selection_correct", "kind": "lines", "path": out, "value": want},
        ],
        solve=(
            "python3 -c \"import json; [print(x['name']) for x in json.load(open('" + src + "')) if x['"
            + field + "'] > " + str(threshold) + "]\" > " + out
        ),
        tags=["json", "filtering"],
    )


FAMILIES: dict[str, Callable[[random.Random], _Draft]] = {
    "sum_numbers": _sum_numbers,
    "count_level": _count_level,
    "sort_unique": _sort_unique,
    "column_stat": _column_stat,
    "json_filter": _json_filter,
}


def generate_task(seed: int, family: str | None = None, split: Split = Split.TRAIN) -> Task:
    """The task for ``seed`` (family cycles with the seed unless given). Pure and deterministic."""
    names = sorted(FAMILIES)
    name = family if family is not None else names[seed % len(names)]
    if name not in FAMILIES:
        raise ValueError(f"unknown family {name!r}; known: {', '.join(names)}")
    rng = random.Random(f"{name}:{seed}")
    d = FAMILIES[name](rng)
    spec = TaskSpec(
        id=f"gen-{name.replace('_', '-')}-{seed}",
        domain=Domain.DATA_PROCESSING,
        title=d.title,
        prompt=d.prompt,
        difficulty=Difficulty.EASY,
        split=split,
        tags=["generated", name, *d.tags],
        limits=TimeLimits(setup_s=30, agent_s=300, test_s=30),
        test_command=f"python3 {TESTS_DIR}/test_task.py",
    )
    return Task(
        spec=spec,
        setup={k: v.encode() for k, v in d.files.items()},
        tests={
            "test_task.py": _CHECKS_SCRIPT.encode(),
            "expected.json": json.dumps({"checks": d.checks}, indent=1, sort_keys=True).encode(),
        },
        solution={"solve.sh": (d.solve + "\n").encode()},
    )


def generate_tasks(seeds: range | list[int], family: str | None = None) -> list[Task]:
    """Many tasks at once (in memory)."""
    return [generate_task(s, family) for s in seeds]
