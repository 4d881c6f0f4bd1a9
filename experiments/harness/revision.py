"""Which code a run measured: the commit, whether the code differed from it, and how.

Note [A revision without a false -dirty]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A record's revision is the commit checked out, with "-dirty" where the code
differed from it. The records, tables and figures under experiments/results/
and the paper under paper/ are outputs, and rerunning the experiments rewrites
the tracked ones: judged on the whole tree, every rerun after the first would
call itself dirty. So those paths are left out of the comparison, and "-dirty"
means that the code measured is not the commit's. Where it is not, the
difference (``git diff`` against the commit, outputs left out) is kept beside
the record, cut at ``DIFF_LIMIT`` bytes, with the untracked files named, so
that the code can be rebuilt. Untracked files alone do not make a tree dirty,
as for ``git describe --dirty``. The queries take no lock and write nothing,
so they can run beside other work in the same tree.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

_REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
OUTPUTS = ("experiments/results", "paper")
"""Tracked outputs, left out of the comparison with the commit."""
DIFF_LIMIT = 256 * 1024
_CODE = [".", *(f":(exclude){path}" for path in OUTPUTS)]


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    """A read-only git query (optional locks off: the index is not written, even refreshed)."""
    return subprocess.run(
        ["git", *args],
        cwd=_REPOSITORY_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
    )


def _commit() -> str | None:
    try:
        found = _git("rev-parse", "--short", "HEAD")
    except (OSError, subprocess.SubprocessError):
        return None
    return found.stdout.strip() if found.returncode == 0 else None


def code_diff() -> str | None:
    """The code's difference from the commit (outputs left out), or None where there is none
    or no git; cut at ``DIFF_LIMIT`` bytes, and followed by the untracked files' names."""
    if _commit() is None:
        return None
    try:
        diff = _git("diff", "--no-color", "--no-ext-diff", "HEAD", "--", *_CODE)
        untracked = _git("ls-files", "--others", "--exclude-standard", "--", *_CODE)
    except (OSError, subprocess.SubprocessError):
        return None
    if diff.returncode != 0 or not diff.stdout:
        return None
    text = diff.stdout
    if len(text.encode()) > DIFF_LIMIT:
        text = text.encode()[:DIFF_LIMIT].decode(errors="ignore")
        text += f"\n# ... cut at {DIFF_LIMIT:,} bytes of {len(diff.stdout.encode()):,}\n"
    names = untracked.stdout.split() if untracked.returncode == 0 else []
    return text + "".join(f"# untracked: {name}\n" for name in names)


def revision() -> str | None:
    """The checked-out commit, with "-dirty" where the code differs from it; None outside git."""
    commit = _commit()
    if commit is None:
        return None
    try:
        changed = _git("diff", "--quiet", "HEAD", "--", *_CODE).returncode == 1
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("-dirty" if changed else "")
