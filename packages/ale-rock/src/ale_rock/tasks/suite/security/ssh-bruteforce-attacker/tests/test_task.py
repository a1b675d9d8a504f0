import json

from ale_testlib import read, run_all, test


def findings():
    return json.loads(read("findings.json"))


def success_line():
    return next(x for x in read("auth.log").splitlines() if "Accepted password for backup from 45.13.2.200" in x)


@test
def attacker_and_user():
    f = findings()
    assert f["attacker_ip"] == "45.13.2.200" and f["compromised_user"] == "backup", f


@test
def first_success_timestamp():
    assert findings()["first_success"] == success_line()[:15], (findings()["first_success"], success_line()[:15])


@test
def failure_counts():
    assert findings()["failed_by_ip"] == {"10.0.0.5": 1, "203.0.113.77": 7, "198.51.100.9": 3,
                                          "45.13.2.200": 6, "9.9.9.10": 5}


@test
def blocklist_sorted_numerically():
    assert read("blocklist.txt").split() == ["9.9.9.10", "45.13.2.200", "203.0.113.77"], read("blocklist.txt")


run_all()
