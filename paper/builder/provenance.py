"""One line per record saying how, where, with what and under which conditions it was taken."""

from __future__ import annotations

from typing import Any

GIB = 2**30


def provenance_line(name: str, record: dict[str, Any]) -> str:
    """Command, mode, date, revision (and its diff), machine, versions and, where the record
    holds them, the thread and allocator variables, the load and the free memory."""
    machine = record["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in record["versions"].items())
    diff = record["files"].get("diff")
    line = (
        f"- `{name}`: `{record['command']}` ({record['mode']} mode, device "
        f"{record['device']}, intra-op threads {record['intra_op_threads']}), "
        f"{record['date_utc']}, revision {record['revision'] or 'unknown'}"
        + (f" (its difference from the commit: `{diff}`)" if diff else "")
        + f"; {machine['processor']}, {machine['usable_cpus']} usable of "
        f"{machine['cpu_count']} CPUs; {versions}"
    )
    environment = record.get("environment")
    return f"{line}; {_conditions(environment)}." if environment else f"{line}."


def _conditions(environment: dict[str, Any]) -> str:
    variables = ", ".join(f"`{k}={v}`" for k, v in environment["variables"].items())
    return (
        f"variables {variables or 'none set'}; "
        f"at start {_snapshot(environment['at_start'])}, at end {_snapshot(environment['at_end'])}"
    )


def _snapshot(found: dict[str, Any] | None) -> str:
    """"load 1.52, 21.2 of 23.5 GiB free": the 1-minute load average and available memory."""
    if found is None:
        return "not taken"
    load, free, total = (found["load_average"], found["memory_available_bytes"],
                         found["memory_total_bytes"])
    shown_load = "n/a" if load is None else f"{load[0]:.2f}"
    shown_memory = (
        "n/a" if free is None or total is None else f"{free / GIB:.1f} of {total / GIB:.1f} GiB"
    )
    return f"load {shown_load}, {shown_memory} free"
