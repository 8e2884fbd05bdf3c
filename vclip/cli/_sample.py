"""``vclip sample``: clips of one or many videos into .npz, .pt, .mp4 or PNG folders, with their
audio (``--audio-sample-rate``) as arrays in .npz/.pt and as WAV files beside the PNGs."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
import wave
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
from tqdm import tqdm

from .._jobs.runner import Outcome, choose_runner
from .._outputs.files import check_output_file, check_output_folder, unique_names, written_whole
from .._outputs.images import (
    to_numpy,
    write_image,
    write_video,
)
from ..audio import AudioClips, AudioSpec
from ..decoder import Frames, VideoDecoder
from ..errors import CorruptVideoError, OutputError, VideoError, check_optional_integer
from ..sampling import (
    ClipSampler,
    contiguous,
    downscaled,
    indexed,
    jittered,
    keyframe,
    strided,
)
from ..transforms import TransformSpec
from ._common import (
    EXIT_FAILED,
    SAMPLE_FORMATS,
    SAMPLE_MODES,
    UsageError,
    add_device_option,
    add_progress_option,
    add_renamed_option,
    add_stream_option,
    exit_status,
    expand_inputs,
    format_numbers,
    frame_size,
    int_list,
    non_negative_integer,
    progress_bar,
    refused_arguments,
    report_error,
    report_internal_error,
    report_skipped,
    say,
)

_PNG_NAME = re.compile(r"clip\d{3,}_\d{3,}_frame\d{6,}\.png")
_WAV_NAME = re.compile(r"clip\d{3,}(_\d{3,})?\.wav")
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
            raise UsageError(f"--format {args.format} does not match --out ({args.out!r}); "
                              "--format applies when --out is a folder")
        if output_format == "mp4" and len(inputs) > 1:
            raise UsageError(f"--out ({args.out!r}) takes the clips of one video; for {len(inputs)} videos "
                              "name a folder and pass --format mp4 (one .mp4 per video)")
        check_output_file(out)
        return output_format, out, [out] if output_format == "mp4" else None
    if suffix and not args.out.endswith(os.sep) and not out.is_dir():
        raise UsageError(f"--out ({args.out!r}) must end in {', '.join(SAMPLE_FORMATS)}, or name a folder "
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
        raise UsageError(f"{len(used)} of the outputs already exist in {args.out!r} (e.g. {os.fspath(used[0])!r}); "
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
    earlier = [entry for entry in folder.iterdir()
               if (_PNG_NAME.fullmatch(entry.name) or _WAV_NAME.fullmatch(entry.name)) and entry.is_file()]
    if earlier and not overwrite:
        raise UsageError(f"--out ({os.fspath(folder)!r}) already holds {len(earlier)} clip PNGs of an earlier run; "
                          "pass --overwrite to replace them, or pick another --out")
    for entry in earlier:
        entry.unlink()


def _check_mode_options(args: argparse.Namespace) -> None:
    allowed = _MODE_OPTIONS[args.mode]
    for option in sorted(set().union(*_MODE_OPTIONS.values()) - allowed):
        if getattr(args, option) is not None:
            takers = ", ".join(mode for mode, names in _MODE_OPTIONS.items() if option in names)
            flag = "--" + option.replace("_", "-")
            raise UsageError(f"{flag} does not apply to --mode {args.mode} (it applies to: {takers})")


def _sampler(args: argparse.Namespace) -> ClipSampler:
    mode = args.mode
    if mode == "indexed":
        if args.frame_indices is None:
            raise UsageError("--mode indexed needs --frame-indices (e.g. --frame-indices 0,10,-1)")
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


def _all_dropped(sampler: ClipSampler, num_frames: int) -> bool:
    """Whether ``drop`` leaves no clip of frame numbers in a whole video (clips in seconds or in a
    segment are found empty once drawn)."""
    return (sampler.mode not in ("indexed", "keyframe") and not sampler.in_seconds and sampler.end_policy == "drop"
            and sampler.span > num_frames)


def _segment(args: argparse.Namespace) -> tuple[float | None, float | None] | None:
    """The ``--start-seconds``/``--end-seconds`` window, or None."""
    if args.start_seconds is None and args.end_seconds is None:
        return None
    if args.start_seconds is not None and args.end_seconds is not None and args.start_seconds >= args.end_seconds:
        raise UsageError(f"--start-seconds ({args.start_seconds:g}) must come before --end-seconds "
                         f"({args.end_seconds:g})")
    return (args.start_seconds, args.end_seconds)


def _audio_spec(args: argparse.Namespace) -> AudioSpec | None:
    """The audio asked for (``--audio-sample-rate`` and its options), or None."""
    extras = [flag for flag, value in (("--audio-channels", args.audio_channels),
                                       ("--audio-stream-index", args.audio_stream_index),
                                       ("--audio-span", args.audio_span), ("--audio-missing", args.audio_missing))
              if value is not None]
    if args.audio_sample_rate is None:
        if extras:
            raise UsageError(f"{extras[0]} needs --audio-sample-rate (e.g. --audio-sample-rate 16000)")
        return None
    return AudioSpec(sample_rate=args.audio_sample_rate,
                     channels=1 if args.audio_channels is None else args.audio_channels,
                     span=args.audio_span or "clip", stream_index=args.audio_stream_index,
                     missing=args.audio_missing or "silence")


def _audio_arrays(audio: AudioClips | None) -> dict[str, np.ndarray]:
    if audio is None:
        return {}
    return dict(audio=audio.data, audio_lengths=audio.lengths, audio_start_seconds=audio.start_seconds,
                has_audio=np.full(len(audio.data), audio.has_audio),
                audio_sample_rate=np.asarray(audio.sample_rate, dtype=np.int64))


def _write_wav(path: Path, samples: np.ndarray, sample_rate: int) -> None:
    """16-bit PCM WAV of float32 ``[channels, samples]`` in [-1, 1]."""
    pcm = np.clip(np.rint(samples * 32768.0), -32768, 32767).astype("<i2")
    with written_whole(path) as temporary, wave.open(temporary, "wb") as file:
        file.setnchannels(pcm.shape[0])
        file.setsampwidth(2)
        file.setframerate(sample_rate)
        file.writeframes(np.ascontiguousarray(pcm.T).tobytes())


def _write_clips(output_format: str, out: Path, clips: Frames, data: np.ndarray, padded: np.ndarray,
                 video: _Sampled, mode: str, images: Callable[..., tqdm]) -> None:
    """Write one video's clips; ``images(total=N)`` gives the bar that counts the PNGs written."""
    audio = clips.audio
    if output_format in ("npz", "pt"):
        out.parent.mkdir(parents=True, exist_ok=True)
        _write_arrays(output_format, out, data, clips.frame_indices, clips.pts_seconds, padded,
                      np.zeros(len(data), dtype=np.int64), _ids(clips), [video.path], mode, _audio_arrays(audio))
    elif output_format == "mp4":
        out.parent.mkdir(parents=True, exist_ok=True)
        write_video(out, (frame for clip in data for frame in clip), fps=video.average_fps)
    else:
        out.mkdir(parents=True, exist_ok=True)
        with closing(images(total=int(np.prod(data.shape[:2])))) as bar:
            for number, (clip, frame_indices) in enumerate(zip(data, clips.frame_indices.tolist())):
                for position, (frame, frame_index) in enumerate(zip(clip, frame_indices)):
                    write_image(out / f"clip{number:03d}_{position:03d}_frame{frame_index:06d}.png", frame)
                    bar.update()
        if audio is not None:
            _write_clip_wavs(out, audio)


def _write_clip_wavs(out: Path, audio: AudioClips) -> None:
    """``clipNNN.wav`` per clip (``clipNNN_PPP.wav`` per position with frame spans), 16-bit PCM."""
    float_data = audio.data.astype(np.float32) / (32768.0 if audio.data.dtype == np.int16 else 1.0)
    for number, clip in enumerate(float_data):
        if clip.ndim == 2:  # [channels, S]
            _write_wav(out / f"clip{number:03d}.wav", clip[:, :audio.lengths[number]], audio.sample_rate)
            continue
        for position, samples in enumerate(clip):
            _write_wav(out / f"clip{number:03d}_{position:03d}.wav", samples[:, :audio.lengths[number, position]],
                       audio.sample_rate)


def _padded_audio(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The audio arrays of several videos' clips as one, spans padded to the longest."""
    if not parts or not parts[0]:
        return {}
    width = max(part["audio"].shape[-1] for part in parts)
    audio = [np.pad(part["audio"], [(0, 0)] * (part["audio"].ndim - 1) + [(0, width - part["audio"].shape[-1])])
             for part in parts]
    joined = {name: np.concatenate([part[name] for part in parts]) for name in parts[0] if name != "audio_sample_rate"}
    return {**joined, "audio": np.concatenate(audio), "audio_sample_rate": parts[0]["audio_sample_rate"]}


def _ids(clips: Frames) -> tuple[np.ndarray, np.ndarray]:
    """Each row's clip (of its video) and spatial view."""
    assert clips.clip_ids is not None and clips.view_ids is not None  # get_clips fills them
    return clips.clip_ids, clips.view_ids


def _write_arrays(output_format: str, out: Path, data: np.ndarray, frame_indices: np.ndarray,
                  pts_seconds: np.ndarray, padded: np.ndarray, video_ids: np.ndarray,
                  ids: tuple[np.ndarray, np.ndarray], paths: list[str], mode: str,
                  audio: dict[str, np.ndarray]) -> None:
    """An .npz or .pt of clips; ``video_ids[i]`` is the position in ``paths`` of row i's video,
    ``ids`` its clip of that video and its spatial view (``clip_ids``, ``view_ids``); with ``audio``
    (:func:`_audio_arrays`), their audio too."""
    arrays = dict(clips=data, frame_indices=frame_indices, pts_seconds=pts_seconds, padded=padded,
                  video_ids=video_ids, clip_ids=ids[0], view_ids=ids[1], **audio)
    if output_format == "npz":
        names = np.array([p.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace") for p in paths])
        source = {"source": names[0]} if len(paths) == 1 else {}
        # allow_pickle is the default, named so mypy maps no array to it
        with written_whole(out) as temporary:
            np.savez(temporary, allow_pickle=True, **arrays, paths=names, mode=np.str_(mode), **source)
    else:
        import torch

        source = {"source": paths[0]} if len(paths) == 1 else {}
        with written_whole(out) as temporary:
            torch.save({**{name: torch.from_numpy(np.ascontiguousarray(a)) for name, a in arrays.items()},
                        "paths": list(paths), "mode": mode, **source}, temporary)


def _clip_lines(clips: Frames, padded: np.ndarray, sampler: ClipSampler, num_frames: int,
                windowed: bool = False) -> list[str]:
    lines = []
    clip_ids, view_ids = _ids(clips)
    views = int(view_ids.max()) + 1 if view_ids.size else 1
    for number, (frame_indices, flags) in enumerate(zip(clips.frame_indices.tolist(), padded.tolist())):
        name = f"{clip_ids[number]} view {view_ids[number]}" if views > 1 else f"{number}"
        line = f"  clip {name}: frames {format_numbers(frame_indices, limit=16)}"
        if any(flags):
            where = ("its clip runs past the end of the segment or video" if windowed or sampler.in_seconds
                     else f"the video has {num_frames} frames, a clip spans {sampler.span}")
            line += f" ({sum(flags)} of {len(flags)} frames padded by end policy {sampler.end_policy}: {where})"
        lines.append(line)
    return lines


@dataclass(frozen=True)
class _Sampled:
    """One video's clips (``data`` as NumPy) and what writing them needs of its index."""

    clips: Frames
    num_frames: int
    average_fps: float
    path: str


@dataclass(frozen=True)
class _Skipped:
    """Why a video gave no clip: none fits (``refused`` False), or a value it refuses (``refused``)."""

    problem: str
    refused: bool = False


def _video_seed(seed: int | None, position: int) -> int | None:
    """The seed of the input at ``position``: ``seed + position``, so that videos of the same length
    get different starts and jitter, one video what ``get_clips(seed=seed)`` gives, and a rerun
    over the same inputs the same clips."""
    return None if seed is None else seed + position


def _sample_video(options: dict, item: tuple[int, str]) -> _Sampled | _Skipped:
    """The clips of input ``item`` (its position and path; module level, so that worker processes can run it)."""
    position, path = item
    sampler: ClipSampler = options["sampler"]
    decoder = VideoDecoder(path, stream_index=options["stream_index"], device=options["device"])
    num_frames = decoder.index.num_frames
    if _all_dropped(sampler, num_frames):
        return _Skipped(f"no clip fits (a clip spans {sampler.span} frames, the video has {num_frames}; "
                        "--end-policy drop drops them all)")
    try:
        clips = decoder.get_clips(sampler, transform=options["transform"], seed=_video_seed(options["seed"], position),
                                  segment=options["segment"], audio=options["audio"])
    except UnicodeError:  # a ValueError, but from a file's bytes, not from the user's values
        raise
    except (ValueError, TypeError, IndexError) as error:  # a value this video refuses (a frame past its end)
        return _Skipped(str(error), refused=True)
    if not len(clips.frame_indices):
        return _Skipped("no clip fits (--end-policy drop drops them all)")
    return _Sampled(dataclasses.replace(clips, data=to_numpy(clips.data)), num_frames, decoder.index.average_fps,
                    decoder.index.path)


def _run_sample(args: argparse.Namespace) -> int:
    _check_mode_options(args)
    with refused_arguments():
        sampler = _sampler(args)
        spatial = args.resize is not None or args.crop is not None or args.spatial_views != 1
        transform = (TransformSpec(resize=args.resize, crop=args.crop, spatial_views=args.spatial_views) if spatial
                     else None)
        check_optional_integer("workers", args.workers, minimum=1, none_means="(1: one video after another)")
        audio = _audio_spec(args)
        segment = _segment(args)
    inputs = expand_inputs(args.files)
    try:
        output_format, out, targets = _sample_outputs(args, inputs)
    except OutputError as error:
        raise UsageError(str(error)) from None
    if audio is not None and output_format == "mp4":
        raise UsageError("--audio-sample-rate writes audio into .npz or .pt files, or WAV files beside the PNGs of a "
                         "folder; an .mp4 --out takes frames only")
    if output_format == "pt":
        try:
            import torch  # noqa: F401
        except ImportError:
            raise UsageError("writing .pt needs PyTorch, which is not installed (pip install 'vclip-nvdec[torch]'); "
                              "write .npz instead") from None
    with refused_arguments():
        runner = choose_runner(args.device, workers=args.workers or 1, items=len(inputs), isolate=True)
    options = dict(sampler=sampler, transform=transform, seed=args.seed, segment=segment, audio=audio,
                   stream_index=args.stream_index, device=runner.device)
    combined: list[tuple[int, _Sampled, list[str]]] = []  # (input number, clips, what to say of them)
    skipped = 0
    progress = progress_bar(args, total=len(inputs), unit="video", leave=False)
    with closing(runner.run(partial(_sample_video, options), enumerate(inputs))) as outcomes:
        for outcome in outcomes:
            number, path = outcome.position, inputs[outcome.position]
            try:
                sampled = _sampled(outcome, path, single=len(inputs) == 1)
                if sampled is None:
                    skipped += 1
                    continue
                clips, data = sampled.clips, sampled.clips.data
                padded = np.asarray(clips.padded, dtype=bool)  # the frames the end policy filled in
                lines = _clip_lines(clips, padded, sampler, sampled.num_frames, windowed=segment is not None)
                if targets is None:  # said once the file's clip shape is chosen
                    combined.append((number, sampled, lines))
                    continue
                _write_clips(output_format, targets[number], clips, data, padded, sampled, args.mode,
                             images=partial(progress_bar, args, unit="image", desc="writing", leave=False))
            except VideoError as error:
                skipped += 1
                report_skipped("sample", error)
                continue
            except UsageError:
                raise
            except Exception as error:  # a bug or a write that failed: reported for this file, the others go on
                skipped += 1
                report_internal_error("sample", path, error)
                continue
            finally:
                progress.update()  # a video is done once its clips are written (or it was skipped)
            _say_sampled(path, sampled, lines, args.mode, targets[number], output_format)
    progress.close()
    if combined:
        kept = _one_clip_shape(combined, out)
        skipped += len(combined) - len(kept)
        for number, sampled, lines in kept:
            _say_sampled(inputs[number], sampled, lines, args.mode, out, output_format)
        parts = [sampled.clips for _, sampled, _ in kept]
        try:
            _write_arrays(
                output_format, out, np.concatenate([c.data for c in parts]),
                np.concatenate([c.frame_indices for c in parts]),
                np.concatenate([c.pts_seconds for c in parts]),
                np.concatenate([np.asarray(c.padded, dtype=bool) for c in parts]),
                np.concatenate([np.full(len(c.data), position, dtype=np.int64) for position, c in enumerate(parts)]),
                (np.concatenate([_ids(c)[0] for c in parts]), np.concatenate([_ids(c)[1] for c in parts])),
                [inputs[number] for number, *_ in kept], args.mode,
                _padded_audio([_audio_arrays(c.audio) for c in parts]),
            )
        except OSError as error:
            report_error("sample", f"writing {out} failed ({error})")
            return EXIT_FAILED
        if len(inputs) > 1:
            clips_written = sum(len(c.data) for c in parts)
            say(f"{len(kept)} of {len(inputs)} videos, {clips_written} clips -> {out} (video_ids index paths)")
    return exit_status(len(inputs), skipped)


def _say_sampled(path: str, sampled: _Sampled, lines: list[str], mode: str, destination: Path,
                 output_format: str) -> None:
    data = sampled.clips.data
    folder = os.sep if output_format == "png" else ""
    say(f"{path}: {len(data)} {mode} clip{'s' if len(data) != 1 else ''} {list(data.shape)} "
        f"{data.dtype} on {sampled.clips.device} -> {destination}{folder}")
    say("\n".join(lines))


def _one_clip_shape(combined: list[tuple[int, _Sampled, list[str]]],
                    out: Path) -> list[tuple[int, _Sampled, list[str]]]:
    """The videos whose clips have the most common shape (the first one seen among equals), which
    one file can hold together; the others are reported and left out."""
    shapes = Counter(tuple(sampled.clips.data.shape[1:]) for _, sampled, _ in combined)
    chosen = max(shapes, key=shapes.__getitem__)  # max keeps the first of equal counts
    for _, sampled, _ in combined:
        shape = tuple(sampled.clips.data.shape[1:])
        if shape != chosen:
            report_skipped("sample", VideoError(
                sampled.path, f"its clips come out {list(shape)} but {shapes[chosen]} of the videos' come out "
                              f"{list(chosen)}, the shape {out} holds; pass --resize/--crop so that every video fits, "
                              "or write one file per video (--out FOLDER --format npz)"))
    return [entry for entry in combined if tuple(entry[1].clips.data.shape[1:]) == chosen]


def _sampled(outcome: Outcome[_Sampled | _Skipped], path: str, single: bool) -> _Sampled | None:
    """A video's clips, or None after saying why it has none.

    Raises:
        VideoError: The video could not be read (or crashed its worker process).
        UsageError: The only video refuses a value (a frame index past its end).
        Exception: What the job raised (a bug).
    """
    if outcome.crashed:
        raise CorruptVideoError(path, outcome.crash_problem())
    if outcome.error is not None:
        raise outcome.error
    result = outcome.value
    if isinstance(result, _Skipped):
        if result.refused and single:
            raise UsageError(result.problem)
        say(f"vclip sample: skipped {path}: {result.problem}", sys.stderr)
        return None
    return result


def add_parser(commands) -> None:
    """The ``vclip sample`` sub-command."""
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
    sample.add_argument("--frame-indices", type=int_list, metavar="I,J,...",
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
    sample.add_argument("--seed", type=non_negative_integer,
                        help="seed for random starts and jitter: the K-th video (from 0) draws with seed N+K, so one "
                             "video gives what VideoDecoder.get_clips(seed=N) gives (default: fresh each run)")
    sample.add_argument("--scaling-factor", type=float, metavar="F",
                        help="frames at round(W*F) x round(H*F), 0 < F <= 1")
    sample.add_argument("--resize", type=frame_size, metavar="SIZE",
                        help="shorter side in pixels (e.g. 224) or HEIGHT,WIDTH (e.g. 240,320; the old spelling "
                             "WIDTHxHEIGHT still reads, with a warning)")
    sample.add_argument("--crop", type=frame_size, metavar="SIZE",
                        help="center crop after the resize: N or HEIGHT,WIDTH")
    add_renamed_option(sample, "--audio-sample-rate", "--audio-rate", type=int, metavar="HZ",
                       help="also write each clip's audio, resampled to HZ (e.g. 16000): arrays audio, "
                            "audio_lengths, audio_start_seconds, has_audio in .npz/.pt, clipNNN.wav beside PNGs")
    sample.add_argument("--audio-channels", type=int, choices=(1, 2),
                        help="with --audio-sample-rate: 1 (default) or 2")
    add_renamed_option(sample, "--audio-stream-index", "--audio-stream", type=int, metavar="N",
                       help="with --audio-sample-rate: container index of the audio stream (default: the first)")
    sample.add_argument("--audio-span", choices=("clip", "frame"),
                        help="with --audio-sample-rate: one stretch per clip (default) or each frame's own span")
    sample.add_argument("--audio-missing", choices=("silence", "error"),
                        help="with --audio-sample-rate: a video without audio gives silence (default) or is skipped")
    add_renamed_option(sample, "--spatial-views", "--views", type=int, choices=(1, 3), default=1,
                       help="spatial views per clip (multi-view evaluation): 3 crops of --crop along the longer "
                            "side (start, centre, end), each clip decoded once; clip_ids and view_ids in .npz/.pt "
                            "say which row is which (default 1)")
    sample.add_argument("--workers", type=int, metavar="N",
                        help="videos sampled at once: threads on the GPU, processes on the CPU (default 1; on the "
                             "CPU several files go through a worker process even then, so that a decoder's crash "
                             "costs only its file)")
    add_stream_option(sample)
    add_device_option(sample)
    add_progress_option(sample)
    sample.set_defaults(handler=_run_sample)
