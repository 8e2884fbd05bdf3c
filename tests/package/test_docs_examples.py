"""Every code example in README.md and docs/ runs, on the CPU, on small synthetic videos.

Each page's examples run top to bottom in one namespace and one fresh folder holding the files
the pages name (``video.mp4``, ``shots.mp4``, ``videos/`` with one subfolder per class), as a
reader would run them one after another:

- ```` ```python ```` blocks are executed; ```` ```pycon ```` blocks are doctests (their printed
  results are checked);
- ```` ```bash ```` blocks run their ``vclip`` commands (each must exit with status 0); a line
  that runs another program must be one of ``NOT_RUN_COMMANDS`` (installers, cluster starters,
  the test suite itself), which are not run;
- a block right after ``<!-- example: file NAME -->`` is written to ``NAME`` (a list file, a
  CSV) before the page's examples run;
- a block right after ``<!-- example: not-run KEY -->`` is not run, for one of the reasons in
  ``NOT_RUN_REASONS``: each is listed as a skipped test with its reason.

``device="cuda"`` falls back to the CPU here with a ``FallbackWarning``, which is expected. The
environment variables a page's examples set (``vclip.set_remote_options`` keeps its options there)
are restored after the page.
"""

from __future__ import annotations

import doctest
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import ROOT

from vclip.synthetic import make_scene_video, make_video

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

NOT_RUN_REASONS = {
    "torchrun": "needs torchrun starting one process per GPU, on one or several nodes",
    "cluster": "needs a Ray cluster of several machines sharing the videos' storage",
    "s3": "needs an S3 bucket and its credentials",
    "torchvision": "needs torchvision, whose wheel does not load beside the CPU build of torch the tests install",
}
"""Why an example may be left out; a page names one with ``<!-- example: not-run KEY -->``."""

NOT_RUN_COMMANDS = {
    "pip": "installs packages",
    "pytest": "is the test suite itself",
    "mkdocs": "builds these pages (.ci/run does)",
    "bash": "runs a script of the repository (.ci/run)",
    "python": "runs a script of the repository (benchmarks and samples are run by hand)",
    "python3": "makes a virtual environment",
    ".": "activates a virtual environment",
    "torchrun": "starts training processes on several GPUs or nodes",
    "ray": "starts a Ray cluster",
}
"""Programs that shell examples show but that are not run, with why."""

SHELL_LANGUAGES = ("bash", "sh", "shell")
_FENCE = re.compile(r"^```(\S*)\s*$")
_MARKER = re.compile(r"^<!-- example: (not-run|file) (\S+) -->$")
_OPTIONAL_EXTRAS = {"torch": "torch", "pyarrow": "catalog", "ray": "ray"}


@dataclass(frozen=True)
class Block:
    """One fenced block of a page."""

    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    source: str
    not_run: str | None = None  # a key of NOT_RUN_REASONS
    file: str | None = None  # the name it is written to

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def read_blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page`` with their markers; malformed markers raise ``ValueError``."""
    lines = page.read_text().splitlines()
    blocks, marker, number = [], None, 0
    while number < len(lines):
        text = lines[number]
        if (found := _MARKER.match(text)) is not None:
            if not (number + 1 < len(lines) and _FENCE.match(lines[number + 1])):
                raise ValueError(f"{page.relative_to(ROOT)}:{number + 1}: {text} must be right before a fenced block")
            kind, value = found.groups()
            if kind == "not-run" and value not in NOT_RUN_REASONS:
                raise ValueError(f"{page.relative_to(ROOT)}:{number + 1}: unknown reason {value!r}; "
                                 f"known: {', '.join(NOT_RUN_REASONS)}")
            marker = (kind, value)
        elif text.startswith("<!-- example"):
            raise ValueError(f"{page.relative_to(ROOT)}:{number + 1}: {text!r} is not "
                             "'<!-- example: not-run KEY -->' or '<!-- example: file NAME -->'")
        elif re.match(r"^\s+```(python|pycon|bash|sh|shell)\b", text):
            raise ValueError(f"{page.relative_to(ROOT)}:{number + 1}: indented code block: examples must start "
                             "at the margin so that this test finds them")
        elif (fence := _FENCE.match(text)) is not None:
            start = number
            end = next((n for n in range(number + 1, len(lines)) if lines[n].startswith("```")), None)
            if end is None:
                raise ValueError(f"{page.relative_to(ROOT)}:{start + 1}: unclosed code block")
            kind, value = marker or (None, None)
            blocks.append(Block(page, start + 1, fence.group(1), "\n".join(lines[start + 1:end]) + "\n",
                                not_run=value if kind == "not-run" else None, file=value if kind == "file" else None))
            marker, number = None, end
        number += 1
    return blocks


def is_example(block: Block) -> bool:
    return block.file is None and block.language in ("python", "pycon", *SHELL_LANGUAGES)


def runnable_blocks(page: Path) -> list[Block]:
    return [block for block in read_blocks(page) if is_example(block) and block.not_run is None]


def shell_commands(block: Block) -> list[str]:
    """The ``vclip`` commands of a shell block, in order (one per line, or per part of ``a && b``)."""
    commands = []
    for number, line in enumerate(block.source.splitlines(), start=block.line + 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            raise ValueError(f"{block.page.relative_to(ROOT)}:{number}: write each command on one line")
        for part in line.split(" && "):
            words = shlex.split(part, comments=True)
            while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):  # VAR=value before the program
                words.pop(0)
            if words and words[0] == "vclip":
                commands.append(part)
            elif not words or words[0] not in NOT_RUN_COMMANDS:
                raise ValueError(f"{block.page.relative_to(ROOT)}:{number}: {part!r} runs neither vclip nor one "
                                 f"of the programs that are shown but not run ({', '.join(NOT_RUN_COMMANDS)})")
    return commands


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


SLOW_PAGES = {
    "docs/guides/ray.md": "starts a local Ray (about 25 s)",
    "docs/guides/cli.md": "runs some twenty commands, each a new Python process (about 20 s)",
    "docs/guides/keyframes.md": "finds the shots of several videos (about 9 s)",
}
"""Pages whose examples take more than a few seconds: marked ``slow``."""

EXAMPLE_PAGES = [
    pytest.param(page, id=_page_id(page), marks=[pytest.mark.slow] if _page_id(page) in SLOW_PAGES else [])
    for page in PAGES if any(is_example(block) for block in runnable_blocks(page))
]
NOT_RUN = [block for page in PAGES for block in read_blocks(page) if is_example(block) and block.not_run]


@pytest.fixture(scope="module")
def example_files(tmp_path_factory) -> Path:
    """The files the pages name, made once: a 3-second 320x240 video, a video of six shots, and a
    dataset folder of two classes with two small videos each."""
    root = tmp_path_factory.mktemp("example-files")
    make_video(root / "video.mp4", num_frames=90, keyframe_interval=30)
    make_scene_video(root / "shots.mp4", "cuts")
    for label, name in enumerate(("cats", "dogs")):
        (root / "videos" / name).mkdir(parents=True)
        for number in (1, 2):
            make_video(root / "videos" / name / f"{number:03d}.mp4", num_frames=64, width=160, height=120,
                       keyframe_interval=32, seed=10 * label + number)
    return root


def _skip_for_missing_extra(error: ImportError) -> None:
    """Skip (naming the extra) when ``error`` is an optional dependency that is not installed."""
    for cause in (error, error.__cause__):
        name = getattr(cause, "name", None) or ""
        if name.split(".")[0] in _OPTIONAL_EXTRAS:
            root = name.split(".")[0]
            pytest.skip(f"needs {root}: pip install 'vclip-nvdec[{_OPTIONAL_EXTRAS[root]}]'")


def _run_python(block: Block, namespace: dict) -> None:
    code = compile("\n" * block.line + block.source, str(block.page), "exec")  # tracebacks give page lines
    try:
        exec(code, namespace)
    except ImportError as error:
        _skip_for_missing_extra(error)
        raise


def _run_pycon(block: Block, namespace: dict) -> None:
    test = doctest.DocTestParser().get_doctest(block.source, namespace, block.where, str(block.page), block.line)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    runner.run(test, out=report.append, clear_globs=False)
    namespace.update(test.globs)  # the DocTest ran on a copy: later blocks see what this one defined
    if runner.failures:
        pytest.fail(f"{block.where}: the printed result differs\n" + "".join(report), pytrace=False)


def _run_shell(block: Block, folder: Path) -> None:
    for command in shell_commands(block):
        script = f'vclip() {{ "{sys.executable}" -m vclip "$@"; }}\n{command}\n'
        done = subprocess.run(["bash", "-c", script], cwd=folder, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            pytest.fail(f"{block.where}: `{command}` exited with status {done.returncode}\n"
                        f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}", pytrace=False)


@pytest.mark.slow  # every page's commands and examples: about 5 minutes on 2 cores
@pytest.mark.filterwarnings("ignore::vclip.errors.FallbackWarning")
@pytest.mark.parametrize("page", EXAMPLE_PAGES)
def test_examples_of_the_page_run(page: Path, example_files: Path, tmp_path: Path, monkeypatch):
    folder = tmp_path / "examples"
    shutil.copytree(example_files, folder)
    monkeypatch.chdir(folder)
    blocks = read_blocks(page)
    for block in blocks:
        if block.file is not None:
            (folder / block.file).parent.mkdir(parents=True, exist_ok=True)
            (folder / block.file).write_text(block.source)
    namespace: dict = {"__name__": "__main__"}
    ray_before = _ray_running()
    environment = dict(os.environ)  # vclip.set_remote_options keeps its options there
    try:
        for block in runnable_blocks(page):
            if block.language == "python":
                _run_python(block, namespace)
            elif block.language == "pycon":
                _run_pycon(block, namespace)
            else:
                _run_shell(block, folder)
    finally:
        if not ray_before and _ray_running():  # a page's examples started a local Ray: stop it
            import ray

            ray.shutdown()
        if os.environ != environment:  # what a page set does not reach the other tests
            os.environ.clear()
            os.environ.update(environment)


def _ray_running() -> bool:
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


@pytest.mark.filterwarnings("ignore::vclip.errors.FallbackWarning")
@pytest.mark.parametrize("block", [pytest.param(block, id=block.where) for block in NOT_RUN])
def test_examples_not_run(block: Block):
    """Each example left out is listed in the test report with its reason."""
    pytest.skip(f"{block.where} is not run: it {NOT_RUN_REASONS[block.not_run or '']}")


def test_every_page_parses_and_has_its_examples_found():
    """Markers are well formed and right before a block; shell lines are known; and the pages that
    show Python examples are among those run."""
    for page in PAGES:
        for block in read_blocks(page):
            if block.language in SHELL_LANGUAGES and block.not_run is None and block.file is None:
                shell_commands(block)
    pages_run = {param.id for param in EXAMPLE_PAGES}
    assert {_page_id(ROOT / "README.md"), _page_id(ROOT / "docs" / "index.md")} <= pages_run
    assert set(SLOW_PAGES) <= pages_run, f"SLOW_PAGES names pages without examples: {set(SLOW_PAGES) - pages_run}"


def test_the_readme_keeps_its_test_command_and_stays_a_front_page():
    """.ci/run runs the line after the fence that follows the marker; the README is a front page."""
    lines = (ROOT / "README.md").read_text().splitlines()
    marker = lines.index("<!-- test-command -->")
    assert lines[marker + 1] == "```bash" and lines[marker + 2].startswith('pip install ".[test]"')
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; the front page keeps to 250"
    targets = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", "\n".join(lines))  # relative links (mkdocs checks docs/)
    assert targets and not [target for target in targets if not (ROOT / target).exists()]


def test_the_fast_part_the_readme_names_leaves_out_the_slow_tests():
    """README and contributing: ``pytest -m "not slow"`` runs the fast part: the marker is
    registered (``--strict-markers``) and these examples, the longest part of the suite, carry it."""
    assert 'pytest -m "not slow"' in (ROOT / "README.md").read_text(encoding="utf-8")
    assert any(line.strip().startswith('"slow:') for line in (ROOT / "pyproject.toml").read_text().splitlines())
    assert any(mark.name == "slow" for mark in test_examples_of_the_page_run.pytestmark)
