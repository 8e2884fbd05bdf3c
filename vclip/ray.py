"""Offline jobs on Ray Data: index, check and keyframes over millions of files, and clips as rows.

Each job is a class for :meth:`ray.data.Dataset.map_batches`, run by a pool of Ray actors that
keep what they open for their whole life: the decode backend (NVDEC decoders on GPU actors, kept
per device by vclip and reused from video to video) and the warmed-up imports. Their input is a
dataset of videos, one row each (``video_id``, ``path``, ``label``, ``class_name``), as
:func:`videos_dataset` makes from the same sources ``vclip index`` takes, or from a catalog.

- :class:`IndexVideos`: catalog rows (the columns of :mod:`vclip.catalog`), as
  :func:`vclip.catalog.build_catalog` writes them.
- :class:`CheckVideos`: :func:`vclip.check.check_video` of each video; one row per video, ok or what is bad.
- :class:`ExtractKeyframes`: one row per keyframe (codec keyframes or shot starts), with the image.
- :class:`DecodeClips`: one row per clip a sampler draws (video, label, frame indices, pts, clip).

:func:`read_clips`, :func:`read_keyframes`, :func:`check_videos` and :func:`index_videos` put
the pieces together and choose the actors' resources: on a cluster with GPUs, actors take a
quarter of a GPU each (NVDEC has several engines per GPU) and decode there; otherwise one CPU
each. Bad videos never stop a job: index and check rows say what is wrong, and clips and
keyframes of a bad video are left out (logged on the ``"vclip"`` logger of the actor).

These are datasets for Ray Data pipelines. To run vclip's own jobs on a cluster with their usual
results (a catalog file, check results, keyframes to save), pass ``ray=True`` to
:func:`vclip.catalog.build_catalog`, :func:`vclip.check.check_videos` or
:func:`vclip.keyframes.extract_keyframes_many` (``--ray`` on the command line): they run as Ray tasks
through vclip's job runner.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, TypedDict

import numpy as np

try:
    import ray
    import ray.data
except ImportError as _error:  # pragma: no cover - depends on the environment
    raise ImportError("vclip.ray needs Ray Data: pip install 'vclip-nvdec[ray]'") from _error

import pyarrow as pa

from ._device import CPU, Device, resolve_device
from ._jobs.runner import connect_ray, gpu_share
from .catalog import Catalog, IndexItem, index_row, resolve_sources, rows_table
from .check import check_video
from .errors import VideoError, fail
from .sampling import ClipSampler
from .transforms import TransformSpec

if TYPE_CHECKING:
    from .keyframes import KeyframeMethod, SceneRules

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


def connect(address: str | None = None) -> None:
    """Join the Ray cluster at ``address``, unless this process already has (``ray.init()``).

    ``address=None`` joins the cluster of ``RAY_ADDRESS`` or ``ray start``, else starts a local one.
    """
    connect_ray(address)


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


def _placement(device: str, num_gpus: float | None, workers: int | None) -> tuple[Device, dict]:
    """The device actors decode on and their map_batches resources: ``workers`` actors (default:
    as many as the cluster holds), on a share of a GPU each (``Device("cuda")``, the GPU Ray gives
    each actor) when ``device`` asks for one and the cluster has GPUs, else on one CPU each."""
    resources = ray.cluster_resources()
    share = gpu_share(device, num_gpus, stacklevel=3)
    if share is not None:
        gpu = {"num_gpus": share, "compute": _actors(workers or max(1, int(resources["GPU"] / share)))}
        return Device("cuda"), gpu
    return CPU, {"num_cpus": 1, "compute": _actors(workers or max(1, int(resources.get("CPU", 1.0))))}


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
            row = index_row(IndexItem(position, str(path), self.stream_index, known[number] or None))
            if labels[number] is not None and int(labels[number]) >= 0:
                row["label"] = int(labels[number])
            row["class_name"] = names[number] or None
            rows.append(row)
        return rows_table(rows)


def index_videos(sources, *, stream_index: int | None = None, workers: int | None = None,
                 address: str | None = None) -> ray.data.Dataset:
    """A dataset of catalog rows (see :class:`IndexVideos`), one per video of ``sources``, made by
    ``workers`` actors (default: one per CPU of the cluster)."""
    connect(address)
    _, resources = _placement("cpu", None, workers)
    return videos_dataset(sources).map_batches(
        IndexVideos, fn_constructor_kwargs={"stream_index": stream_index}, batch_size=8, **resources)


# -- check ---------------------------------------------------------------------------------------
def _start_backend(device: str | Device) -> Device:
    """Resolve ``device`` and start its backend, once for the actor's life; returns the device."""
    from ._engine.backends import in_process_backend

    resolved = resolve_device(device, warn=False)  # an actor without a GPU decodes on the CPU, silently
    in_process_backend(resolved.device)
    return resolved.device


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

    def __init__(self, *, device: str | Device = "auto", stream_index: int | None = None):
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


def check_videos(sources, *, device: str = "auto", num_gpus: float | None = None, workers: int | None = None,
                 address: str | None = None) -> ray.data.Dataset:
    """A dataset with one :class:`CheckVideos` row per video of ``sources``, made by ``workers``
    actors (default: as many as the cluster holds, a ``num_gpus`` share of a GPU each where it has
    GPUs and ``device`` asks for one, else one CPU each)."""
    connect(address)
    actor_device, resources = _placement(device, num_gpus, workers)
    return videos_dataset(sources).map_batches(CheckVideos, fn_constructor_kwargs={"device": actor_device},
                                               batch_size=4, **resources)


# -- keyframes -----------------------------------------------------------------------------------
class _KeyframeOptions(TypedDict):
    method: KeyframeMethod
    max_frames: int | None
    scaling_factor: float
    scene_threshold: float
    rules: SceneRules | None


class ExtractKeyframes:
    """map_batches class: one row per keyframe of each video: ``video_id``, ``video`` (the path),
    ``label``, ``frame_index``, ``pts_seconds``, ``method`` and ``image`` (RGB uint8 ``[H, W, 3]``).

    Args: as :func:`vclip.keyframes.extract_keyframes` (``method``, ``max_frames``,
    ``scaling_factor``, ``scene_threshold``, ``rules``), and ``device``.
    """

    def __init__(self, *, method: KeyframeMethod = "codec", max_frames: int | None = None,
                 scaling_factor: float = 1.0, scene_threshold: float = 2.0, rules: SceneRules | None = None,
                 device: str | Device = "auto"):
        self.options = _KeyframeOptions(method=method, max_frames=max_frames, scaling_factor=scaling_factor,
                                        scene_threshold=scene_threshold, rules=rules)
        self.device = _start_backend(device)

    def __call__(self, batch: dict) -> dict:
        from ._outputs.images import to_numpy
        from .keyframes import extract_keyframes

        count = len(batch["path"])
        ids, labels = _column(batch, "video_id", -1, count), _column(batch, "label", -1, count)
        columns: dict[str, list] = {name: [] for name in (
            "video_id", "video", "label", "frame_index", "pts_seconds", "method", "image")}
        for number, path in enumerate(batch["path"]):
            try:
                found = extract_keyframes(str(path), device=self.device, **self.options)
            except VideoError as error:
                logger.warning("keyframes: skipping %s", error)
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
                   scaling_factor: float = 1.0, scene_threshold: float = 2.0, rules: SceneRules | None = None,
                   device: str = "auto", num_gpus: float | None = None, workers: int | None = None,
                   address: str | None = None) -> ray.data.Dataset:
    """A dataset of keyframes, one row per keyframe of each video (see :class:`ExtractKeyframes`),
    made by ``workers`` actors (as :func:`check_videos`)."""
    connect(address)
    actor_device, resources = _placement(device, num_gpus, workers)
    options = dict(method=method, max_frames=max_frames, scaling_factor=scaling_factor,
                   scene_threshold=scene_threshold, rules=rules, device=actor_device)
    return videos_dataset(sources).map_batches(ExtractKeyframes, fn_constructor_kwargs=options, batch_size=4,
                                               **resources)


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
                 device: str | Device = "auto"):
        if not isinstance(sampler, ClipSampler):
            raise fail("sampler", sampler, "a ClipSampler, e.g. vclip.strided(16, 2)")
        self.sampler, self.transform, self.seed = sampler, transform, int(seed)
        self.device = _start_backend(device)

    def __call__(self, batch: dict) -> dict:
        from ._outputs.images import to_numpy
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
                logger.warning("clips: skipping %s: %s", path, error)
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
               device: str = "auto", num_gpus: float | None = None, workers: int | None = None,
               address: str | None = None) -> ray.data.Dataset:
    """A Ray dataset of clips, one row per clip (see :class:`DecodeClips`), from the videos of
    ``sources`` (a catalog, or files, class folders, list files, pairs), decoded by ``workers``
    actors (as :func:`check_videos`).

    For example:

    ```python
    clips = vclip.ray.read_clips("videos/", vclip.strided(16, 2, clips_per_video=4))
    for batch in clips.iter_batches(batch_size=32):
        batch["clip"]  # [32, 16, H, W, 3] uint8
    ```
    """
    connect(address)
    actor_device, resources = _placement(device, num_gpus, workers)
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

