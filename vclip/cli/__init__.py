"""The ``vclip`` command line: ``info``, ``sample``, ``keyframes``, ``index``, ``check``, ``budget``,
``shard`` and ``demo``, one module each (``_info.py``...), what they share in ``_common.py``.

Exit status: 0 when everything asked for was done; 1 when nothing could be done (the only file,
or every file, could not be read); 2 for bad arguments (argparse's usage errors, and values the
library refuses, such as ``--stride 0``); 3 when some files were reported and skipped while the
others were done; 130 when stopped by Ctrl-C (one line on stderr, no traceback). Bad files are
reported on stderr, naming the file and the problem, and never stop a run over several files; an
unexpected exception on one file is reported as an internal error naming the file, and the others
go on.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from .._version import __version__
from . import _budget, _check, _demo, _index, _info, _keyframes, _sample, _shard
from ._common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_PARTIAL, EXIT_USAGE, UsageError, report_error

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_PARTIAL", "EXIT_USAGE", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The ``vclip`` argument parser, one sub-command per job."""
    parser = argparse.ArgumentParser(prog="vclip",
                                     description="Sample video clips for deep learning, exactly and fast.")
    parser.add_argument("--version", action="version", version=f"vclip {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in (_info, _sample, _keyframes, _index, _check, _budget, _shard, _demo):
        command.add_parser(commands)
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"vclip: warning: {message}", file=sys.stderr)


@contextmanager
def _native_output_to_stderr() -> Iterator[None]:
    """While a command runs, what native libraries print on the process's stdout (PyNvVideoCodec
    prints "Decode Error occurred for picture N" from C++) goes to stderr, so stdout carries only
    vclip's own output (``--json`` included). Decode worker processes started meanwhile inherit it.
    Nothing changes when ``sys.stdout`` is not the process's stdout (a test's capture, say)."""
    try:
        redirect = sys.stdout.fileno() == 1
    except (AttributeError, OSError, ValueError):
        redirect = False
    if not redirect:
        yield
        return
    python_stdout = sys.stdout
    python_stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = open(saved, "w", encoding=python_stdout.encoding, errors=python_stdout.errors,
                      buffering=1, closefd=False)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stdout = python_stdout
        os.dup2(saved, 1)
        os.close(saved)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``vclip`` command line with ``argv`` (default: ``sys.argv[1:]``); returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_request:  # --help and --version (status 0), or a usage error (status 2)
        return EXIT_OK if exit_request.code is None else int(exit_request.code)
    try:
        return _run(args)
    except KeyboardInterrupt:  # Ctrl-C: the job stopped its workers on the way out; one line, no traceback
        print(f"vclip {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _run(args: argparse.Namespace) -> int:
    try:
        with warnings.catch_warnings(), _native_output_to_stderr():
            warnings.showwarning = _show_warning
            try:
                return args.handler(args)
            except UsageError as error:
                report_error(args.command, str(error))
                return EXIT_USAGE
    except BrokenPipeError:  # the reader stopped early (``vclip info ... | head``): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the flush at exit has nowhere to fail
        os.close(devnull)
        return EXIT_FAILED

