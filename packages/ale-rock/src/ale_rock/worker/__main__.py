"""``python -m ale_rock.worker [--config FILE] [--set|-c key=value ...]``: the ``ale-rock worker``
command (one CLI, the one in :mod:`ale_rock.cli`), for environments without the console script."""

import sys

from ale_rock.cli import app

app(["worker", *sys.argv[1:]], prog_name="python -m ale_rock.worker")
