"""Markdown tables and single values for the paper, rendered from results records.

A record keeps each column's header and keys but not its display format, so
the format is chosen from the key: ratios and speed-ups as ``1.23x``, followed
by their interval where the record holds one (``1.23x [1.20, 1.26]``), times in
ms with one decimal, per-node times in us with two, integers with thousands
separators. Every number shown is therefore a rounding of a number in the
record, which is what the paper's provenance test checks.
"""

from __future__ import annotations

from typing import Any

from paper.builder.recorded import (
    TABLE_WITHOUT_INTERVALS,
    columns_not_recorded,
    has_intervals,
    predates,
)

RATIO_MARKERS = ("_over_", "speedup")


class PaperError(RuntimeError):
    """The paper cannot be generated as asked (missing results, bad placeholder)."""


def format_number(value: Any, key: str = "", spec: str | None = None) -> str:
    """One value as the paper shows it; ``spec`` is a format spec or ``"ratio"``."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if spec == "ratio" or (spec is None and _is_ratio(key) and isinstance(value, float)):
        return f"{value:.2f}x"
    if spec is not None:
        return format(value, spec)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{_decimals(key, value)}f}"
    if isinstance(value, list):
        return ", ".join(format_number(item, key) for item in value)
    raise PaperError(f"cannot show a {type(value).__name__} ({key!r}) as a number")


def _is_ratio(key: str) -> bool:
    return any(marker in key for marker in RATIO_MARKERS)


def is_measured_ratio(parent: dict[str, Any], key: str) -> bool:
    """Whether ``key`` is a median ratio of timings, which has an interval: a ratio with a
    minimum beside it (a prediction or a target has none)."""
    base = key.removesuffix("_cpu")
    return _is_ratio(key) and not key.endswith("_min") and f"{base}_min" in parent


def interval_text(interval: Any) -> str:
    """" [1.20, 1.26]" after a ratio; nothing where there is no interval."""
    if not isinstance(interval, list) or len(interval) != 2:
        return ""
    return f" [{interval[0]:.2f}, {interval[1]:.2f}]"


def _decimals(key: str, value: float) -> int:
    base = key.split("_min")[0].split("_cpu")[0]
    if base.endswith("_ms"):
        return 1
    if base.endswith("_us_per_node"):
        return 2
    return 2 if abs(value) < 100 else 1


def record_table(record: dict[str, Any], first_keys: list[str] | None = None) -> str:
    """The record's table; ``first_keys`` keeps only the columns whose first key is listed
    (those keyed by a field the record predates are left out, and a line says so: Note
    [Records older than their fields] in recorded.py)."""
    columns = record["columns"]
    newer: list[str] = []
    if first_keys:
        by_key = {column["keys"][0]: column for column in columns}
        newer = [key for key in first_keys if key not in by_key and predates(record, key)]
        unknown = [key for key in first_keys if key not in by_key and key not in newer]
        if unknown:
            raise PaperError(
                f"experiment {record['experiment']!r} has no column keyed {unknown}; "
                f"known: {sorted(by_key)}"
            )
        columns = [by_key[key] for key in first_keys if key in by_key]
    header = "| " + " | ".join(column["header"] for column in columns) + " |"
    rule = "|" + "|".join("---" for _ in columns) + "|"
    body = [
        "| " + " | ".join(_cell(row, column["keys"]) for column in columns) + " |"
        for row in record["rows"]
    ]
    table = "\n".join([header, rule, *body])
    if newer:
        table = f"{table}\n\n{columns_not_recorded(record['experiment'], newer)}"
    shown = [key for column in columns for key in column["keys"]]
    if has_intervals(record) or not any(
        is_measured_ratio(row, key) for row in record["rows"] for key in shown
    ):
        return table
    return f"{table}\n\n{TABLE_WITHOUT_INTERVALS.format(name=record['experiment'])}"


def _cell(row: dict[str, Any], keys: list[str]) -> str:
    return " / ".join(
        format_number(row.get(key), key) + interval_text(row.get(f"{key}_interval"))
        for key in keys
    )


def lookup(record: dict[str, Any], path: str) -> Any:
    """The value at a dotted ``path``: dict keys, list indices, or ``rows[field=value]``."""
    value: Any = record
    for part in path.split("."):
        if "[" in part and part.endswith("]"):
            name, selector = part[:-1].split("[", 1)
            field, _, wanted = selector.partition("=")
            candidates = _step(value, name, path)
            matches = [item for item in candidates if str(item.get(field)) == wanted]
            if len(matches) != 1:
                raise PaperError(f"{path!r}: {len(matches)} entries of {name!r} have {selector}")
            value = matches[0]
        else:
            value = _step(value, part, path)
    return value


def _step(value: Any, part: str, path: str) -> Any:
    if isinstance(value, list) and part.isdigit() and int(part) < len(value):
        return value[int(part)]
    if isinstance(value, dict) and part in value:
        return value[part]
    raise PaperError(f"{path!r}: no {part!r} in the record")
