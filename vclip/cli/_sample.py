"""``vclip sample``: clips of one or many videos into .npz, .pt, .mp4 or PNG folders, with their
audio (``--audio-rate``) as arrays in .npz/.pt and as WAV files beside the PNGs."""

from __future__ import annotations

import argparse
import os
import re
import sys
import wave
from pathlib import Path

import numpy as np

from .._images import (
    to_numpy,
    write_image,
    write_video,
)
from .._outputs import check_output_file, check_output_folder, unique_names
from ..audio import AudioClips, AudioSpec
from ..decoder import Frames, VideoDecoder
from ..errors import OutputError, VideoError
from ..index import VideoIndex
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
    _MODE_OPTIONS,
    _PNG_NAME,
    EXIT_FAILED,
    SAMPLE_FORMATS,
    SAMPLE_MODES,
    _add_device,
    _add_progress,
    _add_stream,
    _error,
    _exit_status,
    _expand_inputs,
    _frame_size,
    _int_list,
    _internal_error,
    _non_negative_integer,
    _progress_bar,
    _refused_arguments,
    _say,
    _skipped,
    _UsageError,
    format_numbers,
)

_WAV_NAME = re.compile(r"clip\d{3,}(_\d{3,})?\.wav")


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
    earlier = [entry for entry in folder.iterdir()
               if (_PNG_NAME.fullmatch(entry.name) or _WAV_NAME.fullmatch(entry.name)) and entry.is_file()]
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


def _audio_spec(args: argparse.Namespace) -> AudioSpec | None:
    """The audio asked for (``--audio-rate`` and its options), or None."""
    extras = [flag for flag, value in (("--audio-channels", args.audio_channels), ("--audio-stream", args.audio_stream),
                                       ("--audio-span", args.audio_span), ("--audio-missing", args.audio_missing))
              if value is not None]
    if args.audio_rate is None:
        if extras:
            raise _UsageError(f"{extras[0]} needs --audio-rate (e.g. --audio-rate 16000)")
        return None
    return AudioSpec(sample_rate=args.audio_rate, channels=1 if args.audio_channels is None else args.audio_channels,
                     span=args.audio_span or "clip", stream_index=args.audio_stream,
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
    with wave.open(os.fspath(path), "wb") as file:
        file.setnchannels(pcm.shape[0])
        file.setsampwidth(2)
        file.setframerate(sample_rate)
        file.writeframes(np.ascontiguousarray(pcm.T).tobytes())


def _write_clips(output_format: str, out: Path, clips: Frames, data: np.ndarray, padded: np.ndarray,
                 index: VideoIndex, mode: str) -> None:
    audio = clips.audio
    if output_format in ("npz", "pt"):
        out.parent.mkdir(parents=True, exist_ok=True)
        _write_arrays(output_format, out, data, clips.frame_indices, clips.pts_seconds, padded,
                      np.zeros(len(data), dtype=np.int64), [index.path], mode, _audio_arrays(audio))
    elif output_format == "mp4":
        out.parent.mkdir(parents=True, exist_ok=True)
        write_video(out, (frame for clip in data for frame in clip), fps=index.average_fps)
    else:
        out.mkdir(parents=True, exist_ok=True)
        for number, (clip, frame_indices) in enumerate(zip(data, clips.frame_indices.tolist())):
            for position, (frame, frame_index) in enumerate(zip(clip, frame_indices)):
                write_image(out / f"clip{number:03d}_{position:03d}_frame{frame_index:06d}.png", frame)
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


def _write_arrays(output_format: str, out: Path, data: np.ndarray, frame_indices: np.ndarray,
                  pts_seconds: np.ndarray, padded: np.ndarray, video_ids: np.ndarray, paths: list[str],
                  mode: str, audio: dict[str, np.ndarray]) -> None:
    """An .npz or .pt of clips; ``video_ids[i]`` is the position in ``paths`` of clip i's video; with
    ``audio`` (:func:`_audio_arrays`), their audio too."""
    arrays = dict(clips=data, frame_indices=frame_indices, pts_seconds=pts_seconds, padded=padded,
                  video_ids=video_ids, **audio)
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
        audio = _audio_spec(args)
    inputs = _expand_inputs(args.files)
    try:
        output_format, out, targets = _sample_outputs(args, inputs)
    except OutputError as error:
        raise _UsageError(str(error)) from None
    if audio is not None and output_format == "mp4":
        raise _UsageError("--audio-rate writes audio into .npz or .pt files, or WAV files beside the PNGs of a "
                          "folder; an .mp4 --out takes frames only")
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
                clips = decoder.get_clips(sampler, transform=transform, seed=args.seed, segment=_segment(args),
                                          audio=audio)
            if not len(clips.frame_indices):
                skipped += 1
                _say(f"vclip sample: skipped {path}: no clip fits (--end-policy drop drops them all)", sys.stderr)
                continue
            data = to_numpy(clips.data)
            padded = np.asarray(clips.padded, dtype=bool)  # the frames the end policy filled in
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
                _padded_audio([_audio_arrays(c[1].audio) for c in combined]),
            )
        except OSError as error:
            _error("sample", f"writing {out} failed ({error})")
            return EXIT_FAILED
        if len(inputs) > 1:
            clips_written = sum(len(c[2]) for c in combined)
            _say(f"{len(combined)} of {len(inputs)} videos, {clips_written} clips -> {out} (video_ids index paths)")
    return _exit_status(len(inputs), skipped)


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
    sample.add_argument("--seed", type=_non_negative_integer,
                        help="seed for random starts and jitter (default: fresh each run)")
    sample.add_argument("--scaling-factor", type=float, metavar="F",
                        help="frames at round(W*F) x round(H*F), 0 < F <= 1")
    sample.add_argument("--resize", type=_frame_size, metavar="SIZE",
                        help="shorter side in pixels (e.g. 224) or WIDTHxHEIGHT")
    sample.add_argument("--crop", type=_frame_size, metavar="SIZE",
                        help="center crop after the resize: N or WIDTHxHEIGHT")
    sample.add_argument("--audio-rate", type=int, metavar="HZ",
                        help="also write each clip's audio, resampled to HZ (e.g. 16000): arrays audio, "
                             "audio_lengths, audio_start_seconds, has_audio in .npz/.pt, clipNNN.wav beside PNGs")
    sample.add_argument("--audio-channels", type=int, choices=(1, 2), help="with --audio-rate: 1 (default) or 2")
    sample.add_argument("--audio-stream", type=int, metavar="N",
                        help="with --audio-rate: container index of the audio stream (default: the first)")
    sample.add_argument("--audio-span", choices=("clip", "frame"),
                        help="with --audio-rate: one stretch per clip (default) or each frame's own span")
    sample.add_argument("--audio-missing", choices=("silence", "error"),
                        help="with --audio-rate: a video without audio gives silence (default) or is skipped")
    _add_stream(sample)
    _add_device(sample)
    _add_progress(sample)
    sample.set_defaults(handler=_run_sample)
