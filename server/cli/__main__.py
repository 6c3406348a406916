"""``python -m server.cli``: the ``pattern-memory`` command."""

import sys

from . import command

sys.exit(command())
