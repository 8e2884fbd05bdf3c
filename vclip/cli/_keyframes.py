"""``vclip keyframes``: keyframes as images, a manifest and a contact sheet per video."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import time
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from functools import partial
from pathlib import Path

from .._ahead import submitted_ahead
from .._engine.device import resolve_device
from .._machine import usable_cores
from .._outputs import check_output_folder, inside, unique_names
from .._validation import check_integer, check_number, check_optional_integer
from ..errors import OutputError, VideoError
from ..keyframes import (
    KEYFRAME_METHODS,
    THUMBNAIL_WIDTH,
    Keyframes,
    extract_keyframes,
)
from ..sampling import (
    check_scaling_factor,
)
from ._common import (
    MANIFEST,
    _add_device,
    _add_progress,
    _add_ray,
    _add_stream,
    _exit_status,
    _expand_inputs,
    _following,
    _internal_error,
    _progress_bar,
    _ray_jobs,
    _refused_arguments,
    _say,
    _skipped,
    _UsageError,
    format_numbers,
)


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


def _default_workers(on_gpu: bool) -> int:
    """Videos at once: 8 on the GPU (threads sharing the scene method's NVDEC sessions), one per
    core on the CPU (processes: in threads the NumPy analysis of several videos shares one GIL)."""
    return 8 if on_gpu else usable_cores()


def _default_decode_processes(on_gpu: bool, method: str, files: int, workers: int) -> int:
    """4 decode processes for the scene method on the GPU over more videos than run at once (on the
    H200, 32 720p videos 8 at once: 3,202 frames/s against 2,646 with threads; they take 2.5 s to
    start), else none."""
    return 4 if on_gpu and method == "scene" and files > workers else 0


def _extract(options: dict, path: str, on_progress=None) -> Keyframes:
    """:func:`extract_keyframes` of ``path`` (module level, so worker processes can run it)."""
    return extract_keyframes(path, on_progress=on_progress, **options)


def _run_keyframes(args: argparse.Namespace) -> int:
    with _refused_arguments():  # refused before --out is touched or anything decoded
        check_scaling_factor(args.scaling_factor)
        check_optional_integer("max_frames", args.max, minimum=1, none_means="for all")
        check_number("scene_threshold", args.scene_threshold, minimum=1, minimum_inclusive=False)
    files = _expand_inputs(args.files)
    out = Path(args.out)
    with _refused_arguments():
        check_integer("thumbnail_width", args.thumbnail_width, minimum=16)
        check_optional_integer("workers", args.workers, minimum=1, none_means="(8 on the GPU, one per core on the CPU)")
        on_gpu = resolve_device(args.device, warn=False).device.is_cuda
        workers = min(args.workers or _default_workers(on_gpu), max(len(files), 1))
        check_optional_integer("decode_processes", args.decode_processes, minimum=0,
                               none_means="(4 for the scene method on the GPU over many videos)")
        if args.decode_processes and not on_gpu:
            raise ValueError("--decode-processes is for the GPU; on the CPU --workers already runs processes")
        decode_processes = (args.decode_processes if args.decode_processes is not None
                            else _default_decode_processes(on_gpu, args.method, len(files), workers))
    ray_jobs = _ray_jobs(args) if args.ray or args.ray_address else None  # refused before --out is touched
    taken = _prepare_keyframes_out(out, args.overwrite)
    folders = unique_names(files, taken=taken)
    records, videos, errors = [], [], []
    out.mkdir(parents=True, exist_ok=True)
    remote = None
    if ray_jobs is not None:  # each video extracted by a Ray task; the images are written here, as locally
        module, address = ray_jobs
        with _refused_arguments():
            remote = iter(module.extract_files(
                files, device=args.device, stream_index=args.stream, address=address, method=args.method,
                max_frames=args.max, scaling_factor=args.scaling_factor, scene_threshold=args.scene_threshold))

    extract = partial(_extract, dict(method=args.method, max_frames=args.max, device=args.device,
                                     stream_index=args.stream, scaling_factor=args.scaling_factor,
                                     scene_threshold=args.scene_threshold, decode_processes=decode_processes))
    pool: Executor | None = None
    if remote is None and workers > 1:
        pool = (ThreadPoolExecutor(workers, thread_name_prefix="vclip-keyframes") if on_gpu
                else ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")))
    ahead = submitted_ahead(pool, extract, files, 2 * workers) if pool is not None else None
    try:
        for path, folder_name in zip(_progress_bar(args, iterable=files, unit="video"), folders):
            started = time.perf_counter()
            try:
                if remote is not None:
                    found = next(remote)
                    if isinstance(found, tuple):  # (kind of VideoError, problem) from the task
                        raise VideoError(path, found[1])
                    result = found
                elif ahead is not None:  # several videos at once: no per-frame bar
                    with _refused_arguments():
                        result = next(ahead).result()
                else:
                    with _refused_arguments(), _progress_bar(args, desc=Path(path).name, unit="frame",
                                                             leave=False) as bar:
                        result = extract(path, _following(bar))
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
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        manifest = {"method": args.method, "keyframes": records, "videos": videos, "errors": errors}
        (out / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    _say(f"{len(videos)} of {len(files)} videos, {len(records)} images; manifest: {out / MANIFEST}")
    return _exit_status(len(files), len(errors))


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
    keyframes.add_argument("--max", type=int, metavar="N", help="at most N per video, evenly spread")
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
                                "processes on the CPU (default one per core)")
    keyframes.add_argument("--decode-processes", type=int, metavar="N",
                           help="GPU: decode in N worker processes shared by the run's videos, so that Python work "
                                "does not hold back NVDEC (2.5 s to start; default: 4 for the scene method over "
                                "more videos than --workers, else 0: threads of this process)")
    _add_stream(keyframes)
    keyframes.add_argument("--overwrite", action="store_true",
                           help="replace an earlier run's outputs in DIR (default: refuse)")
    _add_device(keyframes)
    _add_progress(keyframes)
    _add_ray(keyframes, "extract keyframes, one task per video,")
    keyframes.set_defaults(handler=_run_keyframes)
