"""The bootstrap intervals of the ratios, their place in rows and tables, and the ratio figures.

Timings are never asserted here: the samples are made up.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.harness import intervals, peer_table
from experiments.harness.plots import RatioPanel, RatioSeries, ratio_bars
from experiments.harness.results import Column
from experiments.harness.timing import Missing, Timing

SLOW = (2.0, 2.2, 1.9, 2.1, 2.05, 1.95, 2.3)
FAST = (1.0, 1.1, 0.95, 1.05, 1.02, 0.98, 1.2)


def test_an_interval_holds_the_ratio_of_medians_and_is_reproducible() -> None:
    found = intervals.ratio_interval(SLOW, FAST)
    assert found is not None and found[0] < 2.05 / 1.02 < found[1]
    assert intervals.ratio_interval(SLOW, FAST) == found  # the seed is fixed


def test_an_interval_narrows_as_the_samples_agree() -> None:
    steady = intervals.ratio_interval((2.0,) * 7, (1.0,) * 7)
    noisy = intervals.ratio_interval(SLOW, FAST)
    assert steady == [2.0, 2.0]
    assert noisy[1] - noisy[0] > 0


def test_a_paired_interval_resamples_rounds() -> None:
    found = intervals.paired_interval(SLOW, FAST)
    per_round = sorted(s / f for s, f in zip(SLOW, FAST, strict=True))
    assert found is not None and per_round[0] <= found[0] <= found[1] <= per_round[-1]
    assert intervals.paired_interval(SLOW, FAST[:-1]) is None


def test_no_samples_or_a_zero_median_give_no_interval() -> None:
    assert intervals.ratio_interval((), FAST) is None
    assert intervals.ratio_interval(SLOW, (0.0,) * 3) is None


def test_a_ratio_of_two_timings_carries_its_intervals_and_a_missing_peer_none() -> None:
    slow, fast = Timing(SLOW, SLOW), Timing(FAST, FAST)
    row = peer_table.ratio_of("a_over_b", slow, fast)
    assert set(row) == {"a_over_b", "a_over_b_min", "a_over_b_cpu", "a_over_b_interval",
                        "a_over_b_cpu_interval"}
    assert row["a_over_b"] == pytest.approx(2.05 / 1.02)
    assert row["a_over_b_interval"] == intervals.ratio_interval(SLOW, FAST)
    absent = peer_table.ratio_of("a_over_b", slow, Missing("not installed", failed=False))
    assert absent["a_over_b"] is None and absent["a_over_b_interval"] is None


def test_a_table_cell_shows_the_interval_after_its_ratio() -> None:
    column = peer_table.ratio_column("A / B", "r")
    row = {"r": 2.0, "r_interval": [1.9, 2.15], "r_min": 1.8, "r_cpu": 2.1,
           "r_cpu_interval": None}
    assert column.render(row) == "2.00x [1.90, 2.15] / 1.80x / 2.10x"
    assert "interval" in column.header
    assert Column("n", ("n",), "{:,}").render({"n": 1000}) == "1,000"


def test_a_ratio_figure_draws_its_intervals_and_targets(tmp_path: Path) -> None:
    panel = RatioPanel(
        title="t", ylabel="ratio", groups=["a long workload name that wraps", "b"],
        series=[RatioSeries("A / B", [1.2, None], [[1.1, 1.3], None])], targets=[1.5, None],
    )
    assert ratio_bars(tmp_path / "figure.png", [panel], "title")
    assert (tmp_path / "figure.png").read_bytes().startswith(b"\x89PNG")
    nothing = RatioPanel("t", "ratio", ["a"], [RatioSeries("A / B", [None], [None])])
    assert not ratio_bars(tmp_path / "empty.png", [nothing], "title")
    assert not (tmp_path / "empty.png").exists()


def test_a_peer_keeps_the_cores_it_used_beside_its_wall_and_cpu_times() -> None:
    threaded = Timing((1.0, 1.2, 0.8), (1.5, 1.9, 1.2))  # CPU median 1.5 over wall median 1.0
    row = peer_table.peer_times(
        {"jax": threaded, "torch": Missing("not installed", failed=False)}, "ms", 1e3
    )
    assert row["jax_ms"] == pytest.approx(1000.0) and row["jax_ms_cpu"] == pytest.approx(1500.0)
    assert row["jax_ms_cores"] == pytest.approx(1.5) == threaded.to_json()["cores"]
    assert row["torch_ms_cores"] is None
    assert Timing((0.0,), (0.0,)).cores is None  # no wall time: no quotient
    column = peer_table.peer_column("jax", "JAX, ms", "ms", "{:.1f}")
    assert column.keys == ("jax_ms", "jax_ms_cpu", "jax_ms_cores")
    assert column.header == "JAX, ms (wall / CPU / cores)"
    assert column.render(row) == "1000.0 / 1500.0 / 1.50"
    assert peer_table.peer_column("torch", "PyTorch, ms", "ms", "{:.1f}").render(row) == (
        "n/a / n/a / n/a"
    )
