"""The paper generator: every number in the paper's tables comes from a results file.

The only table allowed to hold numbers from elsewhere is the one quoted from
PyTorch PR #82544, and it must carry its source line.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from experiments.harness import intervals
from experiments.harness.reports import DEFAULT_RESULTS_DIR
from paper.builder import PaperError, render_paper, write_paper
from paper.builder.quoted import QUOTED_MARKER
from paper.builder.render import PLACEHOLDER

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = REPOSITORY_ROOT / "paper" / "paper.template.md"
COMMITTED_PAPER = REPOSITORY_ROOT / "paper" / "paper.md"
PR_URL = "https://github.com/pytorch/pytorch/pull/82544"
# The FP32 table of the PR's description, as published.
PR_NUMBERS = {"55.658", "29.392", "1.90", "29.547", "81.173", "54.917", "1.47", "68.988", "1.18"}
# A number: digits not glued to a letter on their left (so "A100", "FP32" and
# "v0.1.1" are names, not numbers), optional thousands separators and decimals.
NUMBER = re.compile(
    r"(?<![A-Za-z0-9_.])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![A-Za-z0-9_.,])\d+(?:\.\d+)?"
)


def numbers_in(text: str) -> list[str]:
    """The numbers in ``text``, thousands separators removed."""
    return [match.replace(",", "") for match in NUMBER.findall(text)]


NOT_FIGURES = (
    r"```.*?```",  # code blocks
    r"`[^`\n]*`",  # code: `sim:0`, `MulBackward0`
    r"Note \[[^\]]*\]",  # a Note's name, which may wrap
    r"#\d+",  # a PR's or an issue's number
    r"https?://\S+",  # an address
    r"(?m)^\s*\d+\.\s",  # a numbered list's markers
)


def typed_figures(template: str) -> tuple[list[str], list[str]]:
    """The numbers typed into the template outside its placeholders, code, Note names, PR
    numbers and list markers: (those outside a quoted source block, those inside one). A
    quoted block is the line that starts with the quoted marker and the table under it."""
    text = PLACEHOLDER.sub(" ", template)
    for pattern in NOT_FIGURES:
        text = re.sub(pattern, " ", text, flags=re.S)
    outside, quoted = [], []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        in_quote = line.startswith("|") and any(
            before.startswith(QUOTED_MARKER) for before in _block_head(lines, index)
        )
        (quoted if in_quote or line.startswith(QUOTED_MARKER) else outside).extend(
            numbers_in(line)
        )
    return outside, quoted


def _block_head(lines: list[str], index: int) -> list[str]:
    """The last non-blank line above the table that holds line ``index``."""
    while index > 0 and lines[index - 1].startswith("|"):
        index -= 1
    above = [line for line in lines[:index] if line.strip()]
    return above[-1:]


def markdown_tables(markdown: str) -> list[tuple[str, list[str]]]:
    """Each table as (the last non-blank line before it, its lines)."""
    tables: list[tuple[str, list[str]]] = []
    lines = markdown.splitlines()
    index = 0
    while index < len(lines):
        if lines[index].startswith("|"):
            before = next((line for line in reversed(lines[:index]) if line.strip()), "")
            start = index
            while index < len(lines) and lines[index].startswith("|"):
                index += 1
            tables.append((before, lines[start:index]))
        else:
            index += 1
    return tables


class Provenance:
    """Every number a results file holds, as it may be shown at any precision."""

    def __init__(self, results_dir: Path) -> None:
        self.strings: set[str] = set()
        self.values: list[float] = []
        # The experiments' records, and the GPU check's reports the paper's GPU section reads.
        for path in sorted([*results_dir.glob("*.json"), *results_dir.glob("gpu/*.json")]):
            self._collect(json.loads(path.read_text(encoding="utf-8")))
        # A fraction (a host share, a prediction's error) may be shown as a percentage.
        percents = [100 * value for value in self.values if abs(value) <= 10]
        self.shown = {
            decimals: {f"{abs(value):.{decimals}f}" for value in (*self.values, *percents)}
            for decimals in range(7)
        }

    def _collect(self, value: object) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                self.strings.update(numbers_in(str(key)))
                self._collect(item)
        elif isinstance(value, list):
            for item in value:
                self._collect(item)
        elif isinstance(value, str):
            self.strings.update(numbers_in(value))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            self.values.append(float(value))

    def explains(self, number: str) -> bool:
        decimals = len(number.partition(".")[2])
        return number in self.strings or number in self.shown.get(decimals, set())

    def unexplained(self, markdown: str) -> list[str]:
        """Numbers in non-quoted tables that no results file holds."""
        missing = []
        for before, table in markdown_tables(markdown):
            if before.startswith(QUOTED_MARKER):
                continue
            missing += [n for line in table for n in numbers_in(line) if not self.explains(n)]
        return missing


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The paper generated by the command line into a temporary directory."""
    out_dir = tmp_path_factory.mktemp("paper")
    completed = subprocess.run(
        [sys.executable, "-m", "experiments", "paper", "--out", str(out_dir)],
        cwd=REPOSITORY_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert "paper.md" in completed.stdout
    yield out_dir / "paper.md"


def test_every_table_number_comes_from_a_results_file(generated: Path) -> None:
    markdown = generated.read_text(encoding="utf-8")
    assert len(markdown_tables(markdown)) >= 3
    assert Provenance(DEFAULT_RESULTS_DIR).unexplained(markdown) == []


def test_the_check_catches_a_number_from_nowhere(generated: Path) -> None:
    markdown = generated.read_text(encoding="utf-8")
    forged = markdown + "\n\n| workload | us/node |\n|---|---|\n| chain | 123.456 |\n"
    assert Provenance(DEFAULT_RESULTS_DIR).unexplained(forged) == ["123.456"]


def test_only_the_pr_82544_table_is_quoted_and_it_names_its_source(generated: Path) -> None:
    quoted = [
        (before, table)
        for before, table in markdown_tables(generated.read_text(encoding="utf-8"))
        if before.startswith(QUOTED_MARKER)
    ]
    assert len(quoted) == 1
    before, table = quoted[0]
    assert "PyTorch PR #82544" in before and PR_URL in before
    assert {n for line in table for n in numbers_in(line)} == PR_NUMBERS


def test_the_template_types_no_figure_outside_a_quoted_source() -> None:
    outside, quoted = typed_figures(TEMPLATE.read_text(encoding="utf-8"))
    assert outside == [], "a number typed into paper/paper.template.md: use a placeholder"
    assert set(quoted) <= PR_NUMBERS


def test_the_figure_check_catches_a_typed_number_and_allows_the_quoted_table() -> None:
    template = TEMPLATE.read_text(encoding="utf-8")
    assert typed_figures(template + "\nA node costs 2.1 us.\n")[0] == ["2.1"]
    quoted = f"\n{QUOTED_MARKER} Source: {PR_URL}.\n\n| a | b |\n|---|---|\n| 55.658 | 1.90 |\n"
    assert typed_figures(template + quoted) == ([], ["55.658", "1.90"])
    assert typed_figures("`sim:0` PR #82544 Note [Ready queue 2]\n1. **x**\n") == ([], [])


def test_every_placeholder_is_filled(generated: Path) -> None:
    markdown = generated.read_text(encoding="utf-8")
    assert "{{" not in markdown and "}}" not in markdown
    assert "{{" in TEMPLATE.read_text(encoding="utf-8")


def test_every_referenced_figure_exists(generated: Path) -> None:
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", generated.read_text(encoding="utf-8"))
    assert figures
    for figure in figures:
        assert (generated.parent / figure).is_file(), figure


def test_every_cited_note_exists_in_the_code(generated: Path) -> None:
    notes = re.findall(r"Note \[([^\]]+)\]", generated.read_text(encoding="utf-8"))
    cited = {" ".join(note.split()) for note in notes}  # a name may wrap across lines
    source = "\n".join(
        path.read_text(encoding="utf-8")
        for package in ("jaxstream", "experiments")  # the harness keeps notes of its own
        for path in (REPOSITORY_ROOT / package).rglob("*.py")
    )
    assert cited
    assert sorted(note for note in cited if f"Note [{note}]" not in source) == []


def test_every_cited_source_file_exists(generated: Path) -> None:
    cited = set(re.findall(r"`(jaxstream/[\w/]+\.py)`", generated.read_text(encoding="utf-8")))
    assert cited
    assert sorted(path for path in cited if not (REPOSITORY_ROOT / path).is_file()) == []


def test_the_committed_paper_matches_the_results(generated: Path) -> None:
    assert COMMITTED_PAPER.read_text(encoding="utf-8") == generated.read_text(
        encoding="utf-8"
    ), "paper/paper.md is stale: run `python -m experiments paper`"


def _results_without(name: str, tmp_path: Path) -> Path:
    results = tmp_path / "results"
    shutil.copytree(DEFAULT_RESULTS_DIR, results)
    (results / f"{name}.json").unlink()
    return results


def test_a_missing_results_file_names_the_experiment(tmp_path: Path) -> None:
    results = _results_without("hessian", tmp_path)
    with pytest.raises(PaperError, match=r"hessian.*python -m experiments run hessian"):
        write_paper(results, TEMPLATE, tmp_path / "paper")
    assert not (tmp_path / "paper" / "paper.md").exists()


def test_the_command_fails_clearly_without_a_results_file(tmp_path: Path) -> None:
    results = _results_without("engine_overhead", tmp_path)
    completed = subprocess.run(
        [sys.executable, "-m", "experiments", "paper", "--results", str(results),
         "--out", str(tmp_path / "paper")],
        cwd=REPOSITORY_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 1
    assert "engine_overhead" in completed.stderr


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{{table:hessian|no_such_column}}", "no column keyed"),
        ("{{value:hessian.rows[key=nothing].batch}}", "0 entries"),
        ("{{value:hessian.no_such_field}}", "no 'no_such_field'"),
        ("{{chart:hessian}}", "unknown placeholder kind 'chart'"),
        ("{{quoted:elsewhere}}", "no quoted table"),
        ("{{note:hessian|No such note}}", "0 notes"),
    ],
)
def test_a_bad_placeholder_is_an_error(template: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(PaperError, match=re.escape(message)):
        render_paper(template, DEFAULT_RESULTS_DIR, tmp_path)


def test_values_are_shown_as_the_records_hold_them(tmp_path: Path) -> None:
    text = render_paper(
        "{{value:hessian.parameters.batch}} {{value:hessian.rows[key=hessian].batch|,}} "
        "{{value:hessian.parameters.batch|ratio}}",
        DEFAULT_RESULTS_DIR,
        tmp_path,
    )
    batch = json.loads((DEFAULT_RESULTS_DIR / "hessian.json").read_text())["parameters"]["batch"]
    assert text.splitlines()[-1] == f"{batch:,} {batch:,} {batch:.2f}x"


def test_results_the_template_does_not_cite_get_a_generic_section(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(DEFAULT_RESULTS_DIR, results)
    record = json.loads((results / "engine_overhead.json").read_text(encoding="utf-8"))
    record.update(experiment="newcomer", description="A new experiment.")
    record["files"]["plot"] = None
    (results / "newcomer.json").write_text(json.dumps(record), encoding="utf-8")
    text = render_paper(
        "{{table:hessian}}\n\n{{results:other}}\n\n{{setting:device}}",
        results,
        tmp_path,
    )
    assert "### newcomer" in text and "A new experiment." in text
    assert "### engine_overhead" in text and "### hessian" not in text
    assert text.rstrip().endswith("\ncpu")
    assert Provenance(results).unexplained(text) == []


def _write_record(results: Path, name: str, schema: int, row: dict) -> None:
    """A minimal record of ``schema``'s version with one row and a ratio column."""
    record = {
        "schema_version": schema, "experiment": name, "description": "A demo.",
        "columns": [{"header": "A / B", "keys": ["a_over_b", "a_over_b_min", "a_over_b_cpu"]}],
        "rows": [row], "notes": [], "files": {"plot": None, "extra_plots": {}},
    }
    if schema >= 2:
        record["intervals"] = intervals.method()
    results.mkdir(exist_ok=True)
    (results / f"{name}.json").write_text(json.dumps(record), encoding="utf-8")


RATIO_ROW = {"a_over_b": 1.5, "a_over_b_min": 1.4, "a_over_b_cpu": 1.6}


def test_ratios_show_their_intervals_or_say_they_were_not_recorded(tmp_path: Path) -> None:
    results = tmp_path / "results"
    _write_record(results, "new", 2, {**RATIO_ROW, "a_over_b_interval": [1.42, 1.58],
                                      "a_over_b_cpu_interval": [1.5, 1.7]})
    _write_record(results, "old", 1, RATIO_ROW)
    text = render_paper(
        "{{table:new}}\n\n{{value:new.rows.0.a_over_b}}\n\n{{table:old}}\n\n"
        "{{value:old.rows.0.a_over_b}}"
        "\n\n{{intervals:method}}",
        results, tmp_path,
    )
    assert "| 1.50x [1.42, 1.58] / 1.40x / 1.60x [1.50, 1.70] |" in text
    assert "\n1.50x [1.42, 1.58]\n" in text
    assert "| 1.50x / 1.40x / 1.60x |" in text and "*Intervals: not recorded" in text
    assert "1.50x (interval not recorded)" in text
    assert f"{intervals.RESAMPLES:,} resamples" in text and "predate intervals" in text
    assert Provenance(results).unexplained(text) == []


def test_a_field_newer_than_its_record_is_not_recorded_and_any_other_is_an_error(
    tmp_path: Path,
) -> None:
    results = tmp_path / "results"
    _write_record(results, "old", 1, RATIO_ROW)
    _write_record(results, "new", 2, RATIO_ROW)
    shown = render_paper("{{value:old.rows.0.jaxstream_best}}", results, tmp_path)
    assert "(not recorded: rerun `python -m experiments run old`)" in shown
    with pytest.raises(PaperError, match="no 'jaxstream_best'"):
        render_paper("{{value:new.rows.0.jaxstream_best}}", results, tmp_path)
    with pytest.raises(PaperError, match="no 'no_such_field'"):
        render_paper("{{value:old.rows.0.no_such_field}}", results, tmp_path)


def test_rows_and_notes_newer_than_their_record_are_not_recorded_and_else_an_error(
    tmp_path: Path,
) -> None:
    results = tmp_path / "results"
    _write_record(results, "old", 1, {**RATIO_ROW, "key": "hessian"})
    _write_record(results, "new", 2, {**RATIO_ROW, "key": "hessian"})
    for placeholder in ("{{value:old.rows[key=relu hessian].batch}}", "{{note:old|ReLU}}",
                        "{{value:old.parameters.pr82544.batch}}",
                        "{{value:old.rows[key=hessian].torch_ms_cores}}"):
        shown = render_paper(placeholder, results, tmp_path)
        assert "(not recorded: rerun `python -m experiments run old`)" in shown, placeholder
    with pytest.raises(PaperError, match="0 entries"):
        render_paper("{{value:new.rows[key=relu hessian].batch}}", results, tmp_path)
    with pytest.raises(PaperError, match="0 notes"):
        render_paper("{{note:new|ReLU}}", results, tmp_path)


def test_a_column_newer_than_its_record_is_left_out_saying_so_and_any_other_is_an_error(
    tmp_path: Path,
) -> None:
    results = tmp_path / "results"
    _write_record(results, "old", 2, RATIO_ROW)
    _write_record(results, "new", 3, RATIO_ROW)
    shown = render_paper("{{table:old|a_over_b,predicted-forward-verdict}}", results, tmp_path)
    assert "| A / B |\n|---|\n| 1.50x / 1.40x / 1.60x |" in shown
    assert "the columns `predicted-forward-verdict`; rerun `python -m experiments run old`" in shown
    with pytest.raises(PaperError, match="no column keyed \\['predicted-forward-verdict'\\]"):
        render_paper("{{table:new|a_over_b,predicted-forward-verdict}}", results, tmp_path)
    with pytest.raises(PaperError, match="no column keyed \\['no_such_column'\\]"):
        render_paper("{{table:old|a_over_b,no_such_column}}", results, tmp_path)


def _write_gpu_report(results: Path, runs: list[dict]) -> None:
    report = {"kind": "gpu_check", "rehearsal": False, "gpu": "NVIDIA H100 80GB HBM3",
              "date_utc": "2026-11-27T10:00:00+00:00", "revision": "abc1234",
              "steps": [{"name": "experiments", "details": {"mode": "quick", "runs": runs}}]}
    (results / "gpu").mkdir(parents=True, exist_ok=True)
    (results / "gpu" / "nvidia-h100.json").write_text(json.dumps(report), encoding="utf-8")


def test_an_experiments_cuda_rows_come_from_the_newest_gpu_report_or_say_there_is_none(
    tmp_path: Path,
) -> None:
    results = tmp_path / "results"
    _write_record(results, "new", 2, RATIO_ROW)
    assert "No GPU report yet, so no `--device cuda` rows of new" in render_paper(
        "{{gpu:new}}", results, tmp_path)
    headline = {"headers": ["variant", "A / B (median [95% interval] / min / CPU)"],
                "rows": [["A (tanh)", "1.23x [1.20, 1.26] / 1.21x / 1.25x [1.22, 1.28]"]]}
    _write_gpu_report(results, [{"name": "new", "status": "ok", "headline": headline}])
    shown = render_paper("{{gpu:new}}", results, tmp_path)
    assert "NVIDIA H100 80GB HBM3" in shown and "`--device cuda`" in shown
    assert "| A (tanh) | 1.23x [1.20, 1.26] / 1.21x / 1.25x [1.22, 1.28] |" in shown
    assert Provenance(results).unexplained(shown) == []
    _write_gpu_report(results, [{"name": "new", "status": "timed out", "reason": "no time"}])
    assert "No `--device cuda` rows of new in the GPU report" in render_paper(
        "{{gpu:new}}", results, tmp_path)
    with pytest.raises(PaperError, match="no GPU placeholder 'elsewhere'"):
        render_paper("{{gpu:elsewhere}}", results, tmp_path)


def test_the_template_compares_with_the_pr_from_the_records_not_from_prose() -> None:
    template = TEMPLATE.read_text(encoding="utf-8")
    for cited in ("{{gpu:hessian}}", "rows[key=hessian_pr]", "torch-func_over_torch",
                  "pr82544.not_recorded", "pr82544.speedups.training",
                  "jaxstream_best_cores", "compile_trimming_against_one",
                  "off_path_against_prediction"):
        assert cited in template, cited
    assert "larger batch" not in template and "a few percent" not in template
