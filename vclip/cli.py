"""The ``vclip`` command line: ``info``, ``sample``, ``keyframes``, ``check``, ``budget`` and ``demo``.

Exit status: 0 when everything asked for was done; 1 when nothing could be done (the only file,
or every file, could not be read); 2 for bad arguments (argparse's usage errors, and values the
library refuses, such as ``--stride 0``); 3 when some files were reported and skipped while the
others were done. Bad files are reported on stderr, naming the file and the problem, and never
stop a run over several files; an unexpected exception on one file is reported as an internal
error naming the file, and the others go on.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from tqdm import tqdm

from . import __version__
from ._demo import format_numbers, run_demo
from ._images import (
    CHART_FORMATS,
    ChartSeries,
    memory_chart,
    to_numpy,
    write_image,
    write_video,
)
from ._loader.dataset import VIDEO_EXTENSIONS
from ._outputs import (
    OutputError,
    check_output_file,
    check_output_folder,
    inside,
    printable,
    unique_names,
)
from ._sources import is_url
from ._validation import check_integer, check_number, check_optional_integer
from .check import CheckResult, check_videos
from .decoder import Frames, VideoDecoder
from .errors import VideoError
from .index import VideoIndex, index_video, open_container
from .keyframes import (
    KEYFRAME_METHODS,
    THUMBNAIL_WIDTH,
    ProgressCallback,
    extract_keyframes,
)
from .memory import (
    BYTES_PER_ELEMENT,
    MemoryEstimate,
    estimate_memory,
    format_bytes,
    largest_batch_size,
    largest_sequence_length,
    parse_bytes,
    plan_loader_memory,
)
from .sampling import (
    ClipSampler,
    check_scaling_factor,
    contiguous,
    downscaled,
    indexed,
    jittered,
    keyframe,
    scaled_size,
    strided,
)
from .transforms import TransformSpec

__all__ = ["main", "build_parser"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_PARTIAL = 0, 1, 2, 3
SAMPLE_MODES = ("contiguous", "strided", "keyframe", "indexed", "jittered", "downscaled")
SAMPLE_FORMATS = {".npz": "npz", ".pt": "pt", ".mp4": "mp4"}  # or a folder: see _sample_outputs
LIST_FILE_SUFFIXES = (".txt", ".csv", ".lst", ".list")  # an input with one of these is a list of videos
MANIFEST = "manifest.json"
_PNG_NAME = re.compile(r"clip\d{3,}_\d{3,}_frame\d{6,}\.png")
_TEMPORAL_OPTIONS = {"sequence_length", "starts", "clips_per_video", "step", "end_policy", "fps", "duration",
                     "step_seconds", "start_seconds", "end_seconds"}
_MODE_OPTIONS = {  # sample options that only some modes take
    "contiguous": _TEMPORAL_OPTIONS,
    "strided": _TEMPORAL_OPTIONS | {"stride"},
    "downscaled": _TEMPORAL_OPTIONS | {"stride"},
    "jittered": _TEMPORAL_OPTIONS | {"stride", "jitter"},
    "keyframe": {"max_frames", "keyframe_selection"},
    "indexed": {"frame_indices"},
}
_DEVICE_PATTERN = re.compile(r"cpu|cuda|cuda:\d+|auto")


class _UsageError(Exception):
    """A value the library refused; exit status 2."""


@contextmanager
def _refused_arguments():
    """Turn the library's ValueError/TypeError/IndexError on user input into a usage error."""
    try:
        yield
    except UnicodeError:  # a ValueError, but from a file's bytes, not from the user's values
        raise
    except (ValueError, TypeError, IndexError) as error:
        raise _UsageError(str(error)) from None


# -- argument types ----------------------------------------------------------------------------
def _int_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers (e.g. 0,10,-1)") from None


def _frame_size(text: str) -> int | tuple[int, int]:
    """``"224"`` (the shorter side) or ``"WIDTHxHEIGHT"``, as TransformSpec's int or (height, width)."""
    match = re.fullmatch(r"(\d+)(?:x(\d+))?", text.strip().lower())
    if not match:
        raise argparse.ArgumentTypeError(
            f"{text!r} must be a number of pixels (e.g. 224) or WIDTHxHEIGHT (e.g. 320x240)")
    return int(match.group(1)) if match.group(2) is None else (int(match.group(2)), int(match.group(1)))


def _device(text: str) -> str:
    if not _DEVICE_PATTERN.fullmatch(text.strip().lower()):
        raise argparse.ArgumentTypeError(f"{text!r} must be 'cpu', 'cuda', 'cuda:N' or 'auto'")
    return text.strip().lower()


def _add_stream(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stream", type=int, metavar="N",
                        help="container index of the video stream (default: the first)")


def _add_device(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", type=_device, default="auto",
                        help="cpu, cuda, cuda:N or auto (default: auto, the GPU when one is usable)")


def _add_progress(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction,
                        help="progress bars on stderr (default: only when stderr is a terminal)")


# -- output helpers ----------------------------------------------------------------------------
def _say(text: str, file=None) -> None:
    """Print ``text`` so that any file name in it prints, whatever the stream's encoding, above any
    progress bar."""
    stream = file or sys.stdout
    tqdm.write(printable(text, stream), file=stream)


def _error(command: str, message: str) -> None:
    _say(f"vclip {command}: error: {message}", sys.stderr)


def _skipped(command: str, error: VideoError) -> None:
    _say(f"vclip {command}: skipped {error}", sys.stderr)


def _internal_error(command: str, path: str, error: Exception) -> str:
    """Report an unexpected exception on one file; returns the problem text. An OSError is the
    system's (a write that failed, a full disk); anything else is a bug in vclip."""
    if isinstance(error, OSError):
        problem = f"failed ({type(error).__name__}: {error})"
    else:
        problem = f"internal error ({type(error).__name__}: {error}); please report it"
    _say(f"vclip {command}: skipped {path}: {problem}", sys.stderr)
    return problem


def _expand_inputs(sources: Sequence[str]) -> list[str]:
    """Video paths from files, folders (their videos by extension, recursively, sorted) and list
    files (``.txt``, ``.csv``, ``.lst``, ``.list``: one path or URL per line, relative to the list's folder;
    blank lines and ``#`` comments skipped; a trailing ``,label`` or `` label`` is ignored).

    Raises:
        _UsageError: A list file that cannot be read, or no video at all.
    """
    paths: list[str] = []
    for source in sources:
        path = Path(source)
        if path.is_dir():
            found = sorted(os.fspath(p) for p in path.rglob("*")
                           if p.is_file() and p.suffix.lower() in VIDEO_EXTENSIONS)
            if not found:
                _say(f"vclip: warning: {source} holds no video files ({', '.join(VIDEO_EXTENSIONS)})", sys.stderr)
            paths.extend(found)
        elif path.suffix.lower() in LIST_FILE_SUFFIXES and path.is_file():
            paths.extend(_read_list_file(path))
        else:
            paths.append(source)
    if not paths:
        raise _UsageError(f"no videos in {', '.join(map(repr, sources))}")
    return paths


def _read_list_file(list_file: Path) -> list[str]:
    try:
        lines = list_file.read_text(encoding="utf-8", errors="surrogateescape").splitlines()
    except OSError as error:
        raise _UsageError(f"list file {os.fspath(list_file)!r} cannot be read ({error.strerror})") from None
    paths = []
    for line in lines:
        text = line.strip()
        if not text or text.startswith("#") or text.lower().replace(" ", "") in ("path,label", "path"):
            continue
        if is_url(text):  # a URL is taken as it is, less a trailing label
            match = re.fullmatch(r"(\S+?)\s*(?:,|\s)\s*-?\d+", text)
            paths.append(match.group(1) if match else text)
            continue
        candidate = list_file.parent / text
        if not candidate.exists():
            match = re.fullmatch(r"(.+?)\s*(?:,|\s)\s*-?\d+", text)  # "path,label" or "path label"
            if match:
                candidate = list_file.parent / match.group(1)
        paths.append(os.fspath(candidate))
    return paths


def _exit_status(files: int, failures: int) -> int:
    if failures == 0:
        return EXIT_OK
    return EXIT_FAILED if failures == files else EXIT_PARTIAL


def _progress_bar(args: argparse.Namespace, **options) -> tqdm:
    """A tqdm bar on stderr: drawn with ``--progress``, never with ``--no-progress``, and otherwise
    only when stderr is a terminal. Print lines while it is open with ``tqdm.write``."""
    return tqdm(file=sys.stderr, disable=None if args.progress is None else not args.progress,
                dynamic_ncols=True, **options)


def _following(bar: tqdm) -> ProgressCallback:
    """An ``on_progress(done, total)`` callback that moves ``bar``."""
    def on_progress(done: int, total: int) -> None:
        if bar.total != total:
            bar.total = total
            bar.refresh()
        bar.update(done - bar.n)

    return on_progress


# -- vclip info --------------------------------------------------------------------------------
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


def _describe(path: str, stream_index: int | None) -> dict:
    index = index_video(path, stream_index=stream_index)
    video = index.to_dict()
    video["keyframe_count"] = int(index.keyframe_indices.size)
    video["display_width"], video["display_height"] = index.display_size
    video["keyframe_pts_seconds"] = index.pts_seconds[index.keyframe_indices].tolist()
    return {"file": path, "streams": _stream_facts(path), "video": video}


def _stream_line(stream: dict, selected: int) -> str:
    details = [f"{stream['type']:<9} {stream['codec'] or '?':<10}"]
    if stream["type"] == "video":
        rate = f", {stream['average_fps']:.3f} fps" if stream["average_fps"] else ""
        details.append(f"{stream['width']}x{stream['height']}{rate}")
    elif stream["type"] == "audio":
        details.append(f"{stream['sample_rate']} Hz, {stream['channels']} channels")
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
        ("frames", f"{video['num_frames']}" + (f" (header says {header})" if header != video["num_frames"] else "")),
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
    for path in _progress_bar(args, iterable=args.files, unit="file", leave=False):
        try:
            reports.append(_describe(path, args.stream))
        except VideoError as error:
            failures += 1
            reports.append({"file": path, "error": error.problem})
            _skipped("info", error)
        except Exception as error:  # a bug: reported for this file, the others go on
            failures += 1
            reports.append({"file": path, "error": _internal_error("info", path, error)})
    if args.json:
        print(json.dumps(reports, indent=2))
    elif failures < len(args.files):
        _say("\n\n".join(_info_table(report) for report in reports if "error" not in report))
    return _exit_status(len(args.files), failures)


# -- vclip sample ------------------------------------------------------------------------------
def _sample_outputs(args: argparse.Namespace, inputs: list[str]) -> tuple[str, Path, list[Path] | None]:
    """The format, ``--out``, and one output path per input (None: one combined file at ``--out``).

    ``--out`` ending in .npz or .pt: one file (for several inputs, their clips together); .mp4: one
    input's clips; anything else names a folder (a path ending in a separator, without a suffix,
    or an existing folder): PNGs in it for one input, else ``OUT/<name>/`` PNG folders, or
    ``OUT/<name>.<format>`` files with ``--format``. Checked, and a rerun's outputs dealt with,
    before any decoding.
    """
    out = Path(args.out)
    suffix = out.suffix.lower()
    if suffix in SAMPLE_FORMATS and not args.out.endswith(os.sep):
        output_format = SAMPLE_FORMATS[suffix]
        if args.format is not None and args.format != output_format:
            raise _UsageError(f"--format {args.format} does not match --out ({args.out!r}); "
                              "--format applies when --out is a folder")
        if output_format == "mp4" and len(inputs) > 1:
            raise _UsageError(f"--out ({args.out!r}) takes the clips of one video; for {len(inputs)} videos "
                              "name a folder and pass --format mp4 (one .mp4 per video)")
        check_output_file(out)
        return output_format, out, [out] if output_format == "mp4" else None
    if suffix and not args.out.endswith(os.sep) and not out.is_dir():
        raise _UsageError(f"--out ({args.out!r}) must end in {', '.join(SAMPLE_FORMATS)}, or name a folder "
                          f"(end it in {os.sep!r} or leave out the suffix)")
    check_output_folder(out)
    output_format = args.format or "png"
    if output_format == "png" and len(inputs) == 1:
        _clear_png_folder(out, args.overwrite)
        return output_format, out, [out]
    names = unique_names(inputs)
    targets = [out / (name if output_format == "png" else f"{name}.{output_format}") for name in names]
    used = [target for target in targets if target.exists()]
    if used and not args.overwrite:
        raise _UsageError(f"{len(used)} of the outputs already exist in {args.out!r} (e.g. {os.fspath(used[0])!r}); "
                          "pass --overwrite to replace them, or pick another --out")
    for target in used:
        if target.is_dir():
            _clear_png_folder(target, overwrite=True)
        else:
            target.unlink()
    return output_format, out, targets


def _clear_png_folder(folder: Path, overwrite: bool) -> None:
    """Refuse a folder holding PNGs of an earlier sample run, or (``overwrite``) remove them."""
    if not folder.is_dir():
        return
    earlier = [entry for entry in folder.iterdir() if _PNG_NAME.fullmatch(entry.name) and entry.is_file()]
    if earlier and not overwrite:
        raise _UsageError(f"--out ({os.fspath(folder)!r}) already holds {len(earlier)} clip PNGs of an earlier run; "
                          "pass --overwrite to replace them, or pick another --out")
    for entry in earlier:
        entry.unlink()


def _check_mode_options(args: argparse.Namespace) -> None:
    allowed = _MODE_OPTIONS[args.mode]
    for option in sorted(set().union(*_MODE_OPTIONS.values()) - allowed):
        if getattr(args, option) is not None:
            takers = ", ".join(mode for mode, names in _MODE_OPTIONS.items() if option in names)
            flag = "--" + option.replace("_", "-")
            raise _UsageError(f"{flag} does not apply to --mode {args.mode} (it applies to: {takers})")


def _sampler(args: argparse.Namespace) -> ClipSampler:
    mode = args.mode
    if mode == "indexed":
        if args.frame_indices is None:
            raise _UsageError("--mode indexed needs --frame-indices (e.g. --frame-indices 0,10,-1)")
        sampler = indexed(args.frame_indices)
    elif mode == "keyframe":
        sampler = keyframe(args.max_frames, selection=args.keyframe_selection or "even")
    else:
        stepped = args.step is not None or args.step_seconds is not None
        options = dict(
            starts=args.starts or ("step" if stepped else "random"),
            clips_per_video=1 if args.clips_per_video is None else args.clips_per_video,
            step=args.step,
            end_policy=args.end_policy or "repeat_last",
            fps=args.fps,
            duration=args.duration,
            step_seconds=args.step_seconds,
        )
        length = 16 if args.sequence_length is None and args.duration is None else args.sequence_length
        if mode == "contiguous":
            sampler = contiguous(length, **options)
        elif mode == "jittered":
            sampler = jittered(length, 2 if args.stride is None else args.stride,
                               1 if args.jitter is None else args.jitter, **options)
        else:
            default_stride = 2 if mode == "strided" else 1
            sampler = strided(length, default_stride if args.stride is None else args.stride, **options)
    scaling_factor = args.scaling_factor if args.scaling_factor is not None else (0.5 if mode == "downscaled" else 1.0)
    return downscaled(sampler, scaling_factor) if scaling_factor != 1.0 else sampler


def _padded_frames(clips: Frames, sampler: ClipSampler, num_frames: int) -> np.ndarray:
    """Which frames of each clip the end policy filled in (bool, shaped like ``frame_indices``).

    Uses ``Frames.padded`` where the decoder gives it; otherwise the same rule: a temporal clip
    runs past the last frame only when the video is shorter than its span, and then it starts at 0.
    """
    padded = getattr(clips, "padded", None)
    if padded is not None:
        return np.asarray(padded, dtype=bool)
    flags = np.zeros(clips.frame_indices.shape, dtype=bool)
    length = sampler.sequence_length  # None only where span is 0
    if sampler.mode not in ("indexed", "keyframe") and length is not None and sampler.span > num_frames:
        flags[:] = np.arange(length) * sampler.stride >= num_frames
    return flags


def _all_dropped(sampler: ClipSampler, num_frames: int) -> bool:
    """Whether ``drop`` leaves no clip of frame numbers in a whole video (clips in seconds or in a
    segment are found empty once drawn)."""
    return (sampler.mode not in ("indexed", "keyframe") and not sampler.in_seconds and sampler.end_policy == "drop"
            and sampler.span > num_frames)


def _segment(args: argparse.Namespace) -> tuple[float | None, float | None] | None:
    """The ``--start-seconds``/``--end-seconds`` window, or None."""
    if args.start_seconds is None and args.end_seconds is None:
        return None
    return (args.start_seconds, args.end_seconds)


def _write_clips(output_format: str, out: Path, clips: Frames, data: np.ndarray, padded: np.ndarray,
                 index: VideoIndex, mode: str) -> None:
    if output_format in ("npz", "pt"):
        out.parent.mkdir(parents=True, exist_ok=True)
        _write_arrays(output_format, out, data, clips.frame_indices, clips.pts_seconds, padded,
                      np.zeros(len(data), dtype=np.int64), [index.path], mode)
    elif output_format == "mp4":
        out.parent.mkdir(parents=True, exist_ok=True)
        write_video(out, (frame for clip in data for frame in clip), fps=index.average_fps)
    else:
        out.mkdir(parents=True, exist_ok=True)
        for number, (clip, frame_indices) in enumerate(zip(data, clips.frame_indices.tolist())):
            for position, (frame, frame_index) in enumerate(zip(clip, frame_indices)):
                write_image(out / f"clip{number:03d}_{position:03d}_frame{frame_index:06d}.png", frame)


def _write_arrays(output_format: str, out: Path, data: np.ndarray, frame_indices: np.ndarray,
                  pts_seconds: np.ndarray, padded: np.ndarray, video_ids: np.ndarray, paths: list[str],
                  mode: str) -> None:
    """An .npz or .pt of clips; ``video_ids[i]`` is the position in ``paths`` of clip i's video."""
    arrays = dict(clips=data, frame_indices=frame_indices, pts_seconds=pts_seconds, padded=padded,
                  video_ids=video_ids)
    if output_format == "npz":
        names = np.array([p.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace") for p in paths])
        source = {"source": names[0]} if len(paths) == 1 else {}
        # allow_pickle is the default, named so mypy maps no array to it
        np.savez(out, allow_pickle=True, **arrays, paths=names, mode=np.str_(mode), **source)
    else:
        import torch

        source = {"source": paths[0]} if len(paths) == 1 else {}
        torch.save({**{name: torch.from_numpy(np.ascontiguousarray(a)) for name, a in arrays.items()},
                    "paths": list(paths), "mode": mode, **source}, out)


def _clip_lines(clips: Frames, padded: np.ndarray, sampler: ClipSampler, num_frames: int,
                windowed: bool = False) -> list[str]:
    lines = []
    for number, (frame_indices, flags) in enumerate(zip(clips.frame_indices.tolist(), padded.tolist())):
        line = f"  clip {number}: frames {format_numbers(frame_indices, limit=16)}"
        if any(flags):
            where = ("its clip runs past the end of the segment or video" if windowed or sampler.in_seconds
                     else f"the video has {num_frames} frames, a clip spans {sampler.span}")
            line += f" ({sum(flags)} of {len(flags)} frames padded by end policy {sampler.end_policy}: {where})"
        lines.append(line)
    return lines


def _run_sample(args: argparse.Namespace) -> int:
    _check_mode_options(args)
    with _refused_arguments():
        sampler = _sampler(args)
        spatial = args.resize is not None or args.crop is not None
        transform = TransformSpec(resize=args.resize, crop=args.crop) if spatial else None
    inputs = _expand_inputs(args.files)
    try:
        output_format, out, targets = _sample_outputs(args, inputs)
    except OutputError as error:
        raise _UsageError(str(error)) from None
    if output_format == "pt":
        try:
            import torch  # noqa: F401
        except ImportError:
            raise _UsageError("writing .pt needs PyTorch, which is not installed (pip install 'vclip-nvdec[torch]'); "
                              "write .npz instead") from None
    combined: list[tuple[int, Frames, np.ndarray, np.ndarray]] = []  # (input number, clips, data, padded)
    skipped = 0
    progress = _progress_bar(args, total=len(inputs), unit="video", leave=False)
    for number, path in enumerate(inputs):
        try:
            decoder = VideoDecoder(path, stream_index=args.stream, device=args.device)
            num_frames = decoder.index.num_frames
            if _all_dropped(sampler, num_frames):
                skipped += 1
                _say(f"vclip sample: skipped {path}: no clip fits (a clip spans {sampler.span} frames, the video has "
                     f"{num_frames}; --end-policy drop drops them all)", sys.stderr)
                continue
            with _refused_arguments():
                clips = decoder.get_clips(sampler, transform=transform, seed=args.seed, segment=_segment(args))
            if not len(clips.frame_indices):
                skipped += 1
                _say(f"vclip sample: skipped {path}: no clip fits (--end-policy drop drops them all)", sys.stderr)
                continue
            data = to_numpy(clips.data)
            padded = _padded_frames(clips, sampler, num_frames)
            if targets is None:
                if combined and data.shape[1:] != combined[0][2].shape[1:]:
                    raise VideoError(path, f"its clips come out {list(data.shape[1:])} but {out} holds "
                                           f"{list(combined[0][2].shape[1:])}; pass --resize/--crop so that every "
                                           "video fits, or write one file per video (--out FOLDER --format npz)")
                combined.append((number, clips, data, padded))
                destination = out
            else:
                destination = targets[number]
                _write_clips(output_format, destination, clips, data, padded, decoder.index, args.mode)
        except VideoError as error:
            skipped += 1
            _skipped("sample", error)
            continue
        except _UsageError as error:  # a value this video refuses (e.g. a frame index past its end)
            if len(inputs) == 1:
                raise
            skipped += 1
            _say(f"vclip sample: skipped {path}: {error}", sys.stderr)
            continue
        except Exception as error:  # a bug or a write that failed: reported for this file, the others go on
            skipped += 1
            _internal_error("sample", path, error)
            continue
        finally:
            progress.update()
        folder = os.sep if output_format == "png" else ""
        _say(f"{path}: {len(data)} {args.mode} clip{'s' if len(data) != 1 else ''} {list(data.shape)} {data.dtype} "
             f"on {clips.device} -> {destination}{folder}")
        _say("\n".join(_clip_lines(clips, padded, sampler, num_frames, windowed=_segment(args) is not None)))
    progress.close()
    if combined:
        try:
            _write_arrays(
                output_format, out, np.concatenate([c[2] for c in combined]),
                np.concatenate([c[1].frame_indices for c in combined]),
                np.concatenate([c[1].pts_seconds for c in combined]),
                np.concatenate([c[3] for c in combined]),
                np.concatenate([np.full(len(c[2]), position, dtype=np.int64) for position, c in enumerate(combined)]),
                [inputs[number] for number, *_ in combined], args.mode,
            )
        except OSError as error:
            _error("sample", f"writing {out} failed ({error})")
            return EXIT_FAILED
        if len(inputs) > 1:
            clips_written = sum(len(c[2]) for c in combined)
            _say(f"{len(combined)} of {len(inputs)} videos, {clips_written} clips -> {out} (video_ids index paths)")
    return _exit_status(len(inputs), skipped)


# -- vclip keyframes ---------------------------------------------------------------------------
def _prepare_keyframes_out(out: Path, overwrite: bool) -> set[str]:
    """Check ``--out`` and deal with an earlier run in it; returns the names per-video folders must avoid.

    A folder holding a manifest is refused, or with ``overwrite`` the files and folders that
    manifest lists (inside ``--out``) are removed first; nothing else in the folder is touched.
    """
    try:
        check_output_folder(out)
    except OutputError as error:
        raise _UsageError(str(error)) from None
    manifest = out / MANIFEST
    if manifest.exists() or manifest.is_symlink():
        if not overwrite:
            raise _UsageError(f"--out ({os.fspath(out)!r}) holds an earlier run ({MANIFEST}); pass --overwrite to "
                              "replace its outputs, or pick another --out")
        _remove_earlier_run(out, manifest)
    existing = {entry.name for entry in out.iterdir()} if out.is_dir() else set()
    return existing | {MANIFEST}


def _remove_earlier_run(out: Path, manifest: Path) -> None:
    try:
        earlier = json.loads(manifest.read_text(encoding="utf-8"))
        files = [r["image"] for r in earlier["keyframes"]] + [v["contact_sheet"] for v in earlier["videos"]
                                                               if v.get("contact_sheet")]
        folders = [v["folder"] for v in earlier["videos"]]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise _UsageError(f"--out ({os.fspath(out)!r}): its {MANIFEST} cannot be read ({error}), so the earlier "
                          "run's outputs are unknown; remove them yourself or pick another --out") from None
    for name in files:
        path = out / name
        if inside(out, path.parent) and (path.is_file() or path.is_symlink()):
            path.unlink()
    for name in folders:
        folder = out / name
        if inside(out, folder) and folder.resolve() != out.resolve() and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    manifest.unlink()


def _run_keyframes(args: argparse.Namespace) -> int:
    with _refused_arguments():  # refused before --out is touched or anything decoded
        check_scaling_factor(args.scaling_factor)
        check_optional_integer("max_frames", args.max, minimum=1, none_means="for all")
        check_number("scene_threshold", args.scene_threshold, minimum=1, minimum_inclusive=False)
    files = _expand_inputs(args.files)
    out = Path(args.out)
    with _refused_arguments():
        check_integer("thumbnail_width", args.thumbnail_width, minimum=16)
    taken = _prepare_keyframes_out(out, args.overwrite)
    folders = unique_names(files, taken=taken)
    records, videos, errors = [], [], []
    out.mkdir(parents=True, exist_ok=True)
    try:
        for path, folder_name in zip(_progress_bar(args, iterable=files, unit="video"), folders):
            started = time.perf_counter()
            try:
                with _refused_arguments(), _progress_bar(args, desc=Path(path).name, unit="frame", leave=False) as bar:
                    result = extract_keyframes(path, method=args.method, max_frames=args.max, device=args.device,
                                               stream_index=args.stream, scaling_factor=args.scaling_factor,
                                               scene_threshold=args.scene_threshold, on_progress=_following(bar))
                folder = out / folder_name
                saved = result.save(folder, image_format=args.format, thumbnail_width=args.thumbnail_width)
            except VideoError as error:
                _skipped("keyframes", error)
                errors.append({"file": path, "problem": error.problem})
                continue
            except Exception as error:  # a bug, or writing the images failed: reported, the others go on
                errors.append({"file": path, "problem": _internal_error("keyframes", path, error)})
                continue
            for record in saved:
                record["image"] = os.path.relpath(record["image"], out)
            records.extend(saved)
            videos.append({
                "file": result.path, "method": result.method, "keyframes": len(result), "folder": folder_name,
                "contact_sheet": os.path.relpath(folder / f"contact_sheet.{args.format}", out) if saved else None,
                "packets_decoded": result.packets_decoded, "device": result.device,
                "seconds": round(time.perf_counter() - started, 4),
            })
            noun = "keyframe" if len(result) == 1 else "keyframes"
            _say(f"{path}: {len(result)} {args.method} {noun} (frames {format_numbers(result.frame_indices.tolist())}) "
                 f"-> {folder}{os.sep}")
    finally:  # the manifest of what was written, also when the run stops early
        manifest = {"method": args.method, "keyframes": records, "videos": videos, "errors": errors}
        (out / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    _say(f"{len(videos)} of {len(files)} videos, {len(records)} images; manifest: {out / MANIFEST}")
    return _exit_status(len(files), len(errors))


# -- vclip check -------------------------------------------------------------------------------
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
    inputs = _expand_inputs(args.files)
    with _refused_arguments():
        check_optional_integer("workers", args.workers, minimum=1)
    progress = _progress_bar(args, total=len(inputs), unit="video", leave=False)

    def done(result: CheckResult) -> None:
        progress.update()
        if not result.ok and not progress.disable:  # on a terminal, bad videos show as they are found
            detail = result.error or "; ".join(result.problems)
            progress.write(printable(f"vclip check: {result.path}: {result.status}: {detail}", sys.stderr),
                           file=sys.stderr)

    with _refused_arguments():
        results = check_videos(inputs, device=args.device, stream_index=args.stream, workers=args.workers,
                               on_result=done)
    progress.close()
    if args.json:
        print(json.dumps([result.to_dict() for result in results], indent=2))
    else:
        _say(_check_table(results))
    if all(result.ok for result in results):
        return EXIT_OK
    return EXIT_FAILED if all(result.status == "unreadable" for result in results) else EXIT_PARTIAL


# -- vclip budget ------------------------------------------------------------------------------
def _variants(args: argparse.Namespace, width: int, height: int) -> list[tuple[str, MemoryEstimate]]:
    """The configuration with one choice changed at a time: dtype, scaling factor, NV12, augmentation.
    Labels of the rows that are the configuration itself end in "(this)"."""
    common = dict(batch_size=args.batch, sequence_length=args.seq, augmentation_factor=args.aug)
    this = {True: " (this)", False: ""}
    variants = []
    for dtype in ("uint8", "float16", "float32"):
        variants.append((f"dtype {dtype}{this[dtype == args.dtype]}",
                         estimate_memory(width=width, height=height, channels=args.channels, dtype=dtype, **common)))
    for factor in sorted({1.0, 0.5, 0.25, args.scaling_factor}, reverse=True):
        scaled_width, scaled_height = scaled_size(args.width, args.height, factor)
        label = f"scaling factor {factor:g} ({scaled_width}x{scaled_height}){this[factor == args.scaling_factor]}"
        variants.append((label, estimate_memory(width=scaled_width, height=scaled_height, channels=args.channels,
                                         dtype=args.dtype, **common)))
    variants.append(("NV12 surfaces (uint8, 1.5 bytes/pixel)",  # Y plane plus half-height interleaved UV
                     estimate_memory(width=width, height=height + (height + 1) // 2, channels=1, dtype="uint8",
                                     **common)))
    if args.aug:
        variants.append(("no augmentation copies", estimate_memory(
            width=width, height=height, channels=args.channels, dtype=args.dtype,
            batch_size=args.batch, sequence_length=args.seq)))
    return variants


def _budget_chart(args: argparse.Namespace, budget: int | None,
                  lines: Sequence[tuple[str, Callable[[int], int], int | None]]) -> str:
    """Write ``args.chart``: memory against batch size, one line per ``(label, bytes of a batch size,
    largest batch that fits)``, with the budget and ``--batch`` (when given) marked."""
    marked = {batch for batch in (args.batch, *(largest for _, _, largest in lines)) if batch}
    top = max(*marked, 2) * 5 // 4 + 1
    batches = sorted(marked | set(np.linspace(1, top, min(top, 64)).round().astype(int).tolist()))
    series = [ChartSeries(label, [bytes_of(batch) for batch in batches], largest)
              for label, bytes_of, largest in lines]
    title = f"{args.width}x{args.height}x{args.channels} {args.dtype}, {args.seq} frames per clip"
    if args.scaling_factor != 1:
        title += f", scaling factor {args.scaling_factor:g}"
    return memory_chart(args.chart, batches, series, title=title, budget=budget, batch_size=args.batch)


def _loader_estimate(args: argparse.Namespace, width: int, height: int, batch: int):
    """What a ClipLoader with the given prefetch depth, decode threads and processes needs."""
    return plan_loader_memory(
        width=width, height=height, batch_size=batch, sequence_length=args.seq, channels=args.channels,
        dtype=args.dtype, augmentation_factor=args.aug, prefetch_queue_depth=args.prefetch,
        num_threads=args.threads, decode_processes=args.processes, device=args.device,
        video_width=args.width, video_height=args.height,
    )


def _run_budget(args: argparse.Namespace) -> int:
    batch_given = args.batch is not None
    if not batch_given:
        if args.budget is None:
            raise _UsageError("--batch is needed, unless --budget asks for the largest batch that fits")
        args.batch = 1  # the figures below are per clip
    with _refused_arguments():
        check_integer("prefetch", args.prefetch, minimum=1)
        check_integer("threads", args.threads, minimum=0)
        check_integer("processes", args.processes, minimum=0)
        base = dict(channels=args.channels, dtype=args.dtype, augmentation_factor=args.aug)
        estimate_memory(width=args.width, height=args.height, batch_size=args.batch, sequence_length=args.seq, **base)
        check_scaling_factor(args.scaling_factor)
        budget = parse_bytes(args.budget) if args.budget is not None else None
    if args.chart is not None and Path(args.chart).suffix.lower() not in CHART_FORMATS:
        raise _UsageError(f"--chart ({args.chart!r}) must end in {', '.join(CHART_FORMATS)}")
    width, height = scaled_size(args.width, args.height, args.scaling_factor)
    current = estimate_memory(width=width, height=height, batch_size=args.batch, sequence_length=args.seq, **base)
    variants = _variants(args, width, height)
    largest_batch = largest_sequence = None
    if budget is not None:
        largest_batch = largest_batch_size(budget, width=width, height=height, sequence_length=args.seq, **base)
        largest_sequence = largest_sequence_length(budget, width=width, height=height, batch_size=args.batch, **base)
    loader = _loader_estimate(args, width, height, args.batch)
    loader_largest = loader.largest_batch_size(budget) if budget is not None else None
    chart = None
    if args.chart:
        def formula(batch: int) -> int:
            return estimate_memory(width=width, height=height, batch_size=batch, sequence_length=args.seq, **base).bytes

        def loader_bytes(batch: int) -> int:
            return _loader_estimate(args, width, height, batch).total

        try:
            chart = _budget_chart(args, budget, [("formula", formula, largest_batch),
                                                 ("ClipLoader", loader_bytes, loader_largest)])
        except ImportError as error:
            raise _UsageError(f"--chart: {error}") from None
    loader_report = {
        "prefetch_queue_depth": args.prefetch, "buffers": loader.buffers, "decoders": loader.decoders,
        "processes": args.processes, "device": args.device, "bytes": loader.total,
        "output_buffers": loader.output_buffers, "decode_surfaces": loader.decode_surfaces,
        "workspace": loader.workspace, "cuda_context": loader.cuda_context,
        "fits": None if budget is None else loader.total <= budget, "largest_batch_size": loader_largest,
    }
    if args.json:
        print(json.dumps({
            "width": width, "height": height, "channels": args.channels, "dtype": args.dtype,
            "bytes_per_element": BYTES_PER_ELEMENT[args.dtype], "batch_size": args.batch if batch_given else None,
            "sequence_length": args.seq,
            "augmentation_factor": args.aug, "scaling_factor": args.scaling_factor,
            "bytes": current.bytes, "gb": current.gb, "gib": current.gib,
            "variants": [{"choice": label, "bytes": estimate.bytes, "ratio": estimate.bytes / current.bytes}
                         for label, estimate in variants],
            "budget_bytes": budget, "fits": None if budget is None else current.bytes <= budget,
            "largest_batch_size": largest_batch, "largest_sequence_length": largest_sequence, "chart": chart,
            "loader": loader_report,
        }, indent=2))
        return EXIT_OK
    scaled = f" (scaling factor {args.scaling_factor:g} of {args.width}x{args.height})"
    scaled = "" if args.scaling_factor == 1 else scaled
    what = f"batch {args.batch}" if batch_given else "one clip (no --batch)"
    print(f"one batch: {width}x{height}{scaled}, {args.channels} channels, {args.dtype}, {what}, "
          f"{args.seq} frames, augmentation factor {args.aug:g}")
    print(f"  {width} x {height} x {args.channels} x {current.bytes_per_element} x {args.batch} x {args.seq} "
          f"x (1 + {args.aug:g}) = {current}")
    print(f"\n{'what each choice costs, the rest unchanged':<44}{'bytes':>16} {'GB':>9} {'GiB':>9} {'vs this':>9}")
    for label, estimate in variants:
        print(f"  {label:<42}{estimate.bytes:>16,} {estimate.gb:>9.2f} {estimate.gib:>9.2f} "
              f"{estimate.bytes / current.bytes:>8.2f}x")
    if budget is not None:
        verdict = (f"fits ({current.bytes / budget:.0%} of it)" if current.bytes <= budget
                   else f"does not fit (needs {current.bytes / budget:.2f}x)")
        print(f"\nbudget {format_bytes(budget)}" + (f": this batch {verdict}" if batch_given else ", by the formula:"))
        print(f"  {f'largest batch size at {args.seq} frames':<42}{largest_batch:>16,}")
        if batch_given:
            print(f"  {f'largest sequence length at batch {args.batch}':<42}{largest_sequence:>16,}")
    place = "the CPU (host memory)" if args.device == "cpu" else f"{loader.decoders} NVDEC decoders"
    print(f"\na ClipLoader (prefetch {args.prefetch}: {loader.buffers} output buffers; {place}; "
          f"{args.processes} decode processes) needs, for {what}:")
    print(f"  {format_bytes(loader.total)}")
    for label, part in (("output buffers", loader.output_buffers), ("decode surfaces", loader.decode_surfaces),
                        ("workspace", loader.workspace), ("CUDA contexts", loader.cuda_context)):
        print(f"  {label:<42}{part:>16,}")
    if budget is not None:
        verdict = "fits" if loader.total <= budget else "does not fit"
        print(f"  budget {format_bytes(budget)}: {verdict}; largest batch size the loader fits: {loader_largest:,}")
        if loader_largest == 0:
            print(f"  (the parts that do not grow with the batch take {format_bytes(loader.fixed_bytes)})")
    if chart:
        print(f"\nchart: {chart}")
    return EXIT_OK


# -- vclip demo --------------------------------------------------------------------------------
def _run_demo(args: argparse.Namespace) -> int:
    return EXIT_OK if run_demo(args.out, device=args.device) else EXIT_FAILED


# -- vclip index -------------------------------------------------------------------------------
def _run_index(args: argparse.Namespace) -> int:
    """Build or update a dataset catalog; bad videos are listed in it and reported, never fatal."""
    if Path(args.out).suffix.lower() != ".parquet":
        raise _UsageError(f"--out ({args.out!r}) must end in .parquet (the catalog is one Parquet file)")
    if args.workers is not None and args.workers < 1:
        raise _UsageError(f"--workers ({args.workers}) must be >= 1")
    try:
        from .catalog import _check_out, build_catalog, resolve_sources
    except ImportError as error:
        _error("index", str(error))
        return EXIT_FAILED
    with _refused_arguments():
        try:  # bad paths, list files and --out are usage errors, found before any work
            sources = resolve_sources(args.paths)
            _check_out(os.path.abspath(args.out))
        except FileNotFoundError as error:
            raise ValueError(str(error)) from None
    try:
        built = build_catalog(sources, args.out, workers=args.workers, stream_index=args.stream,
                              incremental=not args.rebuild, ray=args.ray or False)
    except ImportError as error:  # --ray without Ray installed
        _error("index", str(error))
        return EXIT_FAILED
    for path, problem in built.unusable:
        print(f"vclip index: unusable {path}: {problem}", file=sys.stderr)
    if args.json:
        print(json.dumps({
            "catalog": built.path, "videos": built.videos, "indexed": len(built.indexed), "kept": built.kept,
            "unusable": [{"file": path, "problem": problem} for path, problem in built.unusable],
            "seconds": built.seconds, "videos_per_second": built.videos_per_second, "engine": built.engine,
            "workers": built.workers,
        }, indent=2))
    else:
        nbytes = os.path.getsize(built.path)
        size = f"{nbytes / 2**20:.1f} MiB" if nbytes >= 2**20 else f"{nbytes / 2**10:.1f} KiB"
        videos = f"{built.videos} video{'s' if built.videos != 1 else ''}"
        print(f"{videos} ({len(built.indexed)} indexed, {built.kept} unchanged), {len(built.unusable)} unusable "
              f"-> {built.path} ({size}) in {built.seconds:.1f} s "
              f"({built.videos_per_second:.1f} videos/s, {built.engine})")
    return _exit_status(built.videos, len(built.unusable))


def _add_index_command(commands) -> None:
    index = commands.add_parser(
        "index", help="index every video of a dataset into one catalog (Parquet) that loaders start from",
        description="Index videos in parallel (every core, or a Ray cluster with --ray) and write one Parquet "
                    "table: per video its stream facts, label, content fingerprint and the per-frame arrays "
                    "loaders need, so they start without opening any video. PATHS are video files, folders "
                    "(one subfolder per class, or videos without classes) and list files ('path label' per "
                    "line). Unusable videos are reported and listed in the catalog with the error. Run again "
                    "into the same --out to index only new or changed files; files no longer in PATHS are "
                    "dropped. Exit status 3 when some videos are unusable.")
    index.add_argument("paths", nargs="+", metavar="PATH")
    index.add_argument("--out", required=True, metavar="CATALOG.parquet", help="the catalog to write or update")
    index.add_argument("--workers", type=int, metavar="N", help="indexing processes (default: every core)")
    index.add_argument("--rebuild", action="store_true", help="index every video again, even if unchanged")
    index.add_argument("--ray", nargs="?", const=True, metavar="ADDRESS",
                       help="index on a Ray cluster (ADDRESS, or RAY_ADDRESS / `ray start` / a local one)")
    index.add_argument("--json", action="store_true", help="print the summary as JSON")
    _add_stream(index)
    index.set_defaults(handler=_run_index)


# -- the parser --------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The ``vclip`` argument parser, one sub-command per job."""
    parser = argparse.ArgumentParser(prog="vclip",
                                     description="Sample video clips for deep learning, exactly and fast.")
    parser.add_argument("--version", action="version", version=f"vclip {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    info = commands.add_parser("info", help="streams, frames, keyframes, colour and timing of videos",
                               description="Describe videos: streams, codec, size, frame rate, frame and keyframe "
                                           "counts and positions, colour matrix and range, bit depth, duration.")
    info.add_argument("files", nargs="+", metavar="FILE")
    info.add_argument("--json", action="store_true", help="print a JSON list, one object per file")
    _add_stream(info)
    _add_progress(info)
    info.set_defaults(handler=_run_info)

    sample = commands.add_parser(
        "sample", help="sample clips in any mode and write them as .npz, .pt, .mp4 or PNGs",
        description="Sample clips from videos (files, folders of videos, list files with one path per line). "
                    "--scaling-factor combines with any mode; --mode downscaled is contiguous clips (strided with "
                    "--stride) at --scaling-factor (default 0.5). --out decides the output: FILE.npz or FILE.pt "
                    "(needs torch): one file, for several videos all their clips with video_ids (the position of "
                    "each clip's video in paths); FILE.mp4: one video's clips one after another, for a quick look; "
                    "a folder (a path ending in a separator, without a suffix, or an existing folder): PNGs in it "
                    "for one video, one OUT/<name>/ per video for several, or OUT/<name>.npz|.pt|.mp4 per video "
                    "with --format. Any other suffix is refused. A named file is replaced; outputs already in a "
                    "folder are refused unless --overwrite, which replaces only this command's own files. Clips "
                    "padded by the end policy are named in the output (and flagged in 'padded'); bad videos, and "
                    "videos where --end-policy drop drops every clip, are reported and skipped (exit status 3).")
    sample.add_argument("files", nargs="+", metavar="PATH", help="video files, folders of videos, or list files")
    sample.add_argument("--mode", required=True, choices=SAMPLE_MODES, metavar="MODE",
                        help=f"one of {', '.join(SAMPLE_MODES)}")
    sample.add_argument("--out", required=True, metavar="PATH", help="output .npz, .pt, .mp4, or a folder")
    sample.add_argument("--format", choices=("png", "npz", "pt", "mp4"),
                        help="with a folder --out: what to write per video (default png)")
    sample.add_argument("--overwrite", action="store_true",
                        help="replace this command's outputs already in the --out folder (default: refuse)")
    sample.add_argument("--sequence-length", type=int, metavar="L", help="frames per clip (default 16)")
    sample.add_argument("--stride", type=int, metavar="K",
                        help="frames between clip frames (default 2 strided/jittered, 1 downscaled)")
    sample.add_argument("--jitter", type=int, metavar="J",
                        help="jittered: random offset in [-J, J] per frame (default 1)")
    sample.add_argument("--frame-indices", type=_int_list, metavar="I,J,...",
                        help="indexed: comma-separated frames, e.g. 0,10,-1")
    sample.add_argument("--max-frames", type=int, metavar="N", help="keyframe: at most N keyframes")
    sample.add_argument("--keyframe-selection", choices=("first", "even"),
                        help="keyframe: with --max-frames, the first ones or evenly chosen ones (default even)")
    sample.add_argument("--starts", choices=("random", "even", "step"),
                        help="where clips start (default random, or step when --step is given)")
    sample.add_argument("--clips-per-video", type=int, metavar="N", help="clips for random and even starts (default 1)")
    sample.add_argument("--step", type=int, metavar="N", help="frames between clip starts (step starts)")
    sample.add_argument("--end-policy", choices=("repeat_last", "wrap", "drop", "error"),
                        help="a clip longer than the video or segment (default repeat_last)")
    sample.add_argument("--fps", type=float, metavar="F",
                        help="in seconds: the frames shown every STRIDE/F seconds (e.g. 16 frames at 15 fps "
                             "whatever the source rate)")
    sample.add_argument("--duration", type=float, metavar="SECONDS",
                        help="in seconds: a clip covers this long (with --fps: round(SECONDS*F/STRIDE) frames; "
                             "with --sequence-length: those frames spread over it; alone: at the video's own rate)")
    sample.add_argument("--step-seconds", type=float, metavar="S", help="seconds between clip starts (step starts)")
    sample.add_argument("--start-seconds", type=float, metavar="S",
                        help="draw clips only from the frames from S seconds on (a segment)")
    sample.add_argument("--end-seconds", type=float, metavar="S",
                        help="draw clips only from the frames before S seconds (a segment)")
    sample.add_argument("--seed", type=int, help="seed for random starts and jitter (default: fresh each run)")
    sample.add_argument("--scaling-factor", type=float, metavar="F",
                        help="frames at round(W*F) x round(H*F), 0 < F <= 1")
    sample.add_argument("--resize", type=_frame_size, metavar="SIZE",
                        help="shorter side in pixels (e.g. 224) or WIDTHxHEIGHT")
    sample.add_argument("--crop", type=_frame_size, metavar="SIZE",
                        help="center crop after the resize: N or WIDTHxHEIGHT")
    _add_stream(sample)
    _add_device(sample)
    _add_progress(sample)
    sample.set_defaults(handler=_run_sample)

    keyframes = commands.add_parser(
        "keyframes", help="keyframes as images, a manifest and a contact sheet per video",
        description="Extract keyframes: the codec's keyframes (only their packets are decoded) or the first frame "
                    "of every shot (scene cuts found on frames downscaled to 64 pixels). Writes DIR/<video>/"
                    "frame_NNNNNN.jpg, DIR/<video>/contact_sheet.jpg and DIR/manifest.json (always written, "
                    "also when some files fail). <video> is the file's name made safe, unique inside DIR (a "
                    "name shared by files of different folders gets a hash of the full path). Bad files are "
                    "reported and skipped. A DIR holding an earlier run's manifest is refused unless "
                    "--overwrite, which first removes the files that manifest lists (nothing else).")
    keyframes.add_argument("files", nargs="+", metavar="PATH", help="video files, folders of videos, or list files")
    keyframes.add_argument("--out", required=True, metavar="DIR")
    keyframes.add_argument("--method", choices=KEYFRAME_METHODS, default="codec",
                           help="codec: the stream's keyframes; scene: shot boundaries (default codec)")
    keyframes.add_argument("--max", type=int, metavar="N", help="at most N per video, evenly spread")
    keyframes.add_argument("--format", choices=("jpg", "png"), default="jpg", help="image format (default jpg)")
    keyframes.add_argument("--scaling-factor", type=float, default=1.0, metavar="F",
                           help="image size factor, 0 < F <= 1 (default 1)")
    keyframes.add_argument("--scene-threshold", type=float, default=2.0, metavar="X",
                           help="scene: a cut changes this many times more than the frames around it (default 2)")
    keyframes.add_argument("--thumbnail-width", type=int, default=THUMBNAIL_WIDTH, metavar="PX",
                           help=f"width of the contact sheet's thumbnails (default {THUMBNAIL_WIDTH}; narrower "
                                f"frames keep their size)")
    _add_stream(keyframes)
    keyframes.add_argument("--overwrite", action="store_true",
                           help="replace an earlier run's outputs in DIR (default: refuse)")
    _add_device(keyframes)
    _add_progress(keyframes)
    keyframes.set_defaults(handler=_run_keyframes)
    _add_index_command(commands)

    check = commands.add_parser(
        "check", help="decode every frame of every video and report the bad ones",
        description="Decode every frame of videos (files, folders of videos, list files with one path per "
                    "line) and report per file: ok, which frames are bad (decode errors, damaged frames the "
                    "decoder concealed, frames that never came out), or unreadable and why. On the CPU one "
                    "process per core; on the GPU (--device auto with a usable GPU, or cuda) through NVDEC, "
                    "which finds decode errors and missing frames but conceals damaged pictures silently: use "
                    "--device cpu for the most thorough check. Exit status 0: all ok; 1: none readable; "
                    "3: some bad.")
    check.add_argument("files", nargs="+", metavar="PATH", help="video files, folders of videos, or list files")
    check.add_argument("--json", action="store_true", help="print a JSON list, one object per video")
    check.add_argument("--workers", type=int, metavar="N",
                       help="videos checked at once (default: the CPU cores; 4 on the GPU)")
    _add_stream(check)
    _add_device(check)
    _add_progress(check)
    check.set_defaults(handler=_run_check)

    budget = commands.add_parser(
        "budget", help="GPU memory of a batch by the formula and of a ClipLoader, and what fits a budget",
        description="bytes = W x H x C x bytes_per_element x batch x T x (1 + augmentation), what each choice "
                    "saves, and the largest batch size and sequence length that fit --budget; then what a "
                    "ClipLoader with --prefetch, --threads and --processes needs (its output buffers, decode "
                    "surfaces, workspace and CUDA contexts) and the largest batch it fits. Without --batch "
                    "(--budget needed) the figures are per clip and the question is the largest batch.")
    budget.add_argument("--width", type=int, required=True, metavar="W", help="frame width in pixels")
    budget.add_argument("--height", type=int, required=True, metavar="H", help="frame height in pixels")
    budget.add_argument("--batch", type=int, metavar="B", help="clips per batch (optional with --budget)")
    budget.add_argument("--seq", type=int, required=True, metavar="T", help="frames per clip")
    budget.add_argument("--channels", type=int, default=3, metavar="C", help="channels per pixel (default 3)")
    budget.add_argument("--dtype", choices=("uint8", "float16", "float32"), default="uint8",
                        help="element type (default uint8)")
    budget.add_argument("--aug", type=float, default=0.0, metavar="A", help="augmentation factor (default 0)")
    budget.add_argument("--scaling-factor", type=float, default=1.0, metavar="F",
                        help="frames downscaled by F, 0 < F <= 1 (default 1)")
    budget.add_argument("--budget", metavar="SIZE", help="memory available, e.g. 8GiB, 80GB, 512MiB")
    budget.add_argument("--chart", metavar="PATH",
                        help="draw memory against batch size into PATH (.png, .jpg, .svg or .pdf; needs "
                             "matplotlib: pip install 'vclip-nvdec[chart]')")
    budget.add_argument("--prefetch", type=int, default=2, metavar="N",
                        help="the loader's prefetch_queue_depth (default 2: 4 output buffers)")
    budget.add_argument("--threads", type=int, default=0, metavar="N",
                        help="the loader's num_threads (default 0: 12 NVDEC decoders, 4 per process)")
    budget.add_argument("--processes", type=int, default=0, metavar="N",
                        help="the loader's decode_processes, each with its CUDA context (default 0)")
    budget.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="where the loader decodes (default cuda; cpu counts host buffers only)")
    budget.add_argument("--json", action="store_true", help="print the numbers as JSON")
    budget.set_defaults(handler=_run_budget)

    demo = commands.add_parser(
        "demo", help="the main job on a small built-in video, checked frame by frame",
        description="Make a small synthetic video, sample clips in every mode and check each frame's barcode, "
                    "extract keyframes (codec and scene), print the memory estimate, and write a contact sheet "
                    "of the clips, keyframe images and a manifest.")
    demo.add_argument("--out", default="vclip-demo", metavar="DIR", help="output folder (default vclip-demo)")
    _add_device(demo)
    demo.set_defaults(handler=_run_demo)
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
    with warnings.catch_warnings(), _native_output_to_stderr():
        warnings.showwarning = _show_warning
        try:
            return args.handler(args)
        except _UsageError as error:
            _error(args.command, str(error))
            return EXIT_USAGE
