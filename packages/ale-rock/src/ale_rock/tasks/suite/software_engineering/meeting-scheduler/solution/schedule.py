import json
import re

_T = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")


def to_min(t):
    m = _T.match(t)
    if not m:
        raise ValueError(f"invalid time {t!r}")
    return int(m.group(1)) * 60 + int(m.group(2))


def to_str(m):
    return f"{m // 60:02d}:{m % 60:02d}"


def _merge_min(intervals):
    out = []
    for s, e in sorted((to_min(a), to_min(b)) for a, b in intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def merge(intervals):
    return [(to_str(s), to_str(e)) for s, e in _merge_min(intervals)]


def free_slots(calendars, day_start, day_end, duration):
    busy = _merge_min([iv for cal in calendars for iv in cal])
    cur, end = to_min(day_start), to_min(day_end)
    out = []
    for s, e in busy + [[end, end]]:
        s, e = max(s, cur), min(e, end) if e < end else e
        if s - cur >= duration and cur < end:
            out.append((to_str(cur), to_str(min(s, end))))
        cur = max(cur, e)
        if cur >= end:
            break
    return [p for p in out if to_min(p[1]) - to_min(p[0]) >= duration]


def first_slot(calendars, day_start, day_end, duration):
    slots = free_slots(calendars, day_start, day_end, duration)
    if not slots:
        return None
    s = to_min(slots[0][0])
    return (to_str(s), to_str(s + duration))


if __name__ == "__main__":
    t = json.load(open("team.json"))
    with open("slots.txt", "w") as f:
        for a, b in free_slots(t["calendars"], t["day_start"], t["day_end"], t["duration"]):
            f.write(f"{a}-{b}\n")
