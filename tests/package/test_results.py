"""One home for every figure: benchmarks/results/ holds at most 30 files, one current result per
benchmark, each cited by the documentation; benchmarks/README.md stays a short guide."""

import re

from helpers import ROOT

RESULTS = ROOT / "benchmarks" / "results"
MAX_RESULT_FILES = 30
MAX_README_LINES = 200


def _documentation() -> str:
    return "\n".join(path.read_text() for path in sorted((ROOT / "docs").rglob("*.md")))


def test_results_hold_at_most_30_files():
    assert len(list(RESULTS.iterdir())) <= MAX_RESULT_FILES


def test_every_result_file_is_cited_by_the_documentation():
    """A result no page cites is a figure without a home: its benchmark's table cites it, or it goes."""
    documentation = _documentation()
    uncited = sorted(path.name for path in RESULTS.iterdir() if f"benchmarks/results/{path.name}" not in documentation)
    assert uncited == []


def test_result_names_say_what_they_measure_not_when():
    """``scenes_cpu_480x270.json``, not ``scenes_cpu_2026-12-05_480x270_0903880.json``."""
    assert not _dated("scenes_cpu_480x270") and not _dated("remote_s3")
    assert _dated("scenes_cpu_2026-12-05_480x270") and _dated("train_0903880") and _dated("scenes_first_call_probe")
    assert sorted(path.name for path in RESULTS.iterdir() if _dated(path.stem)) == []


def _dated(stem: str) -> bool:
    """A name that holds a date, a commit or the word probe: it says when or how, not what."""
    return any(re.search(pattern, stem) for pattern in (r"\d{4}-\d{2}-\d{2}", r"(^|_)[0-9a-f]{7,40}($|_)", r"probe"))


def test_the_benchmarks_readme_is_a_short_guide():
    assert len((ROOT / "benchmarks" / "README.md").read_text().splitlines()) <= MAX_README_LINES
