from ale_testlib import py, read, run_all, test


def parse(line):
    line = line.strip()
    return "none" if line == "none" else [float(x) for x in line.split()]


def close(got, want):
    if want == "none":
        return got == "none"
    return got != "none" and len(got) == len(want) and all(abs(a - b) < 2e-6 for a, b in zip(got, want))


def run(polys):
    p = py("roots.py", input="\n".join(polys) + "\n")
    assert p.returncode == 0, p.stderr[-300:]
    return [parse(x) for x in p.stdout.strip().split("\n")]


@test
def sample_file():
    got = [parse(x) for x in read("roots.txt").strip().split("\n")]
    want = [[1, 2], "none", [2], [1, 2, 3], [-1.414214, 1.414214]]
    assert len(got) == 5 and all(close(g, w) for g, w in zip(got, want)), got


@test
def repeated_and_zero_roots():
    got = run(["1 -2 1", "1 0 0 0", "1 -1 0"])
    assert close(got[0], [1]) and close(got[1], [0]) and close(got[2], [0, 1]), got


@test
def high_degree_wilkinson_like():
    # (x-1)(x-2)...(x-7) * (x^2 + 1)
    coeffs = [1.0]
    for r in range(1, 8):
        coeffs = [a - r * b for a, b in zip(coeffs + [0.0], [0.0] + coeffs)]
    coeffs = [a + b for a, b in zip(coeffs + [0.0, 0.0], [0.0, 0.0] + coeffs)]
    got = run([" ".join(repr(c) for c in coeffs)])
    assert close(got[0], [1, 2, 3, 4, 5, 6, 7]), got


@test
def close_roots_and_formatting():
    p = py("roots.py", input="1 -0.001 -0.000002\n1 0\n")
    vals = p.stdout.strip().split("\n")
    assert close(parse(vals[0]), [-0.001, 0.002]), vals
    assert vals[1].strip() == "0.000000", vals


run_all()
