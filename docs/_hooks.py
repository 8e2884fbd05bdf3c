"""MkDocs hook: the command-line reference comes from the parser itself.

A line ``<!-- cli-help: COMMAND -->`` in a page becomes the output of ``vclip COMMAND --help``
(``<!-- cli-help -->`` alone: ``vclip --help``), formatted 80 columns wide, in a block the reader
can fold open, so the page always shows the options the installed command has.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from typing import Any

_MARKER = re.compile(r"^<!-- cli-help(?::\s*([a-z]+))? -->$", re.MULTILINE)


def _help_text(command: str | None) -> str:
    from vclip.cli import main

    argv = [command, "--help"] if command else ["--help"]
    output = io.StringIO()
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "80"  # argparse wraps to the terminal's width
    try:
        with contextlib.redirect_stdout(output):
            status = main(argv)
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns
    if status != 0 or not output.getvalue().startswith("usage: vclip"):
        raise ValueError(f"`vclip {' '.join(argv)}` gave status {status}: is {command!r} a command?")
    return output.getvalue().rstrip()


def _help_block(match: re.Match[str]) -> str:
    """A foldable block (pymdownx.details) holding the help: open for ``vclip --help``."""
    command = match.group(1)
    title = f"vclip {command} --help" if command else "vclip --help"
    text = "\n".join(f"    {line}" if line else "" for line in _help_text(command).splitlines())
    return f'???{"" if command else "+"} info "`{title}`"\n\n    ```text\n{text}\n    ```'


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """Replace every ``cli-help`` marker with the help it names."""
    return _MARKER.sub(_help_block, markdown)
