"""The notebook-style tour runs top to bottom (each cell asserts what it shows)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

TOUR = pathlib.Path(__file__).resolve().parents[1] / "interop" / "tour.py"


def test_tour_runs_cleanly() -> None:
    done = subprocess.run(
        [sys.executable, str(TOUR)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "ExpBackward0" in done.stdout
    assert "backend" in done.stdout.lower()


def test_tour_is_percent_format() -> None:
    cells = TOUR.read_text().count("# %%")
    assert cells >= 10
