"""``vclip demo``: the main job on a small video made on the spot, checked frame by frame."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Sequence, TextIO

import numpy as np

from ._images import contact_sheet, to_numpy, write_image, write_video
from .decoder import VideoDecoder
from .keyframes import extract_keyframes
from .memory import estimate_memory
from .sampling import contiguous, downscaled, indexed, jittered, keyframe, strided
from .synthetic import _texture, make_video, read_barcode, render_frame

__all__ = ["run_demo", "make_shots_video", "format_numbers"]

_DEMO_SAMPLERS = (
    ("contiguous", contiguous(8)),
    ("strided", strided(8, 4)),
    ("keyframe", keyframe()),
    ("indexed", indexed([0, 119, 60, 60, 7])),
    ("jittered", jittered(8, 4, 1)),
    ("downscaled", downscaled(strided(8, 4), 0.5)),
)
_SHOT_LENGTHS = (45, 40, 35)


def make_shots_video(
    path: str | os.PathLike,
    *,
    shot_lengths: Sequence[int] = _SHOT_LENGTHS,
    width: int = 320,
    height: int = 240,
    fps: int = 30,
    seed: int = 1,
) -> str:
    """A synthetic video of several shots with hard cuts between them (libx264).

    Each shot pans a different texture (seeds ``seed``, ``seed + 1``...); every frame carries its
    index as a barcode (:func:`vclip.synthetic.read_barcode`), counted across shots, so shot ``k``
    starts at frame ``sum(shot_lengths[:k])``.
    """
    total = sum(shot_lengths)
    frames = []
    for shot, length in enumerate(shot_lengths):
        texture = _texture(2 * width, 2 * height, np.random.default_rng(seed + shot))
        first = len(frames)
        frames.extend(render_frame(i, texture, width, height, total) for i in range(first, first + length))
    return write_video(path, frames, fps=fps)


def format_numbers(values: Sequence[int], limit: int = 10) -> str:
    """``"0, 30, 60"``; longer lists keep the first ``limit - 2`` and the last 2 around ``...``."""
    values = list(values)
    return ", ".join(map(str, values)) if len(values) <= limit else (
        ", ".join(map(str, values[: limit - 2])) + ", ..., " + ", ".join(map(str, values[-2:]))
    )


def run_demo(folder: str | os.PathLike, *, device: str = "cpu", stream: TextIO | None = None) -> bool:
    """Make a 120-frame synthetic video, sample clips in every mode, check their barcodes, extract
    keyframes (codec and scene), print the memory estimate, and write pictures into ``folder``.

    Args:
        folder: Output folder (created if missing).
        device: Decoder device, as :class:`~vclip.VideoDecoder` takes it.
        stream: Where the report goes (default: standard output).

    Returns:
        True when every sampled frame is the frame asked for and the scene cuts were found.
    """
    started = time.perf_counter()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)

    def say(text: str = "") -> None:
        print(text, file=stream or sys.stdout)

    video = make_video(folder / "demo.mp4", num_frames=120, width=320, height=240, keyframe_interval=30)
    shots = make_shots_video(folder / "shots.mp4")
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

    say("keyframes:")
    manifest = []
    expected_cuts = np.cumsum((0,) + _SHOT_LENGTHS[:-1]).tolist()
    for method, path in (("codec", video), ("scene", shots)):
        result = extract_keyframes(path, method=method, device=device)
        manifest.extend(result.save(folder / "keyframes" / method, image_format="jpg"))
        found = result.frame_indices.tolist()
        if method == "codec":
            detail = (f"the stream's keyframes, {result.packets_decoded} packets decoded "
                      f"of {decoder.index.num_packets}")
        else:
            all_correct &= found == expected_cuts
            made = "as made" if found == expected_cuts else f"made at {expected_cuts}"
            detail = f"shot starts in {Path(path).name} ({made})"
        say(f"  {method:<6} frames {format_numbers(found)}: {detail}")
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
