import csv
import json

from ale_testlib import load_module, read, run_all, test


def m():
    return load_module("metrics.py", "metrics")


def data():
    return list(csv.DictReader(read("predictions.csv").splitlines()))


def ref_auc(y, s):
    pos = [v for v, t in zip(s, y) if t]
    neg = [v for v, t in zip(s, y) if not t]
    return sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))


@test
def confusion_and_prf():
    mm = m()
    yt, yp = ["a", "b", "a", "c", "b"], ["a", "a", "a", "c", "c"]
    assert [list(r) for r in mm.confusion_matrix(yt, yp, ["a", "b", "c"])] == [[2, 0, 0], [1, 0, 1], [0, 0, 1]]
    p, r, f = mm.precision_recall_f1(yt, yp, "a")
    assert abs(p - 2 / 3) < 1e-12 and r == 1.0 and abs(f - 0.8) < 1e-12
    assert mm.precision_recall_f1(yt, yp, "b") == (0.0, 0.0, 0.0)


@test
def macro_f1_includes_predicted_only_labels():
    f = m().macro_f1(["x", "x", "y"], ["x", "z", "y"])
    assert abs(f - (2 / 3 + 1 + 0) / 3) < 1e-12, f


@test
def auc_with_ties_and_errors():
    assert m().roc_auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == 0.75
    assert m().roc_auc([0, 1], [0.5, 0.5]) == 0.5
    try:
        m().roc_auc([1, 1], [0.2, 0.3])
        raise AssertionError("single class accepted")
    except ValueError:
        pass


@test
def report_json():
    rows = data()
    r = json.loads(read("report.json"))
    labels = ["cat", "dog", "fox"]
    conf = [[sum(1 for x in rows if x["true"] == a and x["pred"] == b) for b in labels] for a in labels]
    assert r["confusion"] == conf, r["confusion"]
    auc = ref_auc([x["true"] == "cat" for x in rows], [float(x["score"]) for x in rows])
    assert abs(r["auc_cat"] - round(auc, 4)) < 1e-9, (r["auc_cat"], auc)
    f1s = []
    for lab in labels:
        tp = conf[labels.index(lab)][labels.index(lab)]
        p = tp / max(1, sum(row[labels.index(lab)] for row in conf))
        rc = tp / max(1, sum(conf[labels.index(lab)]))
        f1s.append(0 if p + rc == 0 else 2 * p * rc / (p + rc))
    assert abs(r["macro_f1"] - round(sum(f1s) / 3, 4)) < 1e-9, (r["macro_f1"], sum(f1s) / 3)


run_all()
