from ale_testlib import load_module, run_all, test


def tp():
    return load_module("timeparse.py", "timeparse")


@test
def noon_and_midnight():
    m = tp()
    assert m.to_minutes("12:00 AM") == 0
    assert m.to_minutes("12:05 AM") == 5
    assert m.to_minutes("12:00 PM") == 720
    assert m.to_minutes("12:59 PM") == 779


@test
def ordinary_times_case_and_spacing():
    m = tp()
    assert m.to_minutes("7:30pm") == 1170
    assert m.to_minutes("07:30 Am") == 450
    assert m.to_minutes("11:59 PM") == 1439
    assert m.to_minutes(" 1:00   PM ") == 780


@test
def durations_wrap_midnight():
    m = tp()
    assert m.duration("10:00 PM", "2:15 AM") == 255
    assert m.duration("9:00 AM", "5:30 PM") == 510
    assert m.duration("3:00 PM", "3:00 PM") == 0


@test
def invalid_inputs_raise():
    m = tp()
    for bad in ["13:00 PM", "0:30 AM", "7:60 AM", "7:30", "seven PM", "7:5 AM"]:
        try:
            m.to_minutes(bad)
        except ValueError:
            continue
        raise AssertionError(f"no ValueError for {bad!r}")


run_all()
