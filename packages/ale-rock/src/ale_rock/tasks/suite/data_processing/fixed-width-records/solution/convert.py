import json
import sys


def parse_value(raw, typ):
    if typ == "int":
        return int(raw)
    if typ == "amount":
        sign = -1 if raw[-1] == "-" else 1
        return sign * int(raw[:-1]) / 100
    if typ == "date":
        return None if set(raw) <= {"0"} else f"{raw[:4]}-{raw[4:6]}-{raw[6:8]}"
    return raw.strip()


def main(data_path, layout_path):
    layout = [line.split() for line in open(layout_path) if line.strip()]
    out = []
    for line in open(data_path):
        line = line.rstrip("\n")
        if not line.strip() or line.startswith("#"):
            continue
        rec = {}
        for name, start, width, typ in layout:
            s = int(start) - 1
            rec[name] = parse_value(line[s : s + int(width)].ljust(int(width)), typ)
        out.append(rec)
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
