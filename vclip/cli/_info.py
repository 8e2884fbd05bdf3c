"""``vclip info``: streams, frames, keyframes, colour and timing of videos, and each audio stream's
codec, rate, channels, duration and start against the video (from one demux pass of its packets)."""

from __future__ import annotations

import argparse
import json

from .._audio.index import index_audio
from .._bytes.sources import open_container
from ..errors import VideoError
from ..index import VideoIndex, index_video
from ._common import (
    add_progress_option,
    add_stream_option,
    exit_status,
    format_numbers,
    progress_bar,
    report_internal_error,
    report_skipped,
    say,
    shard_videos,
)


def _stream_facts(path: str) -> list[dict]:
    """Every stream of the container: index, type, codec and what matters for its type."""
    facts = []
    with open_container(path) as container:
        for stream in container.streams:
            context = stream.codec_context
            entry = {"index": stream.index, "type": stream.type, "codec": context.name if context else None}
            if stream.type == "video":
                entry.update(width=context.width, height=context.height,
                             average_fps=float(stream.average_rate) if stream.average_rate else None)
            elif stream.type == "audio":
                entry.update(sample_rate=context.sample_rate, channels=context.channels)
            if stream.metadata.get("language", "und") != "und":  # ISO 639-2 "und": undetermined
                entry["language"] = stream.metadata["language"]
            facts.append(entry)
    return facts


def _audio_timing(path: str, streams: list[dict], video: VideoIndex) -> None:
    """Add each audio stream's timing (from its packets) to its entry of ``streams``."""
    for entry in streams:
        if entry["type"] != "audio":
            continue
        try:
            audio = index_audio(path, stream_index=entry["index"])
        except VideoError as error:
            entry["audio_problem"] = error.problem
            continue
        if audio is not None:
            entry.update(layout=audio.layout, duration_seconds=audio.duration_seconds,
                         start_seconds=audio.start_seconds,
                         start_offset_seconds=audio.start_seconds - video.start_seconds)


def _describe(path: str, stream_index: int | None) -> dict:
    index = index_video(path, stream_index=stream_index)
    video = index.to_dict()
    video["keyframe_count"] = int(index.keyframe_indices.size)
    video["display_width"], video["display_height"] = index.display_size
    video["keyframe_pts_seconds"] = index.pts_seconds[index.keyframe_indices].tolist()
    streams = _stream_facts(path)
    _audio_timing(path, streams, index)
    return {"file": path, "streams": streams, "video": video}


def _stream_line(stream: dict, selected: int) -> str:
    details = [f"{stream['type']:<9} {stream['codec'] or '?':<10}"]
    if stream["type"] == "video":
        rate = f", {stream['average_fps']:.3f} fps" if stream["average_fps"] else ""
        details.append(f"{stream['width']}x{stream['height']}{rate}")
    elif stream["type"] == "audio":
        details.append(f"{stream['sample_rate']} Hz, {stream['channels']} channels")
        if "duration_seconds" in stream:
            offset = stream["start_offset_seconds"]
            against = "with the video" if abs(offset) < 5e-7 else (
                f"{abs(offset):.3f} s {'after' if offset > 0 else 'before'} the video")
            layout = "" if stream["layout"].endswith(" channels") else f" ({stream['layout']})"
            details[-1] += f"{layout}, {stream['duration_seconds']:.3f} s, starts {against}"
        elif "audio_problem" in stream:
            details.append(f"(its packets cannot be read: {stream['audio_problem']})")
    if "language" in stream:
        details.append(f"[{stream['language']}]")
    if stream["index"] == selected:
        details.append(" <- described below")
    return f"  stream #{stream['index']:<3} " + " ".join(details)


def _orientation_text(video: dict) -> str:
    turn = f"turned {video['rotation']} degrees counter-clockwise" if video["rotation"] else "upright"
    mirror = ", mirrored" if video["mirrored"] else ""
    return f"{turn}{mirror}; a player shows {video['display_width']}x{video['display_height']}"


def _info_table(report: dict) -> str:
    video = report["video"]
    header = video["header_frame_count"]
    keyframes = video["keyframe_indices"]
    rows = [
        ("codec", f"{video['codec']}, {video['pixel_format']}, {video['bit_depth']}-bit"),
        ("size", f"{video['width']}x{video['height']}"),
        ("frame rate", f"{video['average_fps']:.3f} fps, {'variable' if video['variable_frame_rate'] else 'constant'}"),
        ("frames", f"{video['num_frames']}"
                   + (f" (header says {header})" if header not in (None, video["num_frames"]) else "")),
        ("duration", f"{video['duration_seconds']:.3f} s, first frame at {video['start_seconds']:.3f} s"),
        ("keyframes", f"{len(keyframes)} at frames {format_numbers(keyframes, limit=12)}"),
        ("colour", f"{video['color_matrix']}, {video['color_range']} range"),
        ("orientation", _orientation_text(video)),
        ("pixel aspect", video["sample_aspect_ratio"].replace("/", ":") if "/" in video["sample_aspect_ratio"]
         else f"{video['sample_aspect_ratio']}:1" + (" (square)" if video["sample_aspect_ratio"] == "1" else "")),
        ("time base", video["time_base"]),
    ]
    lines = [report["file"]]
    lines += [_stream_line(stream, video["stream_index"]) for stream in report["streams"]]
    lines += [f"  {name:<12} {value}" for name, value in rows]
    return "\n".join(lines)


def _run_info(args: argparse.Namespace) -> int:
    reports, failures = [], 0
    files = [name for file in args.files for name in (shard_videos(file) or [file])]
    for path in progress_bar(args, iterable=files, unit="file", leave=False):
        try:
            reports.append(_describe(path, args.stream_index))
        except VideoError as error:
            failures += 1
            reports.append({"file": path, "error": error.problem})
            report_skipped("info", error)
        except Exception as error:  # a bug: reported for this file, the others go on
            failures += 1
            reports.append({"file": path, "error": report_internal_error("info", path, error)})
    if args.json:
        print(json.dumps(reports, indent=2))
    elif failures < len(files):
        say("\n\n".join(_info_table(report) for report in reports if "error" not in report))
    return exit_status(len(files), failures)


def add_parser(commands) -> None:
    """The ``vclip info`` sub-command."""
    info = commands.add_parser("info", help="streams, frames, keyframes, colour and timing of videos",
                               description="Describe videos: streams, codec, size, frame rate, frame and keyframe "
                                           "counts and positions, colour matrix and range, bit depth, duration; "
                                           "audio streams with codec, rate, channels, duration and start against "
                                           "the video (the described video stream's first frame). A WebDataset "
                                           "shard (.tar, a URL or a brace pattern) stands for its video members; "
                                           "SHARD.tar#MEMBER for one of them.")
    info.add_argument("files", nargs="+", metavar="FILE")
    info.add_argument("--json", action="store_true", help="print a JSON list, one object per file")
    add_stream_option(info)
    add_progress_option(info)
    info.set_defaults(handler=_run_info)
