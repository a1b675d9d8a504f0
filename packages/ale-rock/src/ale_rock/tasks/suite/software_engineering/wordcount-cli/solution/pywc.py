import argparse
import sys


def counts(data):
    return data.count(b"\n"), len(data.split()), len(data)


def main():
    ap = argparse.ArgumentParser(prog="pywc")
    ap.add_argument("-l", action="store_true")
    ap.add_argument("-w", action="store_true")
    ap.add_argument("-c", action="store_true")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    sel = [a.l, a.w, a.c] if (a.l or a.w or a.c) else [True, True, True]
    status, total = 0, [0, 0, 0]

    def show(c, name):
        cols = "".join(f"{v:8d}" for v, s in zip(c, sel) if s)
        print(f"{cols} {name}" if name else cols)

    for name in a.files or ["-"]:
        try:
            data = sys.stdin.buffer.read() if name == "-" else open(name, "rb").read()
        except FileNotFoundError:
            print(f"pywc: {name}: No such file or directory", file=sys.stderr)
            status = 1
            continue
        c = counts(data)
        total = [x + y for x, y in zip(total, c)]
        show(c, "" if name == "-" else name)
    if len(a.files) > 1:
        show(total, "total")
    sys.exit(status)


main()
