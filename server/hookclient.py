"""The hook client's former path. Hooks installed by an earlier version run
``python -S …/server/hookclient.py EVENT``; this file runs the client where it lives now
(``server/hooks/hookclient.py``), so those hooks keep working until ``pattern-memory hooks
install`` rewrites them."""

import os
import runpy

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    runpy.run_path(os.path.join(here, "hooks", "hookclient.py"), run_name="__main__")
