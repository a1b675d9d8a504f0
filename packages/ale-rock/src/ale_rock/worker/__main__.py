"""``python -m ale_rock.worker``."""

import sys

from ale_rock.worker.cli import main

sys.exit(main())
