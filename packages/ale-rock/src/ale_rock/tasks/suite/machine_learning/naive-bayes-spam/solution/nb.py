import csv
import math
import re
from collections import Counter


def tokens(text):
    return [t for t in re.split(r"[^a-z]+", text.lower()) if t]


def train(texts, labels):
    counts, docs = {}, Counter(labels)
    for text, label in zip(texts, labels):
        counts.setdefault(label, Counter()).update(tokens(text))
    vocab = set().union(*counts.values())
    return {"counts": counts, "docs": docs, "vocab": vocab, "totals": {k: sum(c.values()) for k, c in counts.items()}}


def predict(model, texts):
    n = sum(model["docs"].values())
    v = len(model["vocab"])
    out = []
    for text in texts:
        best, best_lp = None, -math.inf
        for label in sorted(model["docs"]):
            lp = math.log(model["docs"][label] / n)
            c, tot = model["counts"][label], model["totals"][label]
            lp += sum(math.log((c[t] + 1) / (tot + v)) for t in tokens(text))
            if lp > best_lp:
                best, best_lp = label, lp
        out.append(best)
    return out


if __name__ == "__main__":
    tr = list(csv.DictReader(open("train.csv")))
    model = train([r["text"] for r in tr], [r["label"] for r in tr])
    te = [r["text"] for r in csv.DictReader(open("test.csv"))]
    open("predictions.txt", "w").write("".join(p + "\n" for p in predict(model, te)))
