"""`ale --help` answers quickly and imports nothing heavy."""

from __future__ import annotations

import subprocess
import sys


def test_help_lists_commands_without_heavy_imports() -> None:
    code = (
        "import sys; from ale.cli import app; from typer.testing import CliRunner; "
        "r = CliRunner().invoke(app, ['--help']); print(r.output); "
        "heavy = [m for m in ('torch', 'transformers', 'grpc', 'ale_rock', 'ale_roll', 'ale_flow') if m in sys.modules]; "
        "print('HEAVY', heavy)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for cmd in ("up", "down", "status"):
        assert cmd in r.stdout
    assert "HEAVY []" in r.stdout, r.stdout
