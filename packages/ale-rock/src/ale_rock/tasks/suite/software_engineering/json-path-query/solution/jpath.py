import json
import re
import sys

_SEG = re.compile(r"^(\*|[A-Za-z0-9_]+)?((?:\[[^\]]*\])*)$")
_SEL = re.compile(r"\[([^\]]*)\]")
_INT = re.compile(r"^-?\d+$")


def _tokens(path):
    """Split into (recursive, name, selectors) steps."""
    if path == "":
        return []
    if path.startswith("..."):
        raise ValueError(path)
    steps = []
    rest = path
    recursive = False
    if rest.startswith(".."):
        recursive, rest = True, rest[2:]
    parts = re.split(r"(\.\.|\.)", rest)
    i = 0
    while i < len(parts):
        seg = parts[i]
        m = _SEG.match(seg)
        if not seg or not m or (m.group(1) is None and not m.group(2)) or (m.group(1) is None and m.group(2) and steps == [] and not recursive and i == 0 and False):
            raise ValueError(f"bad segment {seg!r} in {path!r}")
        if m.group(1) is None:
            raise ValueError(f"index without a key in {path!r}")
        sels = []
        for s in _SEL.findall(m.group(2)):
            s = s.strip()
            if s == "*":
                sels.append("*")
            elif _INT.match(s):
                sels.append(int(s))
            elif ":" in s and s.count(":") == 1:
                a, b = s.split(":")
                if (a and not _INT.match(a)) or (b and not _INT.match(b)):
                    raise ValueError(s)
                sels.append(slice(int(a) if a else None, int(b) if b else None))
            else:
                raise ValueError(f"bad selector [{s}]")
        steps.append((recursive, m.group(1), sels))
        if i + 1 < len(parts):
            recursive = parts[i + 1] == ".."
        i += 2
    return steps


def _children(v):
    if isinstance(v, dict):
        return list(v.values())
    if isinstance(v, list):
        return list(v)
    return []


def _descend(v):
    yield v
    for c in _children(v):
        yield from _descend(c)


def _select(values, sel):
    out = []
    for v in values:
        if not isinstance(v, list):
            continue
        if sel == "*":
            out.extend(v)
        elif isinstance(sel, slice):
            out.extend(v[sel])
        elif -len(v) <= sel < len(v):
            out.append(v[sel])
    return out


def query(doc, path):
    if not isinstance(path, str) or " " in path:
        raise ValueError(f"invalid path {path!r}")
    cur = [doc]
    for recursive, name, sels in _tokens(path):
        nodes = [n for v in cur for n in _descend(v)] if recursive else cur
        nxt = []
        for v in nodes:
            if name == "*":
                nxt.extend(_children(v))
            elif isinstance(v, dict) and name in v:
                nxt.append(v[name])
        for s in sels:
            nxt = _select(nxt, s)
        cur = nxt
    return cur


if __name__ == "__main__":
    with open(sys.argv[1]) as fh:
        data = json.load(fh)
    for match in query(data, sys.argv[2]):
        print(json.dumps(match, separators=(",", ":")))
