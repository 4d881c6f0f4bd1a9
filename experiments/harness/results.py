"""What an experiment hands back: a table plus the facts needed to judge it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.harness.intervals import interval_text


@dataclass(frozen=True)
class Column:
    """One Markdown column: the values at ``keys`` (e.g. median and min) joined by " / ".

    Each value is shown with ``fmt`` (or, where ``fmt`` is a tuple, the format of its
    key's position), followed by its interval where the row holds one under
    ``{key}_interval``; ``None`` shows as "n/a".
    """

    header: str
    keys: tuple[str, ...]
    fmt: str | tuple[str, ...] = "{}"

    def render(self, row: dict[str, Any]) -> str:
        return " / ".join(
            self._render_value(row.get(key), index)
            + interval_text(row.get(f"{key}_interval"))
            for index, key in enumerate(self.keys)
        )

    def _render_value(self, value: Any, index: int) -> str:
        if value is None:
            return "n/a"
        if isinstance(value, str):
            return value
        return (self.fmt if isinstance(self.fmt, str) else self.fmt[index]).format(value)


@dataclass
class ExperimentResult:
    """Rows are JSON-ready dicts; ``columns`` pick what the Markdown table shows.

    ``failures`` maps "case: peer" to the error a peer raised (a bug to fix,
    unlike a peer that is not installed, which is only "n/a").
    """

    columns: list[Column]
    rows: list[dict[str, Any]]
    parameters: dict[str, Any] = field(default_factory=dict)
    checks: dict[str, Any] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    appendix_markdown: str = ""
    plot: Callable[[Path], bool] | None = None
    """Writes the figure to the path given; False if there was nothing to draw."""
    extra_plots: dict[str, Callable[[Path], bool]] = field(default_factory=dict)
    """More figures, by a short name (a file-name part), each written and shown after ``plot``'s."""
