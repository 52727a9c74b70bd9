"""A run's path pictures as PNG, drawn by headless Chromium (or Google Chrome where that is what is
installed): the browser renders each pictures/path-FLOW.svg at its own size and screenshots it.

This module runs a program (the browser); the pictures themselves are pure (kpemu.report.picture).
Debian's `chromium` is what `kpemu setup --with browser` installs.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from kpemu.errors import EnvironmentProblem

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# no network, no first-run work, no sandbox (it runs as root in a lab run)
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars")
TIMEOUT = 90  # seconds one screenshot may take on a loaded machine


def find_browser() -> str | None:
    """The headless browser's path, or None when none is installed."""
    return next((b for b in map(shutil.which, BROWSERS) if b), None)


def svg_size(svg: str) -> tuple[int, int]:
    """The width and height an SVG document's root element gives (px); ValueError when it gives none."""
    m = re.search(r"<svg\b[^>]*?\swidth=\"(\d+(?:\.\d+)?)\"[^>]*?\sheight=\"(\d+(?:\.\d+)?)\"", svg)
    if m is None:
        raise ValueError("the SVG's root element has no width and height")
    return int(float(m.group(1)) + 0.5), int(float(m.group(2)) + 0.5)


def render_png(svg: Path, png: Path, browser: str | None = None) -> Path:
    """`svg` drawn into `png` at its own size; EnvironmentProblem when there is no browser or it fails."""
    browser = browser or find_browser()
    if browser is None:
        raise EnvironmentProblem("no headless browser for the PNG pictures (looked for "
                                 f"{', '.join(BROWSERS)})", "kpemu setup --with browser (installs chromium)")
    width, height = svg_size(svg.read_text())
    png.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="kpemu-chromium-") as profile:
        try:
            res = subprocess.run([browser, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
                                  f"--screenshot={png.resolve()}", svg.resolve().as_uri()],
                                 capture_output=True, text=True, timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            raise EnvironmentProblem(f"{browser} took over {TIMEOUT}s to draw {svg}",
                                     "try again on a less loaded machine") from None
    if res.returncode != 0 or not png.is_file():
        raise EnvironmentProblem(f"{browser} could not draw {svg} (exit {res.returncode}): {res.stderr[-500:]}",
                                 "open the SVG in a browser; it is the same picture")
    return png
