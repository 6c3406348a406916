"""The dashboard screenshots in ``docs/screenshots/``, taken on a store built with the real model.

    python scripts/screenshots.py [--root ~/pattern-demo] [--out docs/screenshots] [--keep]

Builds a store in ``ROOT/.pattern-store`` with the packaged all-MiniLM-L6-v2 (the default
embedder): the dashboard's demo data (memories of four agents in every scope, a graph of
services and people, three lessons, one chat session, one pending proposal, the folder
``ROOT/shop`` ingested; ``tests/ui_util.populate_demo``). Then it starts ``pattern-memory
daemon`` on it, signs in through a one-time link in Debian's Chromium (``/usr/bin/chromium``,
driven by Playwright; ``apt-get install -y chromium``), walks every page
(``tests/ui_tour.py``, the walk the browser tests check) and writes one PNG per page.
``ROOT`` must not exist (it is removed afterwards unless ``--keep``). Run it from the
checkout with the development install (``make screenshots``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
PROJECT, AGENT = "shop", "dev"


def build_store(root: Path, env: dict[str, str]) -> None:
    """The demo data, embedded with the real model, in ``root/.pattern-store``."""
    from server.service.core.runtime import Runtime
    from tests.ui_util import populate_demo

    rt = Runtime.start(env, root, background=False)
    try:
        populate_demo(rt, root / "shop", xss=False)
    finally:
        rt.close()


def start_daemon(home: Path, env: dict[str, str]) -> subprocess.Popen:
    from server.http.daemonfiles import wait_announced

    proc = subprocess.Popen(
        [sys.executable, "-m", "server.cli", "daemon", "--home", str(home)],
        env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        wait_announced(home, proc)
    except RuntimeError as exc:
        raise SystemExit(str(exc)) from None
    return proc


def shoot_every_page(home: Path, out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    from server.http.daemon import read_info
    from server.ui.logins import login_url
    from tests.ui_tour import tour

    out.mkdir(parents=True, exist_ok=True)
    written = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        context = browser.new_context(viewport={"width": 1180, "height": 760},
                                      device_scale_factor=1)  # fmt: skip
        page = context.new_page()
        page.goto(login_url(read_info(home)))
        page.wait_for_url("**/ui/")

        def shoot(name: str) -> None:
            path = out / f"{name}.png"
            page.screenshot(path=str(path), full_page=False)
            written.append(path)

        tour(page, shoot)
        browser.close()
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default="~/pattern-demo", help="a new folder for the demo store")
    ap.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    ap.add_argument("--keep", action="store_true", help="keep ROOT (the store) afterwards")
    args = ap.parse_args(argv)
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"{CHROMIUM} is missing: apt-get install -y chromium")
    root = Path(args.root).expanduser().resolve()
    if root.exists():
        raise SystemExit(f"{root} exists: remove it or pass another --root")
    home = root / ".pattern-store"
    env = {"PATTERN_HOME": str(home), "PATTERN_PROJECT_ID": PROJECT, "PATTERN_AGENT_ID": AGENT,
           "PATTERN_ALLOWED_DIRS": str(root), "PATTERN_TEAM_REVIEW": "on"}  # fmt: skip
    env.pop("PATTERN_EMBEDDER", None)
    os.environ.pop("PATTERN_EMBEDDER", None)  # the default: the packaged real model
    root.mkdir(parents=True)
    try:
        build_store(root, env)
        proc = start_daemon(home, env)
        try:
            from tests.ui_tour import wait_model_ready

            wait_model_ready(home, PROJECT, AGENT)
            written = shoot_every_page(home, Path(args.out))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    for path in written:
        print(f"{path}  {path.stat().st_size // 1024} KB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
