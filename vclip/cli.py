"""The ``vclip`` command line: ``info``, ``sample``, ``keyframes``, ``budget`` and ``demo``.

Exit status: 0 when everything asked for was done; 1 when nothing could be done (the only file,
or every file, could not be read); 2 for bad arguments (argparse's usage errors, and values the
library refuses, such as ``--stride 0``); 3 when some files were reported and skipped while the
others were done. Bad files are reported on stderr, naming the file and the problem, and never
stop a run over several files.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Sequence

import numpy as np

from . import __version__
from ._demo import format_numbers, run_demo
from ._images import bar_chart, to_numpy, write_image, write_video
from .decoder import Frames, VideoDecoder
from .errors import VideoError
from .index import VideoIndex, index_video, open_container
from .keyframes import KEYFRAME_METHODS, extract_keyframes
from .memory import (
    BYTES_PER_ELEMENT,
    MemoryEstimate,
    estimate_memory,
    format_bytes,
    largest_batch_size,
    largest_sequence_length,
    parse_bytes,
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
SAMPLE_FORMATS = {".npz": "npz", ".pt": "pt", ".mp4": "mp4"}  # any other --out is a folder of PNGs
_TEMPORAL_OPTIONS = {"sequence_length", "starts", "clips_per_video", "step", "end_policy"}
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


# -- output helpers ----------------------------------------------------------------------------
def _error(command: str, message: str) -> None:
    print(f"vclip {command}: error: {message}", file=sys.stderr)


def _skipped(command: str, error: VideoError) -> None:
    print(f"vclip {command}: skipped {error}", file=sys.stderr)


def _exit_status(files: int, failures: int) -> int:
    if failures == 0:
        return EXIT_OK
    return EXIT_FAILED if failures == files else EXIT_PARTIAL


class _Progress:
    """A one-line progress bar over files on stderr, drawn only when stderr is a terminal."""

    _WIDTH = 24

    def __init__(self, total: int):
        self.total = total
        self.stream = sys.stderr
        self.enabled = self.stream.isatty()

    def show(self, done: int, label: str) -> None:
        if self.enabled:
            filled = round(self._WIDTH * done / max(self.total, 1))
            bar = "#" * filled + "." * (self._WIDTH - filled)
            self.stream.write(f"\r[{bar}] {done}/{self.total} {label[-48:]}\x1b[K")
            self.stream.flush()

    def clear(self) -> None:
        if self.enabled:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


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
        ("time base", video["time_base"]),
    ]
    lines = [report["file"]]
    lines += [_stream_line(stream, video["stream_index"]) for stream in report["streams"]]
    lines += [f"  {name:<12} {value}" for name, value in rows]
    return "\n".join(lines)


def _run_info(args: argparse.Namespace) -> int:
    reports, failures = [], 0
    for path in args.files:
        try:
            reports.append(_describe(path, args.stream))
        except VideoError as error:
            failures += 1
            reports.append({"file": path, "error": error.problem})
            _skipped("info", error)
    if args.json:
        print(json.dumps(reports, indent=2))
    elif failures < len(args.files):
        print("\n\n".join(_info_table(report) for report in reports if "error" not in report))
    return _exit_status(len(args.files), failures)


# -- vclip sample ------------------------------------------------------------------------------
def _output_format(out: str) -> str:
    suffix = Path(out).suffix.lower()
    if suffix in SAMPLE_FORMATS:
        return SAMPLE_FORMATS[suffix]
    if suffix and not out.endswith(os.sep) and not Path(out).is_dir():
        raise _UsageError(f"--out ({out!r}) must end in {', '.join(SAMPLE_FORMATS)}, or name a folder for PNG files")
    return "png"


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
        options = dict(
            starts=args.starts or ("step" if args.step is not None else "random"),
            clips_per_video=1 if args.clips_per_video is None else args.clips_per_video,
            step=args.step,
            end_policy=args.end_policy or "repeat_last",
        )
        length = 16 if args.sequence_length is None else args.sequence_length
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


def _write_clips(output_format: str, out: Path, clips: Frames, data: np.ndarray, index: VideoIndex, mode: str) -> None:
    if output_format == "npz":
        np.savez(out, clips=data, frame_indices=clips.frame_indices, pts_seconds=clips.pts_seconds,
                 source=np.str_(index.path), mode=np.str_(mode))
    elif output_format == "pt":
        import torch

        torch.save({"clips": torch.from_numpy(data), "frame_indices": torch.from_numpy(clips.frame_indices),
                    "pts_seconds": torch.from_numpy(clips.pts_seconds), "source": index.path, "mode": mode}, out)
    elif output_format == "mp4":
        write_video(out, (frame for clip in data for frame in clip), fps=index.average_fps)
    else:
        out.mkdir(parents=True, exist_ok=True)
        for number, (clip, frame_indices) in enumerate(zip(data, clips.frame_indices.tolist())):
            for position, (frame, frame_index) in enumerate(zip(clip, frame_indices)):
                write_image(out / f"clip{number:03d}_{position:03d}_frame{frame_index:06d}.png", frame)


def _run_sample(args: argparse.Namespace) -> int:
    output_format = _output_format(args.out)
    if output_format == "pt":
        try:
            import torch  # noqa: F401
        except ImportError:
            raise _UsageError("writing .pt needs PyTorch, which is not installed (pip install 'vclip[torch]'); "
                              "write .npz instead") from None
    _check_mode_options(args)
    with _refused_arguments():
        sampler = _sampler(args)
        spatial = args.resize is not None or args.crop is not None
        transform = TransformSpec(resize=args.resize, crop=args.crop) if spatial else None
    try:
        decoder = VideoDecoder(args.file, stream_index=args.stream, device=args.device)
        with _refused_arguments():
            clips = decoder.get_clips(sampler, transform=transform, seed=args.seed)
    except VideoError as error:
        _error("sample", str(error))
        return EXIT_FAILED
    data = to_numpy(clips.data)
    out = Path(args.out)
    _write_clips(output_format, out, clips, data, decoder.index, args.mode)
    print(f"{args.file}: {len(data)} {args.mode} clip{'s' if len(data) != 1 else ''} "
          f"{list(data.shape)} {data.dtype} on {clips.device} -> {out}{os.sep if output_format == 'png' else ''}")
    for number, frame_indices in enumerate(clips.frame_indices.tolist()):
        print(f"  clip {number}: frames {format_numbers(frame_indices, limit=16)}")
    return EXIT_OK


# -- vclip keyframes ---------------------------------------------------------------------------
def _unique_folder_name(path: str, taken: set[str]) -> str:
    stem = Path(path).stem or "video"
    name, number = stem, 1
    while name in taken:
        number += 1
        name = f"{stem}_{number}"
    taken.add(name)
    return name


def _run_keyframes(args: argparse.Namespace) -> int:
    out = Path(args.out)
    records, videos, errors, taken = [], [], [], set()
    progress = _Progress(len(args.files))
    for number, path in enumerate(args.files):
        progress.show(number, path)
        started = time.perf_counter()
        try:
            with _refused_arguments():
                result = extract_keyframes(path, method=args.method, max_frames=args.max, device=args.device,
                                           scaling_factor=args.scaling_factor, scene_threshold=args.scene_threshold)
        except VideoError as error:
            progress.clear()
            _skipped("keyframes", error)
            errors.append({"file": path, "problem": error.problem})
            continue
        folder = out / _unique_folder_name(path, taken)
        saved = result.save(folder, image_format=args.format)
        for record in saved:
            record["image"] = os.path.relpath(record["image"], out)
        records.extend(saved)
        videos.append({
            "file": result.path, "method": result.method, "keyframes": len(result),
            "folder": os.path.relpath(folder, out),
            "contact_sheet": os.path.relpath(folder / f"contact_sheet.{args.format}", out) if saved else None,
            "packets_decoded": result.packets_decoded, "device": result.device,
            "seconds": round(time.perf_counter() - started, 4),
        })
        progress.clear()
        noun = "keyframe" if len(result) == 1 else "keyframes"
        print(f"{path}: {len(result)} {args.method} {noun} (frames {format_numbers(result.frame_indices.tolist())}) "
              f"-> {folder}{os.sep}")
    progress.show(len(args.files), "done")
    progress.clear()
    manifest = {"method": args.method, "keyframes": records, "videos": videos, "errors": errors}
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    print(f"{len(videos)} of {len(args.files)} videos, {len(records)} images; manifest: {out / 'manifest.json'}")
    return _exit_status(len(args.files), len(errors))


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


def _budget_chart(args: argparse.Namespace, width: int, height: int, budget: int | None,
                  largest: int | None) -> np.ndarray:
    options = dict(width=width, height=height, channels=args.channels, dtype=args.dtype, augmentation_factor=args.aug)
    top = max(args.batch, largest or 0, 2) * 5 // 4 + 1
    batches = sorted(set(np.linspace(1, top, min(top, 32)).round().astype(int).tolist()) | {args.batch, largest or 1})
    values = [estimate_memory(batch_size=b, sequence_length=args.seq, **options).bytes for b in batches]
    title = f"memory vs batch size: {width}x{height}x{args.channels} {args.dtype}, T={args.seq}"
    return bar_chart(values, [str(b) for b in batches], title=title, value_unit=2**30, value_unit_name=" GiB",
                     limit=budget, highlight=batches.index(args.batch))


def _run_budget(args: argparse.Namespace) -> int:
    with _refused_arguments():
        base = dict(channels=args.channels, dtype=args.dtype, augmentation_factor=args.aug)
        estimate_memory(width=args.width, height=args.height, batch_size=args.batch, sequence_length=args.seq, **base)
        check_scaling_factor(args.scaling_factor)
        budget = parse_bytes(args.budget) if args.budget is not None else None
    if args.chart is not None and Path(args.chart).suffix.lower() not in (".png", ".jpg", ".jpeg"):
        raise _UsageError(f"--chart ({args.chart!r}) must end in .png or .jpg")
    width, height = scaled_size(args.width, args.height, args.scaling_factor)
    current = estimate_memory(width=width, height=height, batch_size=args.batch, sequence_length=args.seq, **base)
    variants = _variants(args, width, height)
    largest_batch = largest_sequence = None
    if budget is not None:
        largest_batch = largest_batch_size(budget, width=width, height=height, sequence_length=args.seq, **base)
        largest_sequence = largest_sequence_length(budget, width=width, height=height, batch_size=args.batch, **base)
    chart = write_image(args.chart, _budget_chart(args, width, height, budget, largest_batch)) if args.chart else None
    if args.json:
        print(json.dumps({
            "width": width, "height": height, "channels": args.channels, "dtype": args.dtype,
            "bytes_per_element": BYTES_PER_ELEMENT[args.dtype], "batch_size": args.batch, "sequence_length": args.seq,
            "augmentation_factor": args.aug, "scaling_factor": args.scaling_factor,
            "bytes": current.bytes, "gb": current.gb, "gib": current.gib,
            "variants": [{"choice": label, "bytes": estimate.bytes, "ratio": estimate.bytes / current.bytes}
                         for label, estimate in variants],
            "budget_bytes": budget, "fits": None if budget is None else current.bytes <= budget,
            "largest_batch_size": largest_batch, "largest_sequence_length": largest_sequence, "chart": chart,
        }, indent=2))
        return EXIT_OK
    scaled = f" (scaling factor {args.scaling_factor:g} of {args.width}x{args.height})"
    scaled = "" if args.scaling_factor == 1 else scaled
    print(f"one batch: {width}x{height}{scaled}, {args.channels} channels, {args.dtype}, batch {args.batch}, "
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
        print(f"\nbudget {format_bytes(budget)}: this batch {verdict}")
        print(f"  {f'largest batch size at {args.seq} frames':<42}{largest_batch:>16,}")
        print(f"  {f'largest sequence length at batch {args.batch}':<42}{largest_sequence:>16,}")
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
        size = os.path.getsize(built.path)
        size = f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size / 2**10:.1f} KiB"
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
    info.set_defaults(handler=_run_info)

    sample = commands.add_parser(
        "sample", help="sample clips in any mode and write them as .npz, .pt, .mp4 or PNGs",
        description="Sample clips from one video. --scaling-factor combines with any mode; --mode downscaled is "
                    "contiguous clips (strided with --stride) at --scaling-factor (default 0.5). The format "
                    "follows --out: .npz, .pt (needs torch), .mp4 (a quick look, clips one after another), "
                    "anything else is a folder of PNGs.")
    sample.add_argument("file", metavar="FILE")
    sample.add_argument("--mode", required=True, choices=SAMPLE_MODES, metavar="MODE",
                        help=f"one of {', '.join(SAMPLE_MODES)}")
    sample.add_argument("--out", required=True, metavar="PATH", help="output .npz, .pt, .mp4, or a folder for PNGs")
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
                        help="a clip longer than the video (default repeat_last)")
    sample.add_argument("--seed", type=int, help="seed for random starts and jitter (default: fresh each run)")
    sample.add_argument("--scaling-factor", type=float, metavar="F",
                        help="frames at round(W*F) x round(H*F), 0 < F <= 1")
    sample.add_argument("--resize", type=_frame_size, metavar="SIZE",
                        help="shorter side in pixels (e.g. 224) or WIDTHxHEIGHT")
    sample.add_argument("--crop", type=_frame_size, metavar="SIZE",
                        help="center crop after the resize: N or WIDTHxHEIGHT")
    _add_stream(sample)
    _add_device(sample)
    sample.set_defaults(handler=_run_sample)

    keyframes = commands.add_parser(
        "keyframes", help="keyframes as images, a manifest and a contact sheet per video",
        description="Extract keyframes: the codec's keyframes (only their packets are decoded) or the first frame "
                    "of every shot (scene cuts found on frames downscaled to 64 pixels). Writes DIR/<video>/"
                    "frame_NNNNNN.jpg, DIR/<video>/contact_sheet.jpg and DIR/manifest.json. Bad files are "
                    "reported and skipped.")
    keyframes.add_argument("files", nargs="+", metavar="FILE")
    keyframes.add_argument("--out", required=True, metavar="DIR")
    keyframes.add_argument("--method", choices=KEYFRAME_METHODS, default="codec",
                           help="codec: the stream's keyframes; scene: shot boundaries (default codec)")
    keyframes.add_argument("--max", type=int, metavar="N", help="at most N per video, evenly spread")
    keyframes.add_argument("--format", choices=("jpg", "png"), default="jpg", help="image format (default jpg)")
    keyframes.add_argument("--scaling-factor", type=float, default=1.0, metavar="F",
                           help="image size factor, 0 < F <= 1 (default 1)")
    keyframes.add_argument("--scene-threshold", type=float, default=2.0, metavar="X",
                           help="scene: a cut changes this many times more than the frames around it (default 2)")
    _add_device(keyframes)
    keyframes.set_defaults(handler=_run_keyframes)
    _add_index_command(commands)

    budget = commands.add_parser(
        "budget", help="GPU memory of a batch by the formula, and what fits a budget",
        description="bytes = W x H x C x bytes_per_element x batch x T x (1 + augmentation), what each choice "
                    "saves, and the largest batch size and sequence length that fit --budget.")
    budget.add_argument("--width", type=int, required=True, metavar="W", help="frame width in pixels")
    budget.add_argument("--height", type=int, required=True, metavar="H", help="frame height in pixels")
    budget.add_argument("--batch", type=int, required=True, metavar="B", help="clips per batch")
    budget.add_argument("--seq", type=int, required=True, metavar="T", help="frames per clip")
    budget.add_argument("--channels", type=int, default=3, metavar="C", help="channels per pixel (default 3)")
    budget.add_argument("--dtype", choices=("uint8", "float16", "float32"), default="uint8",
                        help="element type (default uint8)")
    budget.add_argument("--aug", type=float, default=0.0, metavar="A", help="augmentation factor (default 0)")
    budget.add_argument("--scaling-factor", type=float, default=1.0, metavar="F",
                        help="frames downscaled by F, 0 < F <= 1 (default 1)")
    budget.add_argument("--budget", metavar="SIZE", help="memory available, e.g. 8GiB, 80GB, 512MiB")
    budget.add_argument("--chart", metavar="PATH", help="write a PNG chart of memory against batch size here")
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``vclip`` command line with ``argv`` (default: ``sys.argv[1:]``); returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_request:  # --help and --version (status 0), or a usage error (status 2)
        return EXIT_OK if exit_request.code is None else int(exit_request.code)
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            return args.handler(args)
        except _UsageError as error:
            _error(args.command, str(error))
            return EXIT_USAGE
