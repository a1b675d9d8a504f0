from ale_testlib import load_module, read, run_all, test


def m():
    return load_module("schedule.py", "schedule")


@test
def merge_overlapping_and_touching():
    got = m().merge([("10:00", "11:00"), ("09:00", "10:00"), ("13:00", "14:00"), ("10:30", "10:45")])
    assert [tuple(x) for x in got] == [("09:00", "11:00"), ("13:00", "14:00")], got


@test
def slots_file():
    assert read("slots.txt").split() == ["11:00-12:00", "15:00-15:30"], read("slots.txt")


@test
def free_slots_with_outside_intervals():
    cal = [[("07:00", "09:30"), ("17:00", "19:00")], [("12:00", "12:20")]]
    got = m().free_slots(cal, "09:00", "18:00", 60)
    assert [tuple(x) for x in got] == [("09:30", "12:00"), ("12:20", "17:00")], got


@test
def first_slot_and_none():
    cal = [[("09:00", "09:40")], [("09:50", "11:00")]]
    assert tuple(m().first_slot(cal, "09:00", "12:00", 45)) == ("11:00", "11:45")
    assert m().first_slot(cal, "09:00", "11:30", 45) is None


@test
def invalid_time_raises():
    for bad in ["24:00", "9:5", "ab:cd", "12:60"]:
        try:
            m().merge([(bad, "23:00")])
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad!r}")


run_all()
