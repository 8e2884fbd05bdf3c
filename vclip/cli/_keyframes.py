"""``vclip keyframes``: keyframes as images, a manifest and a contact sheet per video."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from tqdm import tqdm

from .._device import resolve_device
from .._outputs.files import check_output_folder, inside, unique_names, written_whole
from ..errors import OutputError, VideoError, check_integer, check_number, check_optional_integer, os_reason
from ..keyframes import (
    KEYFRAME_METHODS,
    THUMBNAIL_WIDTH,
    extract_keyframes_many,
)
from ..sampling import (
    check_scaling_factor,
)
from ._common import (
    EXIT_FAILED,
    MANIFEST,
    UsageError,
    add_device_option,
    add_progress_option,
    add_ray_options,
    add_renamed_option,
    add_stream_option,
    exit_status,
    expand_inputs,
    following,
    format_numbers,
    progress_bar,
    ray_options,
    refused_arguments,
    report_error,
    report_internal_error,
    report_skipped,
    say,
)


def _prepare_keyframes_out(out: Path, overwrite: bool) -> set[str]:
    """Check ``--out`` and deal with an earlier run in it; returns the names per-video folders must avoid.

    A folder holding a manifest is refused, or with ``overwrite`` the files and folders that
    manifest lists (inside ``--out``) are removed first; nothing else in the folder is touched.
    """
    try:
        check_output_folder(out)
    except OutputError as error:
        raise UsageError(str(error)) from None
    manifest = out / MANIFEST
    if manifest.exists() or manifest.is_symlink():
        if not overwrite:
            raise UsageError(f"--out ({os.fspath(out)!r}) holds an earlier run ({MANIFEST}); pass --overwrite to "
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
        raise UsageError(f"--out ({os.fspath(out)!r}): its {MANIFEST} cannot be read ({error}), so the earlier "
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
    with refused_arguments():  # refused before --out is touched or anything decoded
        check_scaling_factor(args.scaling_factor)
        check_optional_integer("max_frames", args.max_frames, minimum=1, none_means="for all")
        check_number("scene_threshold", args.scene_threshold, minimum=1, minimum_inclusive=False)
    files = expand_inputs(args.files)
    out = Path(args.out)
    ray = ray_options(args)
    with refused_arguments():
        check_integer("thumbnail_width", args.thumbnail_width, minimum=16)
        check_optional_integer("workers", args.workers, minimum=1, none_means="(8 on the GPU, one per core on the CPU)")
        if args.decode_processes and not ray["ray"] and not resolve_device(args.device, warn=False).device.is_cuda:
            raise ValueError("--decode-processes is for the GPU; on the CPU --workers already runs processes")
        one_by_one = not ray["ray"] and (len(files) == 1 or args.workers == 1)
        frame_bar = _FrameBar(args) if one_by_one else None
        results = extract_keyframes_many(
            files, method=args.method, max_frames=args.max_frames, device=args.device, stream_index=args.stream_index,
            scaling_factor=args.scaling_factor, scene_threshold=args.scene_threshold,
            decode_processes=args.decode_processes, workers=args.workers, on_progress=frame_bar, **ray)
    taken = _prepare_keyframes_out(out, args.overwrite)
    folders = unique_names(files, taken=taken)
    records, videos, errors = [], [], []
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    try:
        in_order = progress_bar(args, iterable=results, total=len(files), unit="video")
        for result, path, folder_name in zip(in_order, files, folders):  # the bar first: zip draws its end
            if frame_bar is not None:
                frame_bar.close()
            if isinstance(result, VideoError):
                report_skipped("keyframes", result)
                errors.append({"file": path, "problem": result.problem})
                started = time.perf_counter()
                continue
            folder = out / folder_name
            try:
                saved = result.save(folder, image_format=args.format, thumbnail_width=args.thumbnail_width)
            except OSError as error:  # a full disk: none of its images is left; reported, the others go on
                problem = f"writing its images into {os.fsdecode(folder)} failed ({os_reason(error)}); none was kept"
                report_error("keyframes", f"{path}: {problem}")
                errors.append({"file": path, "problem": problem})
                started = time.perf_counter()
                continue
            except Exception as error:  # a bug: reported, the others go on
                errors.append({"file": path, "problem": report_internal_error("keyframes", path, error)})
                started = time.perf_counter()
                continue
            for record in saved:
                record["image"] = os.path.relpath(record["image"], out)
            records.extend(saved)
            videos.append({
                "file": result.path, "method": result.method, "keyframes": len(result), "folder": folder_name,
                "contact_sheet": os.path.relpath(folder / f"contact_sheet.{args.format}", out) if saved else None,
                "packets_decoded": result.packets_decoded, "device": result.device,
                "seconds": round(time.perf_counter() - started, 4),  # since the previous video was done
            })
            started = time.perf_counter()
            noun = "keyframe" if len(result) == 1 else "keyframes"
            say(f"{path}: {len(result)} {args.method} {noun} (frames {format_numbers(result.frame_indices.tolist())}) "
                 f"-> {folder}{os.sep}")
    finally:  # the manifest of what was written, also when the run stops early (the run stopped first)
        results.close()
        if frame_bar is not None:
            frame_bar.close()
        manifest_written = _write_manifest(out / MANIFEST, {"method": args.method, "keyframes": records,
                                                             "videos": videos, "errors": errors})
    if not manifest_written:
        return EXIT_FAILED
    images = f"{len(records)} image{'s' if len(records) != 1 else ''}"
    say(f"{len(videos)} of {len(files)} videos, {images}; manifest: {out / MANIFEST}")
    return exit_status(len(files), len(errors))


def _write_manifest(path: Path, manifest: dict) -> bool:
    """Write the manifest whole; False after reporting a write that failed (a full disk)."""
    try:
        with written_whole(path) as temporary:
            Path(temporary).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    except OSError as error:
        report_error("keyframes", f"writing {path} failed ({error.strerror or error}); the images of the "
                                  f"{len(manifest['videos'])} videos done are in place, their list is not")
        return False
    return True


class _FrameBar:
    """``on_progress(path, done, total)`` for videos read one by one: a bar per video, over its
    frames, from its first call until :meth:`close`."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.bar: tqdm | None = None

    def __call__(self, path: str, done: int, total: int) -> None:
        if self.bar is None:
            self.bar = progress_bar(self.args, desc=Path(path).name, unit="frame", leave=False)
        following(self.bar)(done, total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def add_parser(commands) -> None:
    """The ``vclip keyframes`` sub-command."""
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
    add_renamed_option(keyframes, "--max-frames", "--max", type=int, metavar="N",
                       help="at most N per video, evenly spread")
    keyframes.add_argument("--format", choices=("jpg", "png"), default="jpg", help="image format (default jpg)")
    keyframes.add_argument("--scaling-factor", type=float, default=1.0, metavar="F",
                           help="image size factor, 0 < F <= 1 (default 1)")
    keyframes.add_argument("--scene-threshold", type=float, default=2.0, metavar="X",
                           help="scene: a cut changes this many times more than the frames around it (default 2)")
    keyframes.add_argument("--thumbnail-width", type=int, default=THUMBNAIL_WIDTH, metavar="PX",
                           help=f"width of the contact sheet's thumbnails (default {THUMBNAIL_WIDTH}; narrower "
                                f"frames keep their size)")
    keyframes.add_argument("--workers", type=int, metavar="N",
                           help="videos at once, each on its own decoder: threads on the GPU (default 8), "
                                "processes on the CPU (default one per core), Ray tasks with --ray (default: what "
                                "the cluster runs at once)")
    keyframes.add_argument("--decode-processes", type=int, default=0, metavar="N",
                           help="GPU: decode in N worker processes shared by the run's videos, so that Python work "
                                "does not hold back NVDEC (1.5-2.5 s to start; default 0: threads of this process, "
                                "faster over a folder of short videos)")
    add_stream_option(keyframes)
    keyframes.add_argument("--overwrite", action="store_true",
                           help="replace an earlier run's outputs in DIR (default: refuse)")
    add_device_option(keyframes)
    add_progress_option(keyframes)
    add_ray_options(keyframes, "extract keyframes, one task per video,")
    keyframes.set_defaults(handler=_run_keyframes)
