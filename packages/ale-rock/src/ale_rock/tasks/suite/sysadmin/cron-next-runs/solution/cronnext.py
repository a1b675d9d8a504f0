import sys
from datetime import datetime, timedelta

MONTHS = {m: i for i, m in enumerate(["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1)}
DAYS = {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
RANGES = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]


def value(tok, names):
    tok = tok.lower()
    if tok in names:
        return names[tok]
    if not tok.isdigit():
        raise ValueError(tok)
    return int(tok)


def parse_field(text, lo, hi, names):
    out = set()
    for part in text.split(","):
        body, _, step = part.partition("/")
        step_n = int(step) if step else 1
        if step and (not step.isdigit() or step_n < 1):
            raise ValueError(part)
        if body == "*":
            a, b = lo, hi
        elif "-" in body:
            a, b = (value(x, names) for x in body.split("-", 1))
        else:
            a = b = value(body, names)
            if step:
                b = hi
        if not (lo <= a <= hi and lo <= b <= hi and a <= b):
            raise ValueError(part)
        out.update(range(a, b + 1, step_n))
    return out


def parse(expr):
    fields = expr.split()
    if len(fields) != 5:
        raise ValueError(expr)
    names = [{}, {}, {}, MONTHS, DAYS]
    sets = [parse_field(f, lo, hi, nm) for f, (lo, hi), nm in zip(fields, RANGES, names)]
    if 7 in sets[4]:
        sets[4] = (sets[4] - {7}) | {0}
    return sets, fields[2] != "*", fields[4] != "*"


def matches_day(t, sets, dom_r, dow_r):
    dom_ok = t.day in sets[2]
    dow_ok = (t.isoweekday() % 7) in sets[4]
    if dom_r and dow_r:
        return dom_ok or dow_ok
    return dom_ok and dow_ok


def upcoming(expr, start, n):
    sets, dom_r, dow_r = parse(expr)
    t = start.replace(second=0, microsecond=0) + timedelta(minutes=1)
    out = []
    limit = start + timedelta(days=366 * 12)
    while len(out) < n and t < limit:
        if t.month not in sets[3] or not matches_day(t, sets, dom_r, dow_r):
            t = (t + timedelta(days=1)).replace(hour=0, minute=0)
            continue
        if t.hour not in sets[1]:
            t = (t + timedelta(hours=1)).replace(minute=0)
            continue
        if t.minute in sets[0]:
            out.append(t)
        t += timedelta(minutes=1)
    return out


def main():
    try:
        start = datetime.strptime(sys.argv[2], "%Y-%m-%d %H:%M")
        times = upcoming(sys.argv[1], start, int(sys.argv[3]))
    except ValueError:
        print("invalid")
        return
    for t in times:
        print(t.strftime("%Y-%m-%d %H:%M"))


if __name__ == "__main__":
    main()
