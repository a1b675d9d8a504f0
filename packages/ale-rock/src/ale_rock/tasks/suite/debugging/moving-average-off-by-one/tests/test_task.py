from ale_testlib import load_module, run_all, test


def m():
    return load_module("stats.py", "stats")


@test
def moving_average_has_all_windows():
    assert m().moving_average([1, 2, 3, 4], 2) == [1.5, 2.5, 3.5]


@test
def moving_average_full_window_and_too_long():
    assert m().moving_average([2, 4, 6], 3) == [4.0]
    assert m().moving_average([2, 4], 3) == []


@test
def moving_average_rejects_zero():
    try:
        m().moving_average([1], 0)
    except ValueError:
        return
    raise AssertionError("no ValueError for k=0")


@test
def percentile_extremes():
    assert m().percentile([5, 1, 3], 100) == 5
    assert m().percentile([5, 1, 3], 0) == 1


@test
def percentile_interpolates():
    assert abs(m().percentile([1, 2, 3, 4], 50) - 2.5) < 1e-9
    assert abs(m().percentile([10, 20, 30, 40, 50], 90) - 46.0) < 1e-9


run_all()
