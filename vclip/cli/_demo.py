"""``vclip demo``: the main job on a small video made on the spot, checked frame by frame."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TextIO

import numpy as np

from .._outputs.images import contact_sheet, to_numpy, write_image
from ..decoder import VideoDecoder
from ..keyframes import extract_keyframes, find_shot_boundaries
from ..memory import estimate_memory
from ..sampling import contiguous, downscaled, indexed, jittered, keyframe, strided
from ..synthetic import make_shots_video, make_video, read_barcode
from ._common import EXIT_FAILED, EXIT_OK, add_device_option, format_numbers

__all__ = ["run_demo", "add_parser"]

_DEMO_SAMPLERS = (
    ("contiguous", contiguous(8)),
    ("strided", strided(8, 4)),
    ("keyframe", keyframe()),
    ("indexed", indexed([0, 119, 60, 60, 7])),
    ("jittered", jittered(8, 4, 1)),
    ("downscaled", downscaled(strided(8, 4), 0.5)),
)
# The demo's shot video: cuts at frames 45 and 97, a dissolve over frames 150-164 (the fourth shot
# alone from 165), a keyframe every 60 frames (0, 60, 120, 180): the scenes are not the keyframes.
_SHOT_LENGTHS = (45, 52, 68, 35)
_DISSOLVES = (0, 0, 15)
_KEYFRAME_INTERVAL = 60


def _shot_plan() -> str:
    """``"cuts at 45, 97, a dissolve over 150-164"``: how the demo's shot video was made."""
    starts = np.cumsum(_SHOT_LENGTHS)[:-1].tolist()
    cuts = [start for start, blends in zip(starts, _DISSOLVES) if blends == 0]
    return f"cuts at {', '.join(map(str, cuts))}, a dissolve over {_dissolve_spans()}"


def _dissolve_spans() -> str:
    """``"150-164"``: the frames the demo's dissolves blend over."""
    starts = np.cumsum(_SHOT_LENGTHS)[:-1].tolist()
    return ", ".join(f"{start - blends}-{start - 1}" for start, blends in zip(starts, _DISSOLVES) if blends)


def _as_made(boundaries) -> bool:
    """The demo's shot boundaries found as made: each cut on its frame, the dissolve inside its span."""
    starts = np.cumsum(_SHOT_LENGTHS)[:-1].tolist()
    if len(boundaries) != len(starts):
        return False
    for boundary, start, blends in zip(boundaries, starts, _DISSOLVES):
        if blends == 0 and (boundary.kind, boundary.frame) != ("cut", start):
            return False
        if blends and not (boundary.kind == "dissolve" and start - blends <= boundary.frame <= start):
            return False
    return True


def run_demo(folder: str | os.PathLike, *, device: str = "auto", stream: TextIO | None = None) -> bool:
    """Make a 120-frame synthetic video, sample clips in every mode and check their barcodes; make a
    200-frame video of four shots (two cuts and a dissolve, none on a keyframe) and extract its
    codec and scene keyframes, saying how they differ; print the memory estimate; write pictures
    into ``folder``.

    Args:
        folder: Output folder (created if missing).
        device: Decoder device, as :class:`~vclip.VideoDecoder` takes it.
        stream: Where the report goes (default: standard output).

    Returns:
        True when every sampled frame is the frame asked for and the shot boundaries were found as
        made (cuts on their frame, the dissolve within its frames).
    """
    started = time.perf_counter()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)

    def say(text: str = "") -> None:
        print(text, file=stream or sys.stdout)

    video = make_video(folder / "demo.mp4", num_frames=120, width=320, height=240, keyframe_interval=30)
    shots = make_shots_video(folder / "shots.mp4", dissolves=_DISSOLVES)
    decoder = VideoDecoder(video, device=device)
    say(f"video   {decoder.index!r}")
    say(f"device  {decoder.device}")
    say()
    say("clips in every mode (frame numbers read back from the barcode stamped in each frame):")
    all_correct = True
    rows, row_labels, tile_labels = [], [], []
    for name, sampler in _DEMO_SAMPLERS:
        clips = decoder.get_clips(sampler, seed=0)
        data = to_numpy(clips.data)
        wanted = clips.frame_indices[0].tolist()
        read = [read_barcode(frame) for frame in data[0]]
        all_correct &= read == wanted
        verdict = "barcodes match" if read == wanted else f"BARCODES DIFFER: {read}"
        say(f"  {name:<11} {str(list(data.shape)):<22} frames {format_numbers(wanted)}  {verdict}")
        rows.append(list(data[0]))
        row_labels.append(name if sampler.scaling_factor == 1 else f"{name} x{sampler.scaling_factor:g}")
        tile_labels.append([str(i) for i in wanted])
    clips_sheet = contact_sheet(rows, tile_height=96, row_labels=row_labels, tile_labels=tile_labels)
    sheet = write_image(folder / "clips.png", clips_sheet)
    say()

    shots_index = VideoDecoder(shots).index
    say(f"keyframes of {Path(shots).name} ({shots_index.num_frames} frames, {_shot_plan()}, "
        f"a keyframe every {_KEYFRAME_INTERVAL}):")
    manifest = []
    found = {}
    for method in ("codec", "scene"):
        result = extract_keyframes(shots, method=method, device=device)
        manifest.extend(result.save(folder / "keyframes" / method, image_format="jpg"))
        found[method] = result.frame_indices.tolist()
        if method == "codec":
            detail = f"the stream's keyframes, {result.packets_decoded} packets decoded of {shots_index.num_packets}"
        else:
            detail = "the first frame of every shot"
        say(f"  {method:<6} frames {format_numbers(found[method])}: {detail}")
    boundaries = find_shot_boundaries(shots, device=device)
    scene_correct = _as_made(boundaries)
    all_correct &= scene_correct
    gradual = ", ".join(f"the {b.kind} found at {b.start}-{b.frame}" for b in boundaries if b.kind != "cut")
    if gradual:
        gradual += f", within the {_dissolve_spans()} it was made over"
    say(f"  codec keyframes: {format_numbers(found['codec'])}; scene boundaries: {format_numbers(found['scene'])}"
        f"{f' ({gradual})' if gradual else ''}: they differ because the encoder puts a keyframe every "
        f"{_KEYFRAME_INTERVAL} frames wherever the picture is, and a shot starts where the picture changes"
        f"{'' if scene_correct else f' (SCENES NOT AS MADE: {_shot_plan()})'}")
    manifest_path = folder / "keyframes" / "manifest.json"
    manifest_path.write_text(json.dumps({"keyframes": manifest}, indent=2))
    say()

    say("memory by the formula W x H x C x bytes x batch x T x (1 + augmentation):")
    training = estimate_memory(width=224, height=224, batch_size=8, sequence_length=16, dtype="float32")
    reference = estimate_memory(width=1920, height=1080, batch_size=32, sequence_length=16)
    say(f"  [8, 16, 3, 224, 224] float32          {training}")
    say(f"  [32, 16, 3, 1080, 1920] uint8         {reference}")
    say()
    say(f"wrote {sheet} (one row per mode), {folder / 'keyframes'}/ ({len(manifest)} images, contact sheets, "
        f"manifest.json), {video}, {shots}")
    say(f"{'all frames correct' if all_correct else 'SOME FRAMES WRONG'} in {time.perf_counter() - started:.1f} s")
    return all_correct


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
    add_device_option(demo)
    demo.set_defaults(handler=_run_demo)
