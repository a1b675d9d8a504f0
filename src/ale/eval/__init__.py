"""`ale eval`: run ale-flow in agent-native mode on every task of a suite, in sandboxes, and score it.

    from ale.eval import EvalConfig, run_eval
    summary = run_eval(EvalConfig(base_url="http://localhost:8000/v1", model="my-model"))
"""

from ale.eval.config import EvalConfig
from ale.eval.run import run_eval

__all__ = ["EvalConfig", "run_eval"]
