"""``python -m ale_rock.rocklet``: run the Rocklet (normally started by a backend inside a sandbox)."""

import sys

from ale_rock.rocklet.server import main

sys.exit(main())
