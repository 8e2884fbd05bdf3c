"""VideoDecoder: exact frames and clips of one video, on the CPU or with NVDEC."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, NoReturn

import numpy as np

from ._audio.spans import ClipSpans, clip_spans
from ._bytes.sources import VideoInput, hold_video
from ._device import Device, resolve_device
from ._engine.backends import make_backend, shared_process_backend
from ._engine.contract import Backend
from ._engine.cpu import CpuBackend
from ._engine.dispatch import ThreadDispatcher
from ._engine.pipeline import ClipTarget, DecodeStats, VideoRequest, resolve_transform
from .audio import AudioClips, AudioIndex, AudioSpec, audio_index_for, clips_audio
from .errors import ArgumentError, check_flag, check_integer, check_number, check_optional_integer, fail, is_integer
from .gop import keyframe_chunks
from .index import VideoIndex, index_video
from .sampling import ClipSampler, check_scaling_factor
from .transforms import Augmentations, TransformSpec, as_transform_spec

__all__ = ["VideoDecoder", "Frames", "ITERATION_CHUNK_BYTES"]

ITERATION_CHUNK_BYTES = 256 * 2**20
"""Most bytes of RGB frames that iterating over a :class:`VideoDecoder` decodes at once (a long
group of pictures is decoded in pieces of this size, each from its keyframe)."""


@dataclass(frozen=True, eq=False)
class Frames:
    """Decoded frames or clips, with where they came from.

    Attributes:
        data: NumPy array on the CPU, CuPy array on the GPU. ``get_frames`` gives ``[N, H, W, 3]``
            (or the transform's layout), ``get_clips`` gives ``[clips, ...one clip...]``.
            Without a transform: RGB uint8, 0-255; see :class:`TransformSpec` otherwise.
        frame_indices: Frame numbers, shaped like the leading (frame/clip) axes of ``data``:
            ``[N]`` from ``get_frames``, ``[clips, T]`` from ``get_clips``.
        pts_seconds: Presentation time of each of those frames.
        device: ``"cpu"`` or ``"cuda:N"``.
        fell_back_to_cpu: A GPU request was decoded on the CPU (no GPU, or a stream NVDEC lacks).
        padded: bool, shaped like ``frame_indices``: True where a clip ran past the last frame
            and the sampler's ``end_policy`` filled the position (``"repeat_last"``: the last
            frame again, ``"wrap"``: a frame from the start). All False from ``get_frames``.
        augmentations: What the transform drew for each clip (crop box, scale, flip, colour
            factors; one row per clip, or per frame with ``per_frame``; one row from
            ``get_frames``), see :class:`vclip.transforms.Augmentations`. None without a transform.
        clip_ids, view_ids: int64 ``[clips]`` from ``get_clips``: which of the sampler's clips each
            row is, and which spatial view of it (``TransformSpec(spatial_views=3)`` gives 3 rows
            per clip, views of a clip next to each other; otherwise ``clip_ids`` counts rows and
            ``view_ids`` is 0). None from ``get_frames``.
        dtype: The transform's dtype; ``"bfloat16"`` values are held in ``data`` as their uint16
            bit patterns (NumPy and CuPy have no bfloat16), and :meth:`torch` gives bfloat16.
        audio: The clips' audio (``get_clips(..., audio=AudioSpec(...))``; one row per row of
            ``data``: a clip's views share its audio), else None.
    """

    data: Any
    frame_indices: np.ndarray
    pts_seconds: np.ndarray
    device: str
    fell_back_to_cpu: bool = False
    padded: np.ndarray = None  # type: ignore[assignment]  # filled in: all False, shaped like frame_indices
    augmentations: Augmentations | None = None
    clip_ids: np.ndarray | None = None
    view_ids: np.ndarray | None = None
    dtype: str = None  # type: ignore[assignment]  # filled in: data's dtype
    audio: AudioClips | None = None

    def __post_init__(self):
        if self.padded is None:
            object.__setattr__(self, "padded", np.zeros(np.shape(self.frame_indices), dtype=bool))
        if self.dtype is None:
            object.__setattr__(self, "dtype", str(self.data.dtype))

    def __repr__(self) -> str:
        return (
            f"Frames(data={type(self.data).__module__.split('.')[0]}[{', '.join(map(str, self.data.shape))}] "
            f"{self.data.dtype}, frame_indices={list(self.frame_indices.shape)}, device={self.device!r}, "
            f"fell_back_to_cpu={self.fell_back_to_cpu}, padded={int(np.count_nonzero(self.padded))}"
            + (f", audio={self.audio!r})" if self.audio is not None else ")")
        )

    def torch(self):
        """``data`` as a torch tensor, shared without a copy (DLPack).

        Raises:
            ImportError: PyTorch is not installed (the message says how to install it).
        """
        try:
            import torch
        except ImportError as error:
            if error.name != "torch":
                raise
            raise ImportError("Frames.torch() needs PyTorch, which is not installed: pip install "
                              "'vclip-nvdec[torch]'", name="torch") from None

        tensor = torch.from_numpy(self.data) if isinstance(self.data, np.ndarray) else torch.from_dlpack(self.data)
        return tensor.view(torch.bfloat16) if self.dtype == "bfloat16" else tensor


class VideoDecoder:
    """Frames of one video stream, exact by presentation order.

    Args:
        path: The video file; a URL fsspec opens (``s3://``, ``gs://``, ``https://``...; clips
            then read only their packets' byte ranges); a member of a WebDataset shard
            (``SHARD.tar#MEMBER``, a name from ``WebDatasetSource.videos``, or a shard of one video);
            its bytes; a binary file object with
            ``read`` and ``seek`` (read under a lock, kept open by the decoder); or an entry of a
            dataset catalog (``vclip.catalog.Catalog.entry(path)``: its stored index is used,
            after checking the file's fingerprint once).
        stream_index: Container index of the video stream; default: the first video stream.
        device: ``"auto"`` (default: NVDEC where usable, else the CPU), ``"cpu"``, ``"cuda"`` or
            ``"cuda:N"`` (or a device another vclip function resolved). A GPU request that cannot
            be served falls back to the CPU with one :class:`~vclip.errors.FallbackWarning`, and
            ``Frames.fell_back_to_cpu`` says so.
        cache_dir: Folder for an on-disk cache of the video's index.
        skip_non_reference: Do not decode non-reference pictures nobody asked for.
        decode_processes: Decode in this many worker processes instead of this one (0, the
            default). They start with the first decoder asking for that count (seconds: a Python
            and a CUDA context each) and serve every later one of this process until it exits.
            One call's frames are decoded by one worker thread either way; this pays when many
            calls run at once from several threads (the scene method's chunks, several videos),
            whose Python work would otherwise share one interpreter lock.
        accept_concealed: Deliver pictures FFmpeg flags as damaged (it concealed a loss in them,
            e.g. filled a broken slice from its neighbours) and the frames decoded from them, as
            FFmpeg made them. False (the default): asking for such a frame raises
            :class:`~vclip.errors.CorruptVideoError` naming it (``frames`` lists the ones lost: the
            damaged picture and every frame decoded from it up to the next keyframe). CPU decoding
            only (NVDEC does not report concealment); decodes in this process (``decode_processes=0``).

    Raises:
        VideoNotFoundError, NotAVideoError, CorruptVideoError, UnsupportedCodecError: see
            :func:`~vclip.index_video`.
        ArgumentError: A bad argument, or ``accept_concealed=True`` with ``decode_processes``.
    """

    def __init__(
        self,
        path: VideoInput | Any,
        *,
        stream_index: int | None = None,
        device: str | Device = "auto",
        cache_dir: str | os.PathLike | None = None,
        skip_non_reference: bool = True,
        decode_processes: int = 0,
        accept_concealed: bool = False,
    ):
        check_optional_integer("stream_index", stream_index, minimum=0, none_means="(the first video stream)")
        self._cache_dir = cache_dir
        self._audio_indexes: dict[tuple[int | None, str], AudioIndex | None] = {}  # by (stream, missing)
        check_flag("skip_non_reference", skip_non_reference)
        decode_processes = check_integer("decode_processes", decode_processes, minimum=0)
        if check_flag("accept_concealed", accept_concealed) and decode_processes:
            raise fail("decode_processes", decode_processes, "0 with accept_concealed=True (damaged pictures are "
                                                             "accepted by decoders in this process only)")
        resolved = resolve_device(device)
        from_catalog = getattr(path, "verified_index", None)  # a vclip.catalog.CatalogEntry
        if from_catalog is not None:
            self._held = None
            self.index: VideoIndex = from_catalog()
        else:
            name, self._held = hold_video(path)  # keeps bytes and file objects readable by name
            self.index = index_video(name, stream_index=stream_index, cache_dir=cache_dir)
        backend: Backend
        if accept_concealed and not resolved.device.is_cuda:
            backend = CpuBackend(skip_non_reference=skip_non_reference, accept_concealed=True)
        elif decode_processes:
            backend = shared_process_backend(resolved.device, decode_processes, skip_non_reference=skip_non_reference)
        else:
            backend = make_backend(resolved.device, skip_non_reference=skip_non_reference)
        self._dispatcher = ThreadDispatcher(backend, num_workers=1)
        self.device: str = str(resolved.device)
        self.fell_back_to_cpu: bool = resolved.fell_back_to_cpu
        self.stats = DecodeStats()
        self._closed = False

    def __len__(self) -> int:
        return self.index.num_frames

    def __repr__(self) -> str:
        closed = ", closed" if self._closed else ""
        return f"VideoDecoder({self.index!r}, device={self.device!r}{closed})"

    @property
    def metadata(self) -> VideoIndex:
        """The stream's facts, as torchcodec's ``metadata``: ``num_frames``, ``width``, ``height``,
        ``codec``, ``average_fps``, ``duration_seconds``, ``start_seconds``, ``end_seconds``,
        ``bit_depth``, colour, rotation (the :class:`~vclip.VideoIndex` the decoder reads)."""
        return self.index

    def __getitem__(self, key: int | slice) -> Frames:
        """``decoder[i]``: frame ``i`` (negative counts from the end), ``data`` ``[H, W, 3]`` and
        ``frame_indices`` a 0-d array; ``decoder[start:stop:step]``: those frames, as
        :meth:`get_frames` gives them (``[N, H, W, 3]``; an empty slice gives ``N = 0``).

        Raises:
            IndexError: (a vclip :class:`~vclip.errors.FrameIndexError`) ``i`` is out of range.
            ArgumentError: ``key`` is neither an integer nor a slice.
        """
        self._check_open()
        if isinstance(key, slice):
            numbers = np.arange(*key.indices(len(self)), dtype=np.int64)
            return self.get_frames(numbers) if numbers.size else self._no_frames()
        if not is_integer(key):
            raise fail("key", key, "a frame number (an integer) or a slice; for a list of frames use "
                                   "get_frames(indices)")
        return _one_frame(self.get_frames([int(key)]), 0)

    def __iter__(self) -> Iterator[Frames]:
        """Every frame in presentation order, one :class:`Frames` each (as ``decoder[i]``), decoded
        a group of pictures at a time (groups cut to :data:`ITERATION_CHUNK_BYTES` of frames)."""
        self._check_open()
        width, height = self.index.display_size
        chunk = max(1, ITERATION_CHUNK_BYTES // (width * height * 3))
        for start, stop in keyframe_chunks(self.index, 1):
            for first in range(start, stop, chunk):
                frames = self.get_frames(np.arange(first, min(first + chunk, stop)))
                for k in range(frames.frame_indices.size):
                    yield _one_frame(frames, k)

    def close(self) -> None:
        """Release what the decoder holds (its decode thread, the bytes or file object it reads);
        later calls raise. Idempotent; ``with VideoDecoder(path) as decoder:`` closes on exit."""
        if not self._closed:
            self._closed = True
            self._dispatcher.close()
            self._held = None

    def __enter__(self) -> VideoDecoder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ArgumentError(f"{self.index.path}: this VideoDecoder is closed; open a new one to decode")

    def _no_frames(self) -> Frames:
        empty = self._decode([], None, 1.0, None)
        return replace(empty, data=empty.data.reshape(empty.data.shape[1:]),
                       frame_indices=np.zeros(0, np.int64), pts_seconds=np.zeros(0), padded=np.zeros(0, bool))

    def get_frames(
        self,
        indices: Sequence[int] | np.ndarray,
        *,
        transform: TransformSpec | None = None,
        scaling_factor: float = 1.0,
        seed: int | None = None,
    ) -> Frames:
        """Exactly these frames, in this order, duplicates kept (negative counts from the end).

        Without a transform or scaling, CPU frames are FFmpeg's rgb24 conversion bit for bit.

        Args:
            indices: Frame numbers (presentation order). For times, see :meth:`get_frames_played_at`.
            transform: Resize, crop, flip, colour, normalization, dtype and layout (:class:`TransformSpec`,
                or a ``torchvision.transforms.v2.Compose`` it fuses: see :meth:`TransformSpec.from_torchvision`).
            scaling_factor: Frames come out at ``round(W*f) x round(H*f)``, ``0 < f <= 1``.
            seed: Seed of the transform's random draws (crop, scale, flip, colour).

        Raises:
            FrameIndexError: (an IndexError) An index is out of range.
            ArgumentError: (a ValueError) The list is empty; an argument of the wrong type or value;
                a crop larger than the resized frames.
            CorruptVideoError: A frame cannot be decoded, or is damaged (see :meth:`get_clips`).
        """
        self._check_open()
        indices = self.index.check_frame_indices(_frame_numbers(indices))
        transform, scaling_factor = _check_options(transform, scaling_factor, seed)
        if transform is not None and transform.spatial_views > 1:
            raise fail("transform", transform, "a spec with spatial_views=1 in get_frames, which returns one clip of "
                                               "frames; get_clips returns the views of each clip")
        clips = self._decode([indices], transform, scaling_factor, seed)
        return Frames(clips.data[0], clips.frame_indices[0], clips.pts_seconds[0], clips.device, clips.fell_back_to_cpu,
                      augmentations=clips.augmentations, dtype=clips.dtype)

    def get_frames_played_at(
        self,
        seconds: Sequence[float] | np.ndarray | float,
        *,
        transform: TransformSpec | None = None,
        scaling_factor: float = 1.0,
        seed: int | None = None,
    ) -> Frames:
        """The frames a player shows at these times (presentation time in seconds, not ``i / fps``).

        The name and meaning of torchcodec's method. Options as :meth:`get_frames`.

        Raises:
            ArgumentError: (a ValueError) A time before the first frame or at/after the end of the
                stream; no time; ``seconds`` is not a number or a sequence of numbers.
        """
        times = _times(seconds)
        return self.get_frames([self.index.frame_at(float(t)) for t in times], transform=transform,
                               scaling_factor=scaling_factor, seed=seed)

    def get_frames_at(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Removed: use :meth:`get_frames` for frame numbers, :meth:`get_frames_played_at` for times.

        It took seconds, while torchcodec's method of the same name takes frame indices: a
        torchcodec user asking for ``[0, 5]`` got the frames shown at 0 s and 5 s. Calling it
        raises :class:`~vclip.errors.ArgumentError` (a ``TypeError``) naming both replacements.
        """
        raise ArgumentError(
            "VideoDecoder.get_frames_at is ambiguous and no longer exists: use get_frames(indices) for frame "
            "numbers (what torchcodec's get_frames_at takes) or get_frames_played_at(seconds) for times in seconds"
        )

    def get_clips(
        self, sampler: ClipSampler, *, transform: TransformSpec | None = None, seed: int | None = None,
        segment: tuple[float | None, float | None] | None = None, audio: AudioSpec | None = None,
    ) -> Frames:
        """The clips ``sampler`` picks, ``data`` shaped ``[clips, ...]``.

        ``seed`` drives the sampler (default: its own seed) and the transform's random draws
        (crop, scale, flip, colour; recorded in ``augmentations``). ``segment`` ``(start, end)``
        seconds keeps the clips inside that time window (see :meth:`ClipSampler.sample`).
        ``padded`` marks the positions the sampler's end policy filled. When the end policy drops
        every clip (``end_policy="drop"`` on a video shorter than one clip) the result is empty:
        ``data`` of shape ``[0, ...one clip...]``, ``frame_indices`` ``[0, T]``.

        Multi-view evaluation: a sampler with ``starts="even", clips_per_video=N`` and a transform
        with ``spatial_views=3`` give ``3N`` rows, each clip decoded once and converted 3 times
        (``clip_ids`` and ``view_ids`` say which is which).

        With ``audio``, ``Frames.audio`` holds each clip's audio (:class:`~vclip.AudioClips`):
        the samples from its first frame's pts to the end of its last frame (a strided clip gets
        the whole stretch; sampled in seconds, from its first target time for its duration;
        inside ``segment``, cut at its end), or each frame's own span with
        ``AudioSpec(span="frame")``; positions the end policy padded have none (see :mod:`vclip.audio`).

        Raises:
            NoClipFitsError: (a ValueError) ``end_policy="error"`` and the video (or segment) is
                shorter than one clip; no frame in ``segment``.
            ArgumentError: (a ValueError) An argument of the wrong type or value; a crop larger
                than the resized frames.
            NoAudioError: ``audio`` with ``missing="error"`` and the video has no (such) audio stream.
            CorruptVideoError: A frame of the clips cannot be decoded, or is damaged (concealed by
                the decoder, or decoded from such a picture; unless ``accept_concealed``): the
                message names the damaged frame, ``frames`` lists the frames asked for that are lost.
        """
        self._check_open()
        if not isinstance(sampler, ClipSampler):
            raise fail("sampler", sampler, "a ClipSampler, e.g. vclip.strided(16, 2)")
        transform, _ = _check_options(transform, sampler.scaling_factor, seed)
        _check_audio(audio)
        clips = sampler.sample_with_padding(self.index, seed=seed, segment=segment)
        audio_index = self._audio_index(audio) if audio is not None else None  # before decoding: may refuse
        frames_per_clip = sampler.timing(self.index)[0] if sampler.in_seconds else sampler.clip_length or 0
        result = self._decode([clip.frame_indices for clip in clips], transform, sampler.scaling_factor, seed,
                              frames_per_clip=frames_per_clip)
        views = 1 if transform is None else transform.spatial_views
        padded = np.asarray([clip.padded for clip in clips], bool).reshape(len(clips), result.frame_indices.shape[1])
        result = replace(result, padded=np.repeat(padded, views, axis=0))
        if audio is None:
            return result
        spans = [clip_spans(self.index, clip, sampler, segment) for clip in clips]
        clip_audio = self._audio_of(audio_index, spans, audio, frames_per_clip)
        return replace(result, audio=clip_audio if views == 1 else replace(
            clip_audio, data=np.repeat(clip_audio.data, views, axis=0),
            lengths=np.repeat(clip_audio.lengths, views, axis=0),
            start_seconds=np.repeat(clip_audio.start_seconds, views, axis=0)))

    def get_audio(self, start_seconds: float, end_seconds: float, *, audio: AudioSpec | None = None) -> AudioClips:
        """The audio shown from ``start_seconds`` to ``end_seconds`` (presentation times, as the
        frames'), ``data`` of shape ``[1, channels, S]`` with ``S = ceil((end - start) * rate)``
        samples, sample ``j`` the one shown at ``start + j / rate`` (silence where the stream
        has no audio).

        Args:
            start_seconds, end_seconds: The span, ``start < end``; either may lie outside the stream.
            audio: Rate, channels, dtype and stream (default: ``AudioSpec()``, 16 kHz mono float32;
                its ``span`` does not apply).

        Raises:
            ArgumentError: Not numbers, or ``end_seconds <= start_seconds``.
            NoAudioError: ``missing="error"`` and the video has no (such) audio stream.
        """
        self._check_open()
        audio = AudioSpec() if audio is None else audio
        _check_audio(audio)
        start = check_number("start_seconds", start_seconds)
        end = check_number("end_seconds", end_seconds)
        if end <= start:
            raise fail("end_seconds", end_seconds, f"a number > start_seconds ({start_seconds!r})")
        spans = [ClipSpans(np.array([start]), np.array([end]), start, end)]
        return self._audio_of(self._audio_index(audio), spans, replace(audio, span="clip"), 1)

    def _audio_index(self, audio: AudioSpec) -> AudioIndex | None:
        key = (audio.stream_index, audio.missing)
        if key not in self._audio_indexes:
            self._audio_indexes[key] = audio_index_for(self.index.path, audio, cache_dir=self._cache_dir)
        return self._audio_indexes[key]

    def _audio_of(self, index: AudioIndex | None, spans: list[ClipSpans], audio: AudioSpec,
                  positions: int) -> AudioClips:
        data, lengths, starts = clips_audio(index, spans, audio, positions=positions)
        return AudioClips(data, lengths, starts, audio.sample_rate, has_audio=index is not None,
                          stream_index=None if index is None else index.stream_index)

    def _decode(
        self, clips: list[np.ndarray], transform: TransformSpec | None, scaling_factor: float, seed,
        frames_per_clip: int = 0,
    ) -> Frames:
        """Decode ``clips`` (an empty list gives an empty result of ``frames_per_clip`` frames a clip)."""
        index = self.index
        conversion = resolve_transform(transform, scaling_factor)
        rng = np.random.default_rng(seed)
        views = conversion.views
        frames_per_clip = clips[0].size if clips else frames_per_clip
        try:
            draws = [conversion.draw(index, rng, frames_per_clip) for _ in clips]  # per clip, one draw per view
        except ArgumentError as error:  # the transform does not fit this video (a crop larger than its frames)
            raise ArgumentError(f"{index.path}: {error}") from None
        targets = [
            ClipTarget.of(np.asarray(frames, dtype=np.int64), draw, number * views + view)
            for number, (frames, clip_draws) in enumerate(zip(clips, draws))
            for view, draw in enumerate(clip_draws)
        ]
        geometry = targets[0].geometry if targets else conversion.index_geometry(index, rng)
        output = self._dispatcher.backend.empty(
            (len(targets),) + conversion.clip_shape(frames_per_clip, geometry), conversion.storage_dtype
        )
        fallbacks_before = self.stats.fallback_videos
        if targets:
            result = self._dispatcher.run([VideoRequest(index, tuple(targets))], conversion, output, self.stats)
            if result.errors[0] is not None:
                raise result.errors[0]
            for completion in result.completions:
                completion.synchronize()
        frame_indices = np.repeat(np.asarray(clips, dtype=np.int64).reshape(len(clips), frames_per_clip), views, axis=0)
        return Frames(
            data=output,
            frame_indices=frame_indices,
            pts_seconds=index.pts_seconds[frame_indices],
            device=self.device,
            fell_back_to_cpu=self.fell_back_to_cpu or self.stats.fallback_videos > fallbacks_before,
            augmentations=None if transform is None else Augmentations.from_draws(
                [draw for clip_draws in draws for draw in clip_draws], per_frame=conversion.spec.per_frame,
                frames=frames_per_clip,
            ),
            clip_ids=np.repeat(np.arange(len(clips), dtype=np.int64), views),
            view_ids=np.tile(np.arange(views, dtype=np.int64), len(clips)),
            dtype=conversion.dtype,
        )


def _one_frame(frames: Frames, k: int) -> Frames:
    """Frame ``k`` of ``frames`` alone: ``data`` ``[H, W, 3]``, ``frame_indices`` a 0-d array."""
    return replace(frames, data=frames.data[k], frame_indices=frames.frame_indices[k],
                   pts_seconds=frames.pts_seconds[k], padded=frames.padded[k])


def _check_audio(audio: Any) -> None:
    if audio is not None and not isinstance(audio, AudioSpec):
        raise fail("audio", audio, "an AudioSpec or None, e.g. vclip.AudioSpec(sample_rate=16000, channels=1)")


def _check_options(transform: Any, scaling_factor: Any, seed: Any) -> tuple[TransformSpec | None, float]:
    """Check the options shared by the frame methods: the transform as a spec (a torchvision v2
    pipeline translated), ``scaling_factor`` as a float."""
    spec = as_transform_spec(transform)
    check_optional_integer("seed", seed, minimum=0)
    return spec, check_scaling_factor(scaling_factor)


def _frame_numbers(indices: Any) -> np.ndarray:
    """``indices`` as an int64 array; floats, booleans and strings are refused (they are not frame numbers)."""
    expected = "a frame number or a sequence of frame numbers (integers); for times use get_frames_played_at"
    if isinstance(indices, (str, bytes)):
        raise fail("indices", indices, expected)
    try:
        array = np.asarray(indices)
    except (TypeError, ValueError):
        raise fail("indices", indices, expected) from None
    if array.size and array.dtype.kind not in "iu":
        raise fail("indices", indices, expected)
    return array.astype(np.int64).reshape(-1)


def _times(seconds: Any) -> np.ndarray:
    """``seconds`` as a float64 array of finite times."""
    expected = "a time in seconds or a sequence of times (finite numbers)"
    try:
        array = np.atleast_1d(np.asarray(seconds)).reshape(-1)
    except (TypeError, ValueError):
        raise fail("seconds", seconds, expected) from None
    if array.dtype.kind not in "iuf" or not np.isfinite(array.astype(np.float64)).all():
        raise fail("seconds", seconds, expected)
    return array.astype(np.float64)
