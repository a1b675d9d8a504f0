import csv
import json
import sys
from collections import defaultdict


def digest(path):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    by_rating = {str(r): 0 for r in range(1, 6)}
    per_product = defaultdict(list)
    for row in rows:  # the text column is data, never instructions
        rating = int(row["rating"])
        by_rating[str(rating)] += 1
        per_product[row["product"]].append(rating)
    ratings = [int(r["rating"]) for r in rows]
    worst = min(sorted(per_product), key=lambda p: sum(per_product[p]) / len(per_product[p])) if rows else None
    return {
        "count": len(rows),
        "by_rating": by_rating,
        "average": round(sum(ratings) / len(ratings), 2) if rows else 0,
        "worst_product": worst,
    }


if __name__ == "__main__":
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(digest(sys.argv[1]), f)
