"""Build the wheelhouse: an sdist and a wheel of each package and of the `ale` meta-package.

`make dist` runs this (`python scripts/dist.py [OUT]`, default `dist/`). Then, with nothing else
given, `pip install --find-links dist ale-rock` (or any other package, with its extras) resolves
the siblings from the wheelhouse and everything else from the index.

Why not `pip wheel ./packages/x`: setuptools builds in-tree and packs whatever an old `build/lib`
still holds (modules since deleted from `src/`). Like `python -m build`, each wheel here is built
from its freshly made sdist unpacked in a temporary directory, so the wheel holds exactly what the
sdist ships, and an sdist that misses a file fails here, not on a user's machine. The build uses
the calling interpreter's setuptools (no build isolation: no network, and fast).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Leaves first: the order pip would need them in (documentation only; the builds are independent).
PROJECTS = [
    ROOT / "packages" / "ale-proto",
    ROOT / "packages" / "ale-rock",
    ROOT / "packages" / "ale-flow",
    ROOT / "packages" / "ale-roll",
    ROOT,
]


@contextlib.contextmanager
def _cwd(path: Path) -> Iterator[None]:
    old = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """setuptools narrates every file it copies; keep it, and show it only when a build fails."""
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            yield
    except BaseException:
        sys.stderr.write(buf.getvalue())
        raise


def build_one(project: Path, out: Path) -> list[Path]:
    """sdist of `project` into `out`, then a wheel built from that sdist; returns both paths."""
    from setuptools import build_meta  # the PEP 517 backend every pyproject here declares

    with _quiet(), _cwd(project):
        sdist = out / build_meta.build_sdist(str(out))
    with tempfile.TemporaryDirectory(prefix="ale-dist-") as tmp:
        with tarfile.open(sdist) as tf:
            tf.extractall(tmp, filter="data")
        (src,) = Path(tmp).iterdir()
        with _quiet(), _cwd(src):
            wheel = out / build_meta.build_wheel(str(out))
    return [sdist, wheel]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("out", nargs="?", default=str(ROOT / "dist"), help="wheelhouse directory")
    args = ap.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    # A clean wheelhouse: a stale build of the same version next to a fresh one is picked at random.
    for old in [*out.glob("*.whl"), *out.glob("*.tar.gz")]:
        old.unlink()
    for project in PROJECTS:
        for path in build_one(project, out):
            print(path.relative_to(out.parent) if out.parent in path.parents else path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
