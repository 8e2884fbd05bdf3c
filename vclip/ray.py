"""Offline jobs on Ray Data: index, check and keyframes over millions of files, and clips as rows.

Each job is a class for :meth:`ray.data.Dataset.map_batches`, run by a pool of Ray actors that
keep what they open for their whole life: the decode backend (NVDEC decoders on GPU actors, kept
per device by vclip and reused from video to video) and the warmed-up imports. Their input is a
dataset of videos, one row each (``video_id``, ``path``, ``label``, ``class_name``), as
:func:`videos_dataset` makes from the same sources ``vclip index`` takes, or from a catalog.

- :class:`IndexVideos`: catalog rows (the columns of :mod:`vclip.catalog`); ``vclip index --ray``
  and ``build_catalog(..., ray=...)`` run it and write the same catalog as local processes.
- :class:`CheckVideos`: :func:`vclip.check.check_video` of each video; one row per video, ok or what is bad.
- :class:`ExtractKeyframes`: one row per keyframe (codec keyframes or shot starts), with the image.
- :class:`DecodeClips`: one row per clip a sampler draws (video, label, frame indices, pts, clip).

:func:`read_clips`, :func:`read_keyframes`, :func:`check_videos` and :func:`index_videos` put
the pieces together and choose the actors' resources: on a cluster with GPUs, actors take a
quarter of a GPU each (NVDEC has several engines per GPU) and decode there; otherwise one CPU
each. Bad videos never stop a job: index and check rows say what is wrong, and clips and
keyframes of a bad video are left out (logged on the ``"vclip"`` logger of the actor).

:func:`check_files` and :func:`extract_files` run the command line's ``check`` and ``keyframes``
as one Ray task per video, returning what the local functions return, so ``vclip check --ray``
and ``vclip keyframes --ray`` write the same outputs as local runs.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import warnings
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypedDict, cast

import numpy as np

try:
    import ray
    import ray.data
except ImportError as _error:  # pragma: no cover - depends on the environment
    raise ImportError("vclip.ray needs Ray Data: pip install 'vclip-nvdec[ray]'") from _error

import pyarrow as pa

from ._indexing import IndexJob, index_row
from ._validation import fail
from .catalog import Catalog, resolve_sources, rows_table
from .check import CheckResult, check_video
from .errors import FallbackWarning, VideoError
from .keyframes import Keyframes
from .sampling import ClipSampler
from .transforms import TransformSpec

if TYPE_CHECKING:
    from .keyframes import KeyframeMethod

__all__ = [
    "CheckVideos",
    "DecodeClips",
    "ExtractKeyframes",
    "IndexVideos",
    "check_videos",
    "connect",
    "index_videos",
    "read_clips",
    "read_keyframes",
    "videos_dataset",
]

logger = logging.getLogger("vclip")

GPU_FRACTION_PER_ACTOR = 0.25
_INDEX_BATCH = 64  # videos per actor call at most: fewer calls, but every actor busy on small sets


def connect(address: str | None = None) -> None:
    """Join the Ray cluster at ``address``, unless this process already has (``ray.init()``).

    ``address=None`` joins the cluster of ``RAY_ADDRESS`` or ``ray start``, else starts a local one.
    """
    if not ray.is_initialized():
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=True)


# -- the videos ----------------------------------------------------------------------------------
def videos_dataset(sources) -> ray.data.Dataset:
    """One row per video: ``video_id`` (position in the sources), ``path``, ``label`` (-1 when
    none) and ``class_name`` ("" when none).

    Args:
        sources: A :class:`~vclip.catalog.Catalog`, or what ``vclip index`` takes (files, class
            folders, list files, (path, label) pairs; see :func:`vclip.catalog.resolve_sources`).
    """
    if isinstance(sources, Catalog):
        rows = [{"video_id": entry.row, "path": entry.path, "label": -1 if entry.label is None else entry.label,
                 "class_name": entry.class_name or ""} for entry in sources]
    else:
        videos, class_names = resolve_sources(sources)
        rows = [{"video_id": number, "path": path, "label": -1 if label is None else label,
                 "class_name": class_names[label] if class_names is not None and label is not None else ""}
                for number, (path, label) in enumerate(videos)]
    return ray.data.from_items(rows)


def _column(batch: dict, name: str, default, count: int) -> list:
    return list(batch[name]) if name in batch else [default] * count


def _gpu_share(device: str, num_gpus: float | None) -> float | None:
    """Each worker's GPU share when ``device`` asks for a GPU (``"auto"`` included) and the cluster
    has one, else None (decode on the CPU; with a warning when ``device`` insisted on CUDA)."""
    if device != "cpu" and ray.cluster_resources().get("GPU", 0.0) > 0:
        return num_gpus or GPU_FRACTION_PER_ACTOR
    if device.startswith("cuda"):
        warnings.warn(f"device={device!r} requested but the Ray cluster has no GPU; decoding on the CPU",
                      FallbackWarning, stacklevel=4)
    return None


def _placement(device: str, num_gpus: float | None, concurrency: int | None) -> tuple[str, dict]:
    """The device actors decode on and their map_batches resources: GPU actors when ``device``
    asks for one and the cluster has GPUs, else one CPU each."""
    resources = ray.cluster_resources()
    share = _gpu_share(device, num_gpus)
    if share is not None:
        return "cuda", {"num_gpus": share, "compute": _actors(concurrency or max(1, int(resources["GPU"] / share)))}
    return "cpu", {"num_cpus": 1, "compute": _actors(concurrency or max(1, int(resources.get("CPU", 1.0))))}


def _in_order(task, arguments: list[tuple], device: str) -> Iterator:
    """``task(*arguments[n], device)`` as one Ray task each (a GPU share each where ``device`` asks
    for one and the cluster has GPUs), results in the order of ``arguments``, with twice as many
    tasks in flight as the cluster runs at once (results are held until taken)."""
    share = _gpu_share(device, None)
    remote = ray.remote(task).options(**({"num_gpus": share} if share is not None else {"num_cpus": 1}))
    task_device = "cuda" if share is not None else "cpu"
    resources = ray.cluster_resources()
    at_once = int(resources["GPU"] / share) if share is not None else int(resources.get("CPU", 1.0))
    pending: deque = deque()
    remaining = iter(arguments)
    try:
        for given in itertools.islice(remaining, 2 * max(1, at_once)):
            pending.append(remote.remote(*given, task_device))
        while pending:
            reference = pending.popleft()
            following = next(remaining, None)
            if following is not None:
                pending.append(remote.remote(*following, task_device))
            yield ray.get(reference)
    finally:
        for reference in pending:
            ray.cancel(reference)


def _actors(count: int):
    """A fixed pool of ``count`` actors, each living for the whole job."""
    return ray.data.ActorPoolStrategy(size=count)


# -- index ---------------------------------------------------------------------------------------
class IndexVideos:
    """map_batches class: the catalog rows of a batch of videos (a pyarrow Table with the columns
    of :mod:`vclip.catalog`, then ``position`` and ``unchanged``).

    Input columns: ``path``; optional ``video_id`` (kept as ``position``), ``label``,
    ``class_name``, and ``known_fingerprint`` (a row whose file still has it comes back as only
    ``unchanged``). Bad files give rows with ``usable`` false and the error.
    """

    def __init__(self, *, stream_index: int | None = None):
        self.stream_index = stream_index

    def __call__(self, batch: dict) -> pa.Table:
        count = len(batch["path"])
        positions = _column(batch, "video_id", None, count)
        known = _column(batch, "known_fingerprint", None, count)
        labels = _column(batch, "label", None, count)
        names = _column(batch, "class_name", None, count)
        rows = []
        for number, path in enumerate(batch["path"]):
            position = number if positions[number] is None else int(positions[number])
            row = index_row(IndexJob(position, str(path), self.stream_index, known[number] or None))
            if labels[number] is not None and int(labels[number]) >= 0:
                row["label"] = int(labels[number])
            row["class_name"] = names[number] or None
            rows.append(row)
        return rows_table(rows)


def index_videos(sources, *, stream_index: int | None = None, concurrency: int | None = None,
                 address: str | None = None) -> ray.data.Dataset:
    """A dataset of catalog rows (see :class:`IndexVideos`), one per video of ``sources``."""
    connect(address)
    _, resources = _placement("cpu", None, concurrency)
    return videos_dataset(sources).map_batches(
        IndexVideos, fn_constructor_kwargs={"stream_index": stream_index}, batch_size=8, **resources)


def index_tables_on_ray(jobs: list[IndexJob], *, address: str | None = None,
                        on_rows: Callable[[int], None] | None = None, concurrency: int | None = None,
                        ) -> tuple[list[pa.Table], int]:
    """The catalog rows of ``jobs`` computed on Ray (what :func:`vclip.catalog.build_catalog` runs
    with ``ray=``): tables of :func:`vclip.catalog.rows_table`, in no particular order, and the
    number of actors that indexed them."""
    connect(address)
    _, resources = _placement("cpu", None, concurrency)
    actors = resources["compute"].max_size
    if not jobs:
        return [rows_table([])], actors
    stream_index = jobs[0].stream_index
    items = [{"video_id": job.position, "path": job.path, "known_fingerprint": job.known_fingerprint or ""}
             for job in jobs]
    schema = rows_table([]).schema
    context = ray.data.DataContext.get_current()
    shown, context.enable_progress_bars = context.enable_progress_bars, False
    ray_logger = logging.getLogger("ray.data")
    level = ray_logger.level
    ray_logger.setLevel(logging.ERROR)  # the caller draws its own progress bar
    try:
        batch_size = max(1, min(_INDEX_BATCH, len(items) // (4 * actors)))
        dataset: ray.data.Dataset = ray.data.from_items(items, override_num_blocks=min(len(items), 4 * actors))
        dataset = dataset.map_batches(IndexVideos, fn_constructor_kwargs={"stream_index": stream_index},
                                      batch_size=batch_size, **resources)
        tables = []
        # batch_format="pyarrow": every batch is a table.
        batches = cast("Iterator[pa.Table]", dataset.iter_batches(batch_format="pyarrow", batch_size=None))
        for table in batches:
            tables.append(table.select(schema.names).cast(schema))
            if on_rows:
                on_rows(table.num_rows)
    finally:
        context.enable_progress_bars = shown
        ray_logger.setLevel(level)
    return tables or [rows_table([])], actors


# -- check ---------------------------------------------------------------------------------------
def _start_backend(device: str) -> str:
    """Resolve ``device`` and start its backend, once for the actor's life; returns ``"cpu"``/``"cuda:N"``."""
    from ._engine.backends import in_process_backend
    from ._engine.device import resolve_device

    resolved = resolve_device(device, warn=False)  # an actor without a GPU decodes on the CPU, silently
    in_process_backend(resolved.device)
    return str(resolved.device)


class CheckVideos:
    """map_batches class: :func:`vclip.check.check_video` of each video (every frame decoded; on the
    CPU also the damage the decoder concealed); one row per video with ``path``, ``ok``, ``status``,
    ``num_frames``, ``bad_frames``, ``problems``, ``error`` ("" when readable), ``seconds`` and
    ``device`` (and the input's ``video_id`` and ``label`` when it has them).

    Args:
        device: Where to decode (``"cpu"``, ``"cuda"``, ``"auto"``...); inside a GPU actor,
            ``"cuda"`` is the GPU Ray gave it.
        stream_index: Container index of the video stream; default: the first video stream.
    """

    def __init__(self, *, device: str = "cpu", stream_index: int | None = None):
        self.device = _start_backend(device)
        self.stream_index = stream_index

    def __call__(self, batch: dict) -> pa.Table:
        results = [check_video(str(path), device=self.device, stream_index=self.stream_index)
                   for path in batch["path"]]
        passed = {name: np.asarray(batch[name]) for name in ("video_id", "label") if name in batch}
        return pa.table({
            **passed,
            "path": [r.path for r in results],
            "ok": [r.ok for r in results],
            "status": [r.status for r in results],
            "num_frames": pa.array([r.num_frames for r in results], pa.int64()),
            "bad_frames": pa.array([list(r.bad_frames) for r in results], pa.list_(pa.int64())),
            "problems": pa.array([list(r.problems) for r in results], pa.list_(pa.string())),
            "error": [r.error or "" for r in results],
            "seconds": pa.array([r.seconds for r in results], pa.float64()),
            "device": [r.device for r in results],
        })


def check_videos(sources, *, device: str = "auto", num_gpus: float | None = None, concurrency: int | None = None,
                 address: str | None = None) -> ray.data.Dataset:
    """A dataset with one :class:`CheckVideos` row per video of ``sources``."""
    connect(address)
    actor_device, resources = _placement(device, num_gpus, concurrency)
    return videos_dataset(sources).map_batches(CheckVideos, fn_constructor_kwargs={"device": actor_device},
                                               batch_size=4, **resources)


def check_files(paths: list[str], *, device: str = "auto", stream_index: int | None = None,
                address: str | None = None, on_result: Callable[[CheckResult], None] | None = None,
                ) -> list[CheckResult]:
    """:func:`vclip.check.check_video` of every path as a Ray task (what ``vclip check --ray``
    runs): the same results as :func:`vclip.check.check_videos`, in the order of ``paths``."""
    connect(address)
    results = []
    for result in _in_order(_check_one, [(path, stream_index) for path in paths], device):
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


def _check_one(path: str, stream_index: int | None, device: str) -> CheckResult:
    return check_video(path, device=device, stream_index=stream_index)


# -- keyframes -----------------------------------------------------------------------------------
class _KeyframeOptions(TypedDict):
    method: KeyframeMethod
    max_frames: int | None
    scaling_factor: float
    scene_threshold: float


class ExtractKeyframes:
    """map_batches class: one row per keyframe of each video: ``video_id``, ``video`` (the path),
    ``label``, ``frame_index``, ``pts_seconds``, ``method`` and ``image`` (RGB uint8 ``[H, W, 3]``).

    Args: as :func:`vclip.keyframes.extract_keyframes` (``method``, ``max_frames``,
    ``scaling_factor``, ``scene_threshold``), and ``device``.
    """

    def __init__(self, *, method: KeyframeMethod = "codec", max_frames: int | None = None,
                 scaling_factor: float = 1.0, scene_threshold: float = 2.0, device: str = "cpu"):
        self.options = _KeyframeOptions(method=method, max_frames=max_frames, scaling_factor=scaling_factor,
                                        scene_threshold=scene_threshold)
        self.device = _start_backend(device)

    def __call__(self, batch: dict) -> dict:
        from ._images import to_numpy
        from .keyframes import extract_keyframes

        count = len(batch["path"])
        ids, labels = _column(batch, "video_id", -1, count), _column(batch, "label", -1, count)
        columns: dict[str, list] = {name: [] for name in (
            "video_id", "video", "label", "frame_index", "pts_seconds", "method", "image")}
        for number, path in enumerate(batch["path"]):
            try:
                found = extract_keyframes(str(path), device=self.device, **self.options)
            except VideoError as error:
                logger.warning("vclip: keyframes: skipping %s", error)
                continue
            images = to_numpy(found.frames)
            for position, frame_index in enumerate(found.frame_indices.tolist()):
                columns["video_id"].append(int(ids[number]))
                columns["video"].append(str(path))
                columns["label"].append(int(labels[number]))
                columns["frame_index"].append(frame_index)
                columns["pts_seconds"].append(float(found.pts_seconds[position]))
                columns["method"].append(found.method)
                columns["image"].append(images[position])
        return _as_batch(columns)


def read_keyframes(sources, *, method: KeyframeMethod = "codec", max_frames: int | None = None,
                   scaling_factor: float = 1.0, scene_threshold: float = 2.0, device: str = "auto",
                   num_gpus: float | None = None, concurrency: int | None = None,
                   address: str | None = None) -> ray.data.Dataset:
    """A dataset of keyframes, one row per keyframe of each video (see :class:`ExtractKeyframes`)."""
    connect(address)
    actor_device, resources = _placement(device, num_gpus, concurrency)
    options = dict(method=method, max_frames=max_frames, scaling_factor=scaling_factor,
                   scene_threshold=scene_threshold, device=actor_device)
    return videos_dataset(sources).map_batches(ExtractKeyframes, fn_constructor_kwargs=options, batch_size=4,
                                               **resources)


def extract_files(paths: list[str], *, device: str = "auto", stream_index: int | None = None,
                  address: str | None = None, **options) -> Iterator[Keyframes | tuple[str, str]]:
    """:func:`vclip.keyframes.extract_keyframes` of every path as a Ray task (what ``vclip
    keyframes --ray`` runs), yielded in the order of ``paths`` as they are taken (a bounded number
    in flight): each video's keyframes (frames as NumPy arrays), or ``(type name, problem)`` of the
    error that stopped it. ``options`` as :func:`~vclip.keyframes.extract_keyframes` (``method``,
    ``max_frames``, ...)."""
    connect(address)
    return _in_order(_extract_one, [(path, stream_index, options) for path in paths], device)


def _extract_one(path: str, stream_index: int | None, options: dict, device: str) -> Keyframes | tuple[str, str]:
    from ._images import to_numpy
    from .keyframes import extract_keyframes

    try:
        found = extract_keyframes(path, device=device, stream_index=stream_index, **options)
    except VideoError as error:  # sent back as plain values: the exception class takes two arguments
        return type(error).__name__, error.problem
    except Exception as error:  # a bug: this video is reported, the others go on
        return type(error).__name__, f"internal error ({type(error).__name__}: {error}); please report it"
    return dataclasses.replace(found, frames=to_numpy(found.frames))


# -- clips ---------------------------------------------------------------------------------------
class DecodeClips:
    """map_batches class: one row per clip of each video: ``video_id``, ``video`` (the path),
    ``label``, ``clip_index``, ``frame_indices`` (int64 ``[T]``), ``pts_seconds`` (float64 ``[T]``)
    and ``clip`` (``[T, H, W, 3]`` uint8, or the transform's layout and dtype).

    A video's clips are drawn with the seed ``(seed, video_id)``: the same rows whichever actor
    decodes it, on CPU or GPU.

    Args:
        sampler: Which frames make a clip (any of the six modes).
        transform: Resize, crop, flip, normalization, dtype and layout (None: RGB uint8).
        seed: Seed of the sampler's and the transform's random choices.
        device: Where to decode; inside a GPU actor ``"cuda"`` is the GPU Ray gave it.
    """

    def __init__(self, sampler: ClipSampler, *, transform: TransformSpec | None = None, seed: int = 0,
                 device: str = "cpu"):
        if not isinstance(sampler, ClipSampler):
            raise fail("sampler", sampler, "a ClipSampler, e.g. vclip.strided(16, 2)")
        self.sampler, self.transform, self.seed = sampler, transform, int(seed)
        self.device = _start_backend(device)

    def __call__(self, batch: dict) -> dict:
        from ._images import to_numpy
        from .decoder import VideoDecoder

        count = len(batch["path"])
        ids, labels = _column(batch, "video_id", -1, count), _column(batch, "label", -1, count)
        columns: dict[str, list] = {name: [] for name in (
            "video_id", "video", "label", "clip_index", "frame_indices", "pts_seconds", "clip")}
        for number, path in enumerate(batch["path"]):
            seed = int(np.random.SeedSequence([self.seed, max(int(ids[number]), 0)]).generate_state(1)[0])
            try:
                clips = VideoDecoder(str(path), device=self.device).get_clips(
                    self.sampler, transform=self.transform, seed=seed)
            except (VideoError, ValueError) as error:  # unreadable, or no clip fits
                logger.warning("vclip: clips: skipping %s: %s", path, error)
                continue
            data = to_numpy(clips.data)
            for clip_index in range(data.shape[0]):
                columns["video_id"].append(int(ids[number]))
                columns["video"].append(str(path))
                columns["label"].append(int(labels[number]))
                columns["clip_index"].append(clip_index)
                columns["frame_indices"].append(clips.frame_indices[clip_index])
                columns["pts_seconds"].append(clips.pts_seconds[clip_index])
                columns["clip"].append(data[clip_index])
        return _as_batch(columns)


def read_clips(sources, sampler: ClipSampler, *, transform: TransformSpec | None = None, seed: int = 0,
               device: str = "auto", num_gpus: float | None = None, concurrency: int | None = None,
               address: str | None = None) -> ray.data.Dataset:
    """A Ray dataset of clips, one row per clip (see :class:`DecodeClips`), from the videos of
    ``sources`` (a catalog, or files, class folders, list files, pairs).

    Example::

        clips = vclip.ray.read_clips("videos/", vclip.strided(16, 2, clips_per_video=4))
        for batch in clips.iter_batches(batch_size=32):
            batch["clip"]  # [32, 16, H, W, 3] uint8
    """
    connect(address)
    actor_device, resources = _placement(device, num_gpus, concurrency)
    return videos_dataset(sources).map_batches(
        DecodeClips, fn_constructor_args=(sampler,),
        fn_constructor_kwargs={"transform": transform, "seed": seed, "device": actor_device},
        batch_size=2, **resources)


def _as_batch(columns: dict[str, list]) -> dict:
    """Columns of lists as a numpy batch; arrays of one shape are stacked, others kept per row."""
    batch = {}
    for name, values in columns.items():
        if values and isinstance(values[0], np.ndarray):
            shapes = {value.shape for value in values}
            if len(shapes) == 1:
                batch[name] = np.stack(values)
            else:
                holder = np.empty(len(values), dtype=object)
                holder[:] = values
                batch[name] = holder
        else:
            batch[name] = np.asarray(values)
    return batch

