"""``vclip demo``: the main job on a built-in video."""

from __future__ import annotations

import argparse

from .._demo import run_demo
from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    _add_device,
)


def _run_demo(args: argparse.Namespace) -> int:
    return EXIT_OK if run_demo(args.out, device=args.device) else EXIT_FAILED


def add_parser(commands) -> None:
    """The ``vclip demo`` sub-command."""
    demo = commands.add_parser(
        "demo", help="the main job on a small built-in video, checked frame by frame",
        description="Make a small synthetic video, sample clips in every mode and check each frame's barcode, "
                    "extract keyframes (codec and scene), print the memory estimate, and write a contact sheet "
                    "of the clips, keyframe images and a manifest.")
    demo.add_argument("--out", default="vclip-demo", metavar="DIR", help="output folder (default vclip-demo)")
    _add_device(demo)
    demo.set_defaults(handler=_run_demo)
