"""The paper's sentence on how the records' intervals and verdicts were computed.

Each record since schema 2 keeps the method of its intervals beside them (the
harness's ``intervals.method()``), so the sentence is built from the records:
the level, the number of resamples and the seed are the records' own. Records
that predate intervals are named, so that a reader knows which tables lack them.
"""

from __future__ import annotations

from typing import Any

from paper.builder.recorded import has_intervals
from paper.builder.tables import PaperError


def intervals_method(records: dict[str, dict[str, Any]]) -> str:
    """How the intervals were computed, as every record that has them states it."""
    methods = [record["intervals"] for record in records.values() if has_intervals(record)]
    older = [name for name, record in records.items() if not has_intervals(record)]
    distinct = [dict(method) for method in {tuple(sorted(m.items())): m for m in methods}.values()]
    if len(distinct) > 1:
        raise PaperError(f"the records' intervals were computed {len(distinct)} ways: {distinct}")
    said = [_method_sentence(distinct[0])] if distinct else []
    if older:
        said.append(
            "These records predate intervals, and their ratios are shown without them: "
            + ", ".join(f"`{name}`" for name in older)
            + " (rerun them with `python -m experiments run NAME`)."
        )
    return " ".join(said)


def _method_sentence(method: dict[str, Any]) -> str:
    return (
        f"Each median ratio of timings carries a {method['level']:.0%} interval, shown in "
        f"brackets after it: a {method['method']} of the {method['statistic']}, with "
        f"{method['resamples']:,} resamples of {method['resampling']}, from a generator seeded "
        f"with {method['seed']} for every interval, so that the same samples always give the "
        "same interval (Note [Bootstrap intervals of ratios] in "
        "`experiments/harness/intervals.py`). A verdict against a target is 'met' when the "
        "intervals of both the wall-time and the CPU-time median lie on the target's side, "
        "'missed' when either lies beyond it, and 'inconclusive' when an interval straddles it "
        "(Note [Verdicts from intervals] in `experiments/harness/verdicts.py`)."
    )
