import sys


def main(omega, zeta, x, v, dt, T):
    def f(x, v):
        return v, -2 * zeta * omega * v - omega * omega * x

    steps = round(T / dt)
    print("t,x,v")
    print(f"{0.0!r},{x!r},{v!r}")
    for i in range(1, steps + 1):
        k1x, k1v = f(x, v)
        k2x, k2v = f(x + dt / 2 * k1x, v + dt / 2 * k1v)
        k3x, k3v = f(x + dt / 2 * k2x, v + dt / 2 * k2v)
        k4x, k4v = f(x + dt * k3x, v + dt * k3v)
        x += dt / 6 * (k1x + 2 * k2x + 2 * k3x + k4x)
        v += dt / 6 * (k1v + 2 * k2v + 2 * k3v + k4v)
        print(f"{i * dt!r},{x!r},{v!r}")


if __name__ == "__main__":
    main(*(float(a) for a in sys.argv[1:7]))
