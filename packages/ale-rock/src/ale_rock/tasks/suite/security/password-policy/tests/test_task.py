import hashlib

from ale_testlib import load_module, read, run_all, test


def m():
    return load_module("policy.py", "policy")


@test
def strong_password_passes():
    assert m().violations("Blue-Kettle-42x", "maria") == []


@test
def each_rule():
    v = m().violations
    assert v("Short1!") == ["length"]
    assert v("ALLUPPERCASE123!") == ["lower"]
    assert v("alllowercase123!") == ["upper"]
    assert v("NoDigitsHere!!ok") == ["digit"]
    assert v("NoSymbols1234abc") == ["symbol"]
    assert v("xXjohnsmithXx1!", "JohnSmith") == ["username"]
    assert v("Aaaaa-Bb-1234zz") == ["repeat"]
    assert v("Password123!", "") == ["common"]


@test
def several_in_order():
    assert m().violations("aaaa", "bob") == ["length", "upper", "digit", "symbol", "repeat"]
    assert m().violations("qwerty") == ["length", "upper", "digit", "symbol", "common"]


@test
def hashing_and_verify():
    want = hashlib.pbkdf2_hmac("sha256", b"pw", bytes.fromhex("00ff"), 100000).hex()
    assert m().hash_password("pw", "00ff") == want
    stored = f"pbkdf2_sha256$100000$00ff${want}"
    assert m().verify("pw", stored) and not m().verify("pW", stored)
    fast = hashlib.pbkdf2_hmac("sha256", b"pw", b"\x01", 10).hex()
    assert m().verify("pw", f"pbkdf2_sha256$10$01${fast}")


@test
def weak_users_file():
    assert read("weak_users.txt").split() == ["bob", "carol"], read("weak_users.txt")


run_all()
