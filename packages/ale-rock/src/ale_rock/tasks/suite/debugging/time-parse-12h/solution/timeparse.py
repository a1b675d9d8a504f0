"""Parse 12-hour clock times."""

import re

_CLOCK = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*([AaPp][Mm])\s*$")


def to_minutes(clock):
    m = _CLOCK.match(clock)
    if not m:
        raise ValueError(f"not a 12-hour time: {clock!r}")
    hours, minutes, suffix = int(m.group(1)), int(m.group(2)), m.group(3).upper()
    if not 1 <= hours <= 12 or not 0 <= minutes <= 59:
        raise ValueError(f"out of range: {clock!r}")
    hours %= 12
    if suffix == "PM":
        hours += 12
    return hours * 60 + minutes


def duration(start, end):
    return (to_minutes(end) - to_minutes(start)) % (24 * 60)
