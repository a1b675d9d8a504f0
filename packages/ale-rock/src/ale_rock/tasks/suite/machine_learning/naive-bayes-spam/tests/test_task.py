import csv
import os

from ale_testlib import load_module, read, run_all, test

HERE = os.path.dirname(os.path.abspath(__file__))


def labelled(path):
    rows = list(csv.DictReader(read(path).splitlines()))
    return [r["text"] for r in rows], [r["label"] for r in rows]


def acc(pred, gold):
    assert len(pred) == len(gold), (len(pred), len(gold))
    return sum(p == g for p, g in zip(pred, gold)) / len(gold)


@test
def test_set_accuracy():
    pred = [x.strip() for x in read("predictions.txt").splitlines() if x.strip()]
    gold = read(os.path.join(HERE, "test_labels.txt")).split()
    a = acc(pred, gold)
    assert a >= 0.9, f"accuracy {a:.3f}"


@test
def holdout_accuracy_through_api():
    m = load_module("nb.py", "nb")
    model = m.train(*labelled("train.csv"))
    texts, gold = labelled(os.path.join(HERE, "holdout.csv"))
    a = acc(list(m.predict(model, texts)), gold)
    assert a >= 0.9, f"accuracy {a:.3f}"


@test
def smoothing_handles_unseen_words():
    m = load_module("nb.py", "nb")
    model = m.train(["cash prize now", "team lunch today"], ["spam", "ham"])
    assert list(m.predict(model, ["zebra quantum", "cash cash zebra", "lunch with team"]))[1:] == ["spam", "ham"]


run_all()
