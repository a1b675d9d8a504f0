"""``--json`` means stdout carries the result and nothing else.

Libraries write to stdout on their own: DeepSpeed's logger prints "Setting accelerator to CPU" the
first time transformers asks for it, and C extensions may print too. :func:`json_stdout` points file
descriptor 1 at stderr while the bench runs and hands back a writer to the real stdout, so
``python bench/x.py --json | jq`` (and ``make bench``) always gets one JSON document.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def json_stdout() -> Iterator[Callable[[str], None]]:
    """``with json_stdout() as emit: ...; emit(json.dumps(result))``."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)

    def emit(text: str) -> None:
        sys.stdout.flush()  # what was printed meanwhile goes to stderr first
        with os.fdopen(os.dup(saved), "w") as out:
            out.write(text + "\n")

    try:
        yield emit
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
