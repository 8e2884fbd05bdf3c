"""What the commands share: usage errors, argument types and options, safe printing, inputs
(files, folders, list files), exit statuses and progress bars."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

from tqdm import tqdm

from .._bytes.shards import video_names
from .._datasets.inputs import VIDEO_EXTENSIONS, list_file_paths, video_files
from .._jobs.runner import import_ray
from .._outputs.files import (
    printable,
)
from ..errors import UsageError, VideoError
from ..keyframes import (
    ProgressCallback,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_PARTIAL = 0, 1, 2, 3
EXIT_INTERRUPTED = 128 + 2  # stopped by Ctrl-C (SIGINT), as shells report it
SAMPLE_MODES = ("contiguous", "strided", "keyframe", "indexed", "jittered", "downscaled")
SAMPLE_FORMATS = {".npz": "npz", ".pt": "pt", ".mp4": "mp4"}  # or a folder: see _sample_outputs
LIST_FILE_SUFFIXES = (".txt", ".csv", ".lst", ".list")  # an input with one of these is a list of videos
MANIFEST = "manifest.json"
_DEVICE_PATTERN = re.compile(r"cpu|cuda|cuda:\d+|auto")


@contextmanager
def refused_arguments():
    """Turn the library's ValueError/TypeError/IndexError on user input into a usage error."""
    try:
        yield
    except UnicodeError:  # a ValueError, but from a file's bytes, not from the user's values
        raise
    except (ValueError, TypeError, IndexError) as error:
        raise UsageError(str(error)) from None


# -- argument types ----------------------------------------------------------------------------
def int_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers (e.g. 0,10,-1)") from None


def frame_size(text: str) -> int | tuple[int, int]:
    """``"224"`` (one number) or ``"HEIGHT,WIDTH"`` (the order of Python's ``(height, width)``), as
    TransformSpec's int or (height, width). The old spelling ``WIDTHxHEIGHT`` still reads as it
    did, with a warning naming the new one."""
    text = text.strip().lower()
    if match := re.fullmatch(r"(\d+)(?:\s*,\s*(\d+))?", text):
        return int(match.group(1)) if match.group(2) is None else (int(match.group(1)), int(match.group(2)))
    if match := re.fullmatch(r"(\d+)x(\d+)", text):
        width, height = int(match.group(1)), int(match.group(2))
        print(f"vclip: warning: {text} (WIDTHxHEIGHT) is the old spelling of a size; write {height},{width} "
              f"(HEIGHT,WIDTH, as Python's ({height}, {width}))", file=sys.stderr)
        return height, width
    raise argparse.ArgumentTypeError(
        f"{text!r} must be a number of pixels (e.g. 224) or HEIGHT,WIDTH (e.g. 240,320: the order of Python's "
        "(height, width))")


class _RenamedOption(argparse.Action):
    """Stores the value (as ``"store"`` does); used under its old name (the second of its option
    strings, the first being the new one), says so on stderr."""

    def __call__(self, parser, namespace, values, option_string=None):
        new, old = self.option_strings
        if option_string == old:
            print(f"vclip: warning: {old} is the old name of {new}; it still works", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_renamed_option(parser: argparse.ArgumentParser, name: str, old: str, **options) -> None:
    """Option ``name`` (named after the Python argument), also taken under its ``old`` name."""
    help_text = options.pop("help", None)
    options["help"] = f"{help_text} (old name: {old})" if help_text else f"(old name: {old})"
    parser.add_argument(name, old, action=_RenamedOption, **options)


def device_argument(text: str) -> str:
    if not _DEVICE_PATTERN.fullmatch(text.strip().lower()):
        raise argparse.ArgumentTypeError(f"{text!r} must be 'cpu', 'cuda', 'cuda:N' or 'auto'")
    return text.strip().lower()


def non_negative_integer(text: str) -> int:
    """An argument that is a count or an index: refused by argparse (exit status 2) before any file."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be an integer >= 0")
    return value


def add_stream_option(parser: argparse.ArgumentParser) -> None:
    add_renamed_option(parser, "--stream-index", "--stream", type=non_negative_integer, metavar="N",
                       help="container index of the video stream (default: the first)")


def add_device_option(parser: argparse.ArgumentParser, what: str = "where to decode") -> None:
    parser.add_argument("--device", type=device_argument, default="auto",
                        help=f"{what}: cpu, cuda, cuda:N or auto (default: auto, the GPU when one is usable)")


def add_progress_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction,
                        help="progress bars on stderr (default: only when stderr is a terminal)")


def add_ray_options(parser: argparse.ArgumentParser, what: str) -> None:
    # Two options, not one with an optional value: `--ray PATH...` would take the first path for it.
    parser.add_argument("--ray", action="store_true",
                        help=f"{what} on a Ray cluster (RAY_ADDRESS's, `ray start`'s, or a local one)")
    parser.add_argument("--ray-address", metavar="ADDRESS", help="the Ray cluster to join (implies --ray)")


def ray_options(args: argparse.Namespace) -> dict:
    """``ray=`` and ``ray_address=`` of the library's jobs for ``--ray``/``--ray-address`` (no
    address: RAY_ADDRESS's cluster, `ray start`'s or a local one); a usage error naming the extra
    when Ray is not installed."""
    if not (args.ray or args.ray_address):
        return {"ray": False, "ray_address": None}
    try:
        import_ray()
    except ImportError as error:
        raise UsageError(f"--ray: {error}") from None
    return {"ray": True, "ray_address": args.ray_address}


# -- output helpers ----------------------------------------------------------------------------
def format_numbers(values: Sequence[int], limit: int = 10) -> str:
    """``"0, 30, 60"``; longer lists keep the first ``limit - 2`` and the last 2 around ``...``."""
    values = list(values)
    return ", ".join(map(str, values)) if len(values) <= limit else (
        ", ".join(map(str, values[: limit - 2])) + ", ..., " + ", ".join(map(str, values[-2:]))
    )


def say(text: str, file=None) -> None:
    """Print ``text`` so that any file name in it prints, whatever the stream's encoding, above any
    progress bar."""
    stream = file or sys.stdout
    tqdm.write(printable(text, stream), file=stream)


def report_error(command: str, message: str) -> None:
    say(f"vclip {command}: error: {message}", sys.stderr)


def report_skipped(command: str, error: VideoError) -> None:
    say(f"vclip {command}: skipped {error}", sys.stderr)


def report_internal_error(command: str, path: str, error: Exception) -> str:
    """Report an unexpected exception on one file; returns the problem text. An OSError is the
    system's (a write that failed, a full disk); anything else is a bug in vclip."""
    if isinstance(error, OSError):
        problem = f"failed ({type(error).__name__}: {error})"
    else:
        problem = f"internal error ({type(error).__name__}: {error}); please report it"
    say(f"vclip {command}: skipped {path}: {problem}", sys.stderr)
    return problem


def expand_inputs(sources: Sequence[str]) -> list[str]:
    """Video paths from files, folders (their videos by extension, recursively, sorted), list
    files (``.txt``, ``.csv``, ``.lst``, ``.list``: one path or URL per line, relative to the list's folder;
    blank lines and ``#`` comments skipped; a trailing ``,label`` or `` label`` is ignored) and
    WebDataset shards (``.tar`` paths, URLs or brace patterns: their video members, named by
    :func:`vclip._bytes.sources.slice_name`; ``SHARD.tar#MEMBER``: one member).

    Raises:
        UsageError: A list file that cannot be read, or no video at all.
    """
    paths: list[str] = []
    for source in sources:
        path = Path(source)
        try:
            members = shard_videos(source)
            folder = members is None and path.is_dir()
            list_file = members is None and path.suffix.lower() in LIST_FILE_SUFFIXES and path.is_file()
        except OSError:  # a name too long, a folder that may not be entered: that file's own error, later
            members, folder, list_file = None, False, False
        if members is not None:
            paths.extend(members)
        elif folder:
            found = [os.fspath(p) for p in video_files(path)]
            if not found:
                say(f"vclip: warning: {source} holds no video files ({', '.join(VIDEO_EXTENSIONS)})", sys.stderr)
            paths.extend(found)
        elif list_file:
            paths.extend(_read_list_file(path))
        else:
            paths.append(source)
    if not paths:
        raise UsageError(f"no videos in {', '.join(map(repr, sources))}")
    return paths


def shard_videos(source: str) -> list[str] | None:
    """The video members that ``source`` names when it names WebDataset shards (``.tar`` paths,
    URLs, brace patterns, or ``SHARD.tar#MEMBER``), else None.

    Raises:
        UsageError: A shard that does not exist, cannot be read or holds no video.
    """
    try:
        names = video_names(source)
    except (ValueError, FileNotFoundError, VideoError) as error:
        raise UsageError(str(error)) from None
    if names is not None and not names:
        say(f"vclip: warning: {source} holds no video members", sys.stderr)
    return names


def _read_list_file(list_file: Path) -> list[str]:
    """The videos of a list file, read as ClipLoader reads it (labels and times left out)."""
    try:
        return list_file_paths(list_file)
    except OSError as error:
        raise UsageError(f"list file {os.fspath(list_file)!r} cannot be read ({error.strerror})") from None
    except ValueError as error:
        raise UsageError(str(error)) from None


def exit_status(files: int, failures: int) -> int:
    if failures == 0:
        return EXIT_OK
    return EXIT_FAILED if failures == files else EXIT_PARTIAL


def progress_bar(args: argparse.Namespace, **options) -> tqdm:
    """A tqdm bar on stderr: drawn with ``--progress``, never with ``--no-progress``, and otherwise
    only when stderr is a terminal. Print lines while it is open with ``tqdm.write``."""
    return tqdm(file=sys.stderr, disable=None if args.progress is None else not args.progress,
                dynamic_ncols=True, **options)


def following(bar: tqdm) -> ProgressCallback:
    """An ``on_progress(done, total)`` callback that moves ``bar``."""
    def on_progress(done: int, total: int) -> None:
        if bar.total != total:
            bar.total = total
            bar.refresh()
        bar.update(done - bar.n)

    return on_progress


