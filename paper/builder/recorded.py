"""What a record may lack because it was written before the field existed, and how to say so.

Note [Records older than their fields]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A record names the schema it was written with (``schema_version``). Schema 2
added the intervals of the ratios, the verdicts, the environment and the
fastest eager configuration's name. A placeholder that asks a record for such
a field, where the record's schema predates it, is shown as not recorded,
naming the command that records it; every other missing field is an error, so
a mistyped placeholder still stops the build, and once every record is rerun
nothing is shown as not recorded. ``ADDED_IN`` lists the fields the template
may ask of an older record, by the last key of their path.
"""

from __future__ import annotations

from typing import Any

INTERVALS_SINCE = 2
ADDED_IN = {"jaxstream_best": 2}
"""Fields the paper cites that a record older than the version given does not hold."""


def schema(record: dict[str, Any]) -> int:
    return int(record.get("schema_version", 1))


def has_intervals(record: dict[str, Any]) -> bool:
    """Whether the record's ratios carry intervals (Note [Bootstrap intervals of ratios] in
    experiments/harness/intervals.py)."""
    return schema(record) >= INTERVALS_SINCE


def predates(record: dict[str, Any], key: str) -> bool:
    """Whether ``key`` is missing from the record only because its schema predates it."""
    return key in ADDED_IN and schema(record) < ADDED_IN[key]


def not_recorded(name: str) -> str:
    """What the paper shows for a field its record predates."""
    return f"(not recorded: rerun `python -m experiments run {name}`)"


INTERVAL_NOT_RECORDED = "(interval not recorded)"
TABLE_WITHOUT_INTERVALS = (
    "*Intervals: not recorded in this record, which predates them; rerun the experiment "
    "(`python -m experiments run {name}`) to get them.*"
)
