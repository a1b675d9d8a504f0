"""`import ale_flow` (and its CLI module) must not pull in torch."""

import subprocess
import sys


def test_import_does_not_load_torch():
    code = "import sys, ale_flow, ale_flow.cli, ale_flow.models.openai, ale_flow.models.scripted; print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False False"
