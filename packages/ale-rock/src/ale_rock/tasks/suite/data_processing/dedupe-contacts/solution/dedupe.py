import csv
import sys


def norm(email):
    email = email.strip().lower()
    local, _, domain = email.partition("@")
    if domain == "gmail.com":
        local = local.split("+", 1)[0].replace(".", "")
    return f"{local}@{domain}"


def main(src, dst):
    best = {}
    with open(src, newline="") as f:
        reader = csv.DictReader(f)
        fields = reader.fieldnames
        for row in reader:
            row["email"] = norm(row["email"])
            row["phone"] = "".join(c for c in row["phone"] if c.isdigit())
            cur = best.get(row["email"])
            if cur is None or row["updated"] > cur["updated"]:
                best[row["email"]] = row
    with open(dst, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        for key in sorted(best):
            w.writerow(best[key])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
