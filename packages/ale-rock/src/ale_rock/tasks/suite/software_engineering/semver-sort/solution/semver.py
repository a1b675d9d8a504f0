import functools
import re

_NUM = r"0|[1-9]\d*"
_ID = r"[0-9A-Za-z-]+"
_RE = re.compile(rf"^v?({_NUM})\.({_NUM})\.({_NUM})(?:-({_ID}(?:\.{_ID})*))?(?:\+{_ID}(?:\.{_ID})*)?$")


def parse(s):
    m = _RE.match(s.strip())
    if not m:
        raise ValueError(f"invalid version {s!r}")
    pre = ()
    if m.group(4):
        ids = m.group(4).split(".")
        for i in ids:
            if i.isdigit() and len(i) > 1 and i[0] == "0":
                raise ValueError(f"leading zero in {s!r}")
        pre = tuple(int(i) if i.isdigit() else i for i in ids)
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), pre


def _cmp_pre(a, b):
    if a == b:
        return 0
    if not a:
        return 1
    if not b:
        return -1
    for x, y in zip(a, b):
        if x == y:
            continue
        if isinstance(x, int) and isinstance(y, int):
            return -1 if x < y else 1
        if isinstance(x, int):
            return -1
        if isinstance(y, int):
            return 1
        return -1 if x < y else 1
    return -1 if len(a) < len(b) else 1


def _cmp(pa, pb):
    if pa[:3] != pb[:3]:
        return -1 if pa[:3] < pb[:3] else 1
    return _cmp_pre(pa[3], pb[3])


def compare(a, b):
    return _cmp(parse(a), parse(b))


def sort_versions(vs):
    return sorted(vs, key=functools.cmp_to_key(compare))


def _expand(rng):
    out = []
    for tok in rng.split():
        if tok[0] == "^":
            v = parse(tok[1:])
            upper = (v[0] + 1, 0, 0) if v[0] > 0 else (0, v[1] + 1, 0) if v[1] > 0 else (0, 0, v[2] + 1)
            out += [(">=", v), ("<", (*upper, (0,)))]
        elif tok[0] == "~":
            v = parse(tok[1:])
            out += [(">=", v), ("<", (v[0], v[1] + 1, 0, (0,)))]
        else:
            m = re.match(r"^(>=|<=|>|<|=)?(.*)$", tok)
            out.append((m.group(1) or "=", parse(m.group(2))))
    return out


def satisfies(version, rng):
    v = parse(version)
    comps = _expand(rng)
    ops = {">=": lambda c: c >= 0, "<=": lambda c: c <= 0, ">": lambda c: c > 0, "<": lambda c: c < 0, "=": lambda c: c == 0}
    if not all(ops[op](_cmp(v, bound)) for op, bound in comps):
        return False
    if v[3]:
        # npm rule: a pre-release only matches when a comparator names the same tuple with a pre-release
        return any(bound[3] and bound[:3] == v[:3] and not (op == "<" and bound[3] == (0,)) for op, bound in comps)
    return True


if __name__ == "__main__":
    vs = [line.strip() for line in open("versions.txt") if line.strip()]
    open("sorted.txt", "w").write("".join(v + "\n" for v in sort_versions(vs)))
