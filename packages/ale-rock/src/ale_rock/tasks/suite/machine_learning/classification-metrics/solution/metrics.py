import csv
import json


def confusion_matrix(y_true, y_pred, labels):
    idx = {lab: i for i, lab in enumerate(labels)}
    m = [[0] * len(labels) for _ in labels]
    for t, p in zip(y_true, y_pred):
        m[idx[t]][idx[p]] += 1
    return m


def precision_recall_f1(y_true, y_pred, positive):
    tp = sum(1 for t, p in zip(y_true, y_pred) if t == positive and p == positive)
    pp = sum(1 for p in y_pred if p == positive)
    ap = sum(1 for t in y_true if t == positive)
    prec = tp / pp if pp else 0.0
    rec = tp / ap if ap else 0.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    return prec, rec, f1


def macro_f1(y_true, y_pred):
    labels = sorted(set(y_true) | set(y_pred))
    return sum(precision_recall_f1(y_true, y_pred, lab)[2] for lab in labels) / len(labels)


def roc_auc(y_true01, scores):
    pos = [s for s, t in zip(scores, y_true01) if t]
    neg = [s for s, t in zip(scores, y_true01) if not t]
    if not pos or not neg:
        raise ValueError("both classes are needed")
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


if __name__ == "__main__":
    rows = list(csv.DictReader(open("predictions.csv")))
    yt, yp = [r["true"] for r in rows], [r["pred"] for r in rows]
    labels = sorted(set(yt) | set(yp))
    json.dump({
        "confusion": confusion_matrix(yt, yp, labels),
        "macro_f1": round(macro_f1(yt, yp), 4),
        "auc_cat": round(roc_auc([t == "cat" for t in yt], [float(r["score"]) for r in rows]), 4),
    }, open("report.json", "w"), indent=2)
