"""Parse 12-hour clock times."""


def to_minutes(clock):
    time_part, suffix = clock.split(" ")
    hours, minutes = time_part.split(":")
    hours, minutes = int(hours), int(minutes)
    if suffix == "PM":
        hours += 12
    return hours * 60 + minutes


def duration(start, end):
    return abs(to_minutes(end) - to_minutes(start))
