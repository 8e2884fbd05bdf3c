"""``vclip check``: decode every frame of every video and report the bad ones."""

from __future__ import annotations

import argparse
import json
import sys

from .._outputs.files import (
    printable,
)
from ..check import CheckResult, check_videos
from ..errors import check_optional_integer
from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_PARTIAL,
    add_device_option,
    add_progress_option,
    add_ray_options,
    add_stream_option,
    expand_inputs,
    progress_bar,
    ray_options,
    refused_arguments,
    say,
)


def _check_table(results: list[CheckResult]) -> str:
    lines = [f"{'status':<11} {'frames':>7} {'bad':>6} {'seconds':>8}  file"]
    for result in results:
        frames = str(result.num_frames) if result.status != "unreadable" else "-"
        lines.append(f"{result.status:<11} {frames:>7} {len(result.bad_frames):>6} {result.seconds:>8.2f}  "
                     f"{result.path}")
        lines += [f"{'':<36}{problem}" for problem in result.problems]
        if result.error:
            lines.append(f"{'':<36}{result.error}")
    counts = {status: sum(r.status == status for r in results) for status in ("ok", "corrupt", "unreadable")}
    lines.append(f"{counts['ok']} ok, {counts['corrupt']} with bad frames, {counts['unreadable']} unreadable "
                 f"of {len(results)} videos")
    return "\n".join(lines)


def _run_check(args: argparse.Namespace) -> int:
    inputs = expand_inputs(args.files)
    with refused_arguments():
        check_optional_integer("workers", args.workers, minimum=1)
    progress = progress_bar(args, total=len(inputs), unit="video", leave=False)

    def done(result: CheckResult) -> None:
        progress.update()
        if not result.ok and not progress.disable:  # on a terminal, bad videos show as they are found
            detail = result.error or "; ".join(result.problems)
            progress.write(printable(f"vclip check: {result.path}: {result.status}: {detail}", sys.stderr),
                           file=sys.stderr)

    ray = ray_options(args)
    with refused_arguments():
        results = check_videos(inputs, device=args.device, stream_index=args.stream_index, workers=args.workers,
                               on_result=done, **ray)
    progress.close()
    if args.json:
        print(json.dumps([result.to_dict() for result in results], indent=2))
    else:
        say(_check_table(results))
    if all(result.ok for result in results):
        return EXIT_OK
    return EXIT_FAILED if all(result.status == "unreadable" for result in results) else EXIT_PARTIAL


def add_parser(commands) -> None:
    """The ``vclip check`` sub-command."""
    check = commands.add_parser(
        "check", help="decode every frame of every video and report the bad ones",
        description="Decode every frame of videos (files, folders of videos, list files with one path per "
                    "line, WebDataset shards: .tar paths, URLs or brace patterns) and report per file: ok, "
                    "which frames are bad (decode errors, damaged frames the decoder concealed, frames that "
                    "never came out), or unreadable and why. On the CPU one "
                    "process per core; on the GPU (--device auto with a usable GPU, or cuda) through NVDEC, "
                    "which finds decode errors and missing frames but conceals damaged pictures silently: use "
                    "--device cpu for the most thorough check. Exit status 0: all ok; 1: none readable; "
                    "3: some bad.")
    check.add_argument("files", nargs="+", metavar="PATH", help="video files, folders of videos, list files or shards")
    check.add_argument("--json", action="store_true", help="print a JSON list, one object per video")
    check.add_argument("--workers", type=int, metavar="N",
                       help="videos checked at once (default: the CPU cores; 4 on the GPU; with --ray what the "
                            "cluster runs at once)")
    add_stream_option(check)
    add_device_option(check)
    add_progress_option(check)
    add_ray_options(check, "check, one task per video,")
    check.set_defaults(handler=_run_check)
