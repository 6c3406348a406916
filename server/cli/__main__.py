"""``python -m server.cli``: the ``pattern-memory`` command."""

import sys

from . import main

sys.exit(main())
