"""Deterministic mutation fuzzing of vclip's video readers.

Mutants of small synthetic videos (64x48, 20 frames: H.264 and HEVC in MP4, H.264 in Matroska, one
with negative timestamps, one turned by a display matrix, and in MPEG-TS, MPEG-4 Part 2 in AVI and
MP4, VP9 in WebM, AV1 in Matroska) go through the API
(``index_video``, ``VideoDecoder.get_frames`` and ``get_clips``), optionally the CLI (``vclip info``
and ``vclip sample`` in-process) and a loader epoch. Every outcome must be a success with correctly
shaped output and a consistent index, or a :class:`vclip.VideoError` naming the file: any other
exception, a hang (past ``timeout`` seconds) or a wrongly shaped result is a failure. Every
``good_every`` mutants, a pristine video must still decode exactly (barcodes), so a decoder left
broken by a bad file (a CUDA context, say) is caught.

Mutations: truncation, bit flips in the header and in the payload, zeroed ranges, duplicated and
shuffled chunks, and per container absurd sizes and counts: MP4 box sizes and table entry counts,
Matroska element sizes, AVI chunk sizes, header counts and idx1 entries. Mutant ``i`` of a
campaign depends only on (``seed``, ``i``), so a failure is reproduced by its name alone.

Run on a GPU machine (NVDEC) with::

    python tests/fuzzing.py --device cuda --count 1000 --out /tmp/fuzz

The test suite runs it on the CPU (tests/test_fuzz.py).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import struct
import sys
import tempfile
import threading
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import av
import numpy as np

if __package__ in (None, ""):  # python tests/fuzzing.py from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import host, remux

import vclip  # noqa: E402
from vclip.errors import VideoError  # noqa: E402
from vclip.index import check_index  # noqa: E402
from vclip.synthetic import make_video, read_barcode, render_frame  # noqa: E402
from vclip.synthetic._barcoded import _texture  # noqa: E402

WIDTH, HEIGHT, FRAMES = 64, 48, 20
_BASE = dict(num_frames=FRAMES, width=WIDTH, height=HEIGHT, keyframe_interval=10)
SEEDS = {  # name: (file name, make_video options)
    "h264_mp4": ("h264.mp4", dict(b_frames=2)),
    "hevc_mp4": ("hevc.mp4", dict(codec="libx265")),
    "h264_mkv": ("h264.mkv", dict(b_frames=2)),
    "mpeg4_avi": ("mpeg4.avi", dict(codec="mpeg4")),
    "h264_ts": ("h264.ts", dict(b_frames=2)),
    "mpeg4_mp4": ("mpeg4.mp4", dict(codec="mpeg4")),
    "vp9_webm": ("vp9.webm", dict(codec="libvpx-vp9", b_frames=0, encoder_options={"deadline": "realtime"})),
    "av1_mkv": ("av1.mkv", dict(codec="libsvtav1", b_frames=0, encoder_options={"preset": "12"})),
    "negative_pts_mkv": ("negative_pts.mkv", None),  # first 5 frames before 0: the demuxer gives no pts
    "turned_mp4": ("turned.mp4", None),  # H.264 shown turned by 90 degrees: frames are 48x64
}
# Seeds whose pristine copies the periodic check decodes: barcodes are read upright, and on a GPU
# only streams NVDEC decodes at 64x48 (H.264, HEVC: VP9 needs 128x128, the H200 has no AV1).
_GOOD_ON_CPU = {name for name in SEEDS if name != "turned_mp4"}
_GOOD_ON_GPU = {name for name in _GOOD_ON_CPU if name.startswith(("h264", "hevc", "negative_pts"))}


def make_negative_pts_mkv(path: str | os.PathLike, *, first_pts: int = -5) -> str:
    """An H.264 Matroska file whose first timestamps are negative (muxed with
    ``avoid_negative_ts=disabled``): FFmpeg hands those packets over without pts or dts."""
    texture = _texture(2 * WIDTH, 2 * HEIGHT, np.random.default_rng(0))
    with av.open(str(path), "w", container_options={"avoid_negative_ts": "disabled"}) as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        stream.options = {"bf": "2", "g": "10", "preset": "veryfast"}
        for i in range(FRAMES):
            frame = av.VideoFrame.from_ndarray(render_frame(i, texture, WIDTH, HEIGHT, FRAMES), format="rgb24")
            frame.pts = first_pts + i
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return str(path)


def make_seeds(folder: str | os.PathLike) -> dict[str, str]:
    """The pristine videos mutants are made from, by name (see SEEDS)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("SVT_LOG", "1")  # SVT-AV1 prints its whole configuration otherwise
    seeds = {name: make_video(folder / file, **{**_BASE, **options})
             for name, (file, options) in SEEDS.items() if options is not None}
    seeds["negative_pts_mkv"] = make_negative_pts_mkv(folder / SEEDS["negative_pts_mkv"][0])
    seeds["turned_mp4"] = remux(seeds["h264_mp4"], str(folder / SEEDS["turned_mp4"][0]), degrees=90)
    return seeds


# -- container structure ------------------------------------------------------------------------
_MP4_CONTAINERS = {
    b"moov",
    b"trak",
    b"mdia",
    b"minf",
    b"stbl",
    b"edts",
    b"dinf",
    b"udta",
    b"mvex",
    b"moof",
    b"traf",
    b"meta",
}
_MP4_COUNTED = {
    b"stts": 12,
    b"ctts": 12,
    b"stss": 12,
    b"stsc": 12,
    b"stco": 12,
    b"co64": 12,
    b"elst": 12,
    b"dref": 12,
    b"stsd": 12,
    b"stsz": 16,
    b"sdtp": None,
}  # box: offset of its 32-bit count


def mp4_boxes(data: bytes, start: int = 0, end: int | None = None, depth: int = 0) -> list[tuple[int, int, bytes]]:
    """(offset, size, type) of every box, depth first."""
    end = len(data) if end is None else end
    boxes, offset = [], start
    while offset + 8 <= end and depth < 12:
        size, kind = struct.unpack_from(">I4s", data, offset)
        header = 8
        if size == 1 and offset + 16 <= end:
            size, header = struct.unpack_from(">Q", data, offset + 8)[0], 16
        elif size == 0:
            size = end - offset
        if size < header or offset + size > end:
            break
        boxes.append((offset, size, kind))
        if kind in _MP4_CONTAINERS:
            child = offset + header + (4 if kind == b"meta" else 0)
            boxes += mp4_boxes(data, child, offset + size, depth + 1)
        elif kind == b"stsd":
            boxes += mp4_boxes(data, offset + 16, offset + size, depth + 1)
        offset += size
    return boxes


def riff_chunks(data: bytes, start: int = 0, end: int | None = None, depth: int = 0) -> list[tuple[int, int, bytes]]:
    """(offset, payload size, id) of every RIFF chunk (LIST and RIFF payloads descended into)."""
    end = len(data) if end is None else end
    chunks, offset = [], start
    while offset + 8 <= end and depth < 8:
        kind, size = struct.unpack_from("<4sI", data, offset)
        chunks.append((offset, size, kind))
        if kind in (b"RIFF", b"LIST") and offset + 12 <= end:
            chunks += riff_chunks(data, offset + 12, min(end, offset + 8 + size), depth + 1)
        offset += 8 + size + (size & 1)
    return chunks


_EBML_IDS = [
    bytes.fromhex(h)
    for h in (
        "18538067",
        "1F43B675",
        "1654AE6B",
        "AE",
        "63A2",
        "A3",
        "A0",
        "1C53BB6B",
        "114D9B74",
        "1549A966",
        "E0",
        "B0",
        "BA",
        "E7",
        "D7",
        "86",
        "83",
        "2AD7B1",
        "1A45DFA3",
        "4286",
        "42F7",
    )
]


def _regions(data: bytes, kind: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """(header range, payload range) of a file of container ``kind`` (mp4, mkv, avi, ts)."""
    n = len(data)
    header, payload = (0, min(n, 1024)), (min(n, 1024), n)
    if kind == "mp4":
        for offset, size, box in mp4_boxes(data):
            if box == b"moov":
                header = (offset, offset + size)
            elif box == b"mdat":
                payload = (offset + 8, offset + size)
    elif kind == "mkv":
        cluster = data.find(bytes.fromhex("1F43B675"))
        if cluster > 0:
            header, payload = (0, cluster), (cluster, n)
    elif kind == "avi":
        for offset, size, chunk in riff_chunks(data):
            if chunk == b"LIST" and data[offset + 8 : offset + 12] == b"hdrl":
                header = (offset, offset + 8 + size)
            elif chunk == b"LIST" and data[offset + 8 : offset + 12] == b"movi":
                payload = (offset + 12, min(n, offset + 8 + size))
    elif kind == "ts":
        header, payload = (0, min(n, 3 * 188)), (min(n, 3 * 188), n)
    header = (min(header[0], n), min(header[1], n))
    payload = (min(payload[0], n), min(payload[1], n))
    if header[1] <= header[0]:
        header = (0, min(n, 1024))
    if payload[1] <= payload[0]:
        payload = (0, n)
    return header, payload


# -- mutations ----------------------------------------------------------------------------------
_ABSURD_32 = (0, 1, 7, 8, 9, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFF0)


def _absurd(rng: random.Random, current: int) -> int:
    choice = rng.choice(_ABSURD_32 + ("minus", "plus", "random", "double"))
    if choice == "minus":
        return max(0, current - rng.randint(1, 16))
    if choice == "plus":
        return min(0xFFFFFFFF, current + rng.randint(1, 4096))
    if choice == "double":
        return min(0xFFFFFFFF, current * 2 + 1)
    if choice == "random":
        return rng.getrandbits(32)
    return choice


def _truncate(data: bytearray, rng: random.Random, kind: str) -> str:
    cut = rng.choice([rng.randrange(1, len(data)), len(data) - rng.randint(1, 200), rng.randint(1, 600)])
    cut = min(max(1, cut), len(data) - 1)
    del data[cut:]
    return f"cut at {cut}"


def _flip(data: bytearray, rng: random.Random, span: tuple[int, int], bits: int) -> str:
    where = []
    for _ in range(bits):
        at = rng.randrange(span[0], span[1])
        data[at] ^= 1 << rng.randrange(8)
        where.append(at)
    return f"{bits} bits at {sorted(where)[:4]}"


def _flip_header(data: bytearray, rng: random.Random, kind: str) -> str:
    return _flip(data, rng, _regions(bytes(data), kind)[0], rng.choice([1, 1, 2, 4, 8]))


def _flip_payload(data: bytearray, rng: random.Random, kind: str) -> str:
    return _flip(data, rng, _regions(bytes(data), kind)[1], rng.choice([1, 2, 8, 32]))


def _zero_range(data: bytearray, rng: random.Random, kind: str) -> str:
    length = rng.choice([4, 16, 64, 188, 512, 2048])
    start = rng.randrange(0, max(1, len(data) - length))
    data[start : start + length] = bytes(min(length, len(data) - start))
    return f"{length} bytes at {start}"


def _duplicate_chunk(data: bytearray, rng: random.Random, kind: str) -> str:
    length = rng.choice([16, 188, 500, 1500])
    start = rng.randrange(0, max(1, len(data) - length))
    chunk = bytes(data[start : start + length])
    at = rng.randrange(0, len(data))
    data[at:at] = chunk
    return f"{length} bytes from {start} inserted at {at}"


def _shuffle_chunks(data: bytearray, rng: random.Random, kind: str) -> str:
    span = _regions(bytes(data), kind)[1] if rng.random() < 0.7 else (0, len(data))
    pieces = rng.choice([3, 4, 8])
    bounds = sorted(rng.sample(range(span[0] + 1, span[1]), pieces - 1)) if span[1] - span[0] > pieces else []
    edges = [span[0], *bounds, span[1]]
    chunks = [bytes(data[a:b]) for a, b in zip(edges, edges[1:])]
    rng.shuffle(chunks)
    data[span[0] : span[1]] = b"".join(chunks)
    return f"{len(chunks)} chunks of {span[0]}-{span[1]} shuffled"


def _structure_size(data: bytearray, rng: random.Random, kind: str) -> str:
    """An absurd size in a box / element / chunk header."""
    if kind == "mp4":
        boxes = mp4_boxes(bytes(data))
        if boxes:
            offset, size, box = rng.choice(boxes)
            value = _absurd(rng, size)
            struct.pack_into(">I", data, offset, value)
            return f"{box.decode('latin-1')} size {size} -> {value}"
    elif kind == "avi":
        chunks = riff_chunks(bytes(data))
        if chunks:
            offset, size, chunk = rng.choice(chunks)
            value = _absurd(rng, size)
            struct.pack_into("<I", data, offset + 4, value)
            return f"{chunk.decode('latin-1')} size {size} -> {value}"
    elif kind == "mkv":
        element = rng.choice(_EBML_IDS)
        spots = [i for i in range(len(data)) if data.startswith(element, i)][:64]
        if spots:
            at = rng.choice(spots) + len(element)
            if at < len(data):
                value = rng.choice([0x01, 0x80, 0xFF, 0x7F, 0x40, 0x08, rng.randrange(256)])
                data[at] = value
                return f"element {element.hex()} size byte -> {value:#04x}"
    elif kind == "ts":
        packet = rng.randrange(0, max(1, len(data) // 188)) * 188
        if packet + 8 <= len(data):  # adaptation field length / PES packet length
            at = packet + rng.choice([4, 5, 8, 9])
            data[at] = rng.choice([0x00, 0xB7, 0xFF, rng.randrange(256)])
            return f"transport packet at {packet}, byte {at - packet} changed"
    return _flip_header(data, rng, kind)


def _structure_count(data: bytearray, rng: random.Random, kind: str) -> str:
    """An absurd entry count (MP4 sample tables, AVI header counts and idx1 entries)."""
    if kind == "mp4":
        boxes = [(o, s, b) for o, s, b in mp4_boxes(bytes(data)) if _MP4_COUNTED.get(b)]
        if boxes:
            offset, size, box = rng.choice(boxes)
            at = offset + _MP4_COUNTED[box]
            if at + 4 <= offset + size:
                old = struct.unpack_from(">I", data, at)[0]
                value = _absurd(rng, old)
                struct.pack_into(">I", data, at, value)
                return f"{box.decode()} count {old} -> {value}"
    elif kind == "avi":
        chunks = riff_chunks(bytes(data))
        fields = []
        for offset, size, chunk in chunks:
            if chunk == b"avih":
                fields += [offset + 8 + 16, offset + 8 + 24, offset + 8 + 32, offset + 8 + 36]  # frames, streams, w, h
            elif chunk == b"strh":
                fields += [offset + 8 + 32, offset + 8 + 20, offset + 8 + 24]  # length, scale, rate
            elif chunk == b"idx1" and size >= 16:
                entry = offset + 8 + 16 * rng.randrange(size // 16)
                fields += [entry + 8, entry + 12]  # offset, size
        fields = [f for f in fields if f + 4 <= len(data)]
        if fields:
            at = rng.choice(fields)
            old = struct.unpack_from("<I", data, at)[0]
            value = _absurd(rng, old)
            struct.pack_into("<I", data, at, value)
            return f"field at {at}: {old} -> {value}"
    return _structure_size(data, rng, kind)


MUTATIONS: dict[str, Callable[[bytearray, random.Random, str], str]] = {
    "truncate": _truncate,
    "flip_header": _flip_header,
    "flip_payload": _flip_payload,
    "zero_range": _zero_range,
    "duplicate_chunk": _duplicate_chunk,
    "shuffle_chunks": _shuffle_chunks,
    "absurd_size": _structure_size,
    "absurd_count": _structure_count,
}
_KIND = {".mp4": "mp4", ".mkv": "mkv", ".webm": "mkv", ".avi": "avi", ".ts": "ts"}


@dataclass(frozen=True)
class Mutant:
    number: int
    seed_name: str
    mutation: str
    detail: str
    suffix: str
    data: bytes = field(repr=False)

    @property
    def name(self) -> str:
        return f"{self.number:05d}-{self.seed_name}-{self.mutation}{self.suffix}"


def mutants(seeds: dict[str, str], count: int, *, seed: int = 0, start: int = 0) -> Iterator[Mutant]:
    """``count`` mutants, numbered from ``start``: seeds and mutations taken in turn, each mutant's
    random choices drawn from (``seed``, its number) alone."""
    originals = {name: (open(path, "rb").read(), Path(path).suffix) for name, path in sorted(seeds.items())}
    names = sorted(originals)
    mutation_names = list(MUTATIONS)
    for number in range(start, start + count):
        seed_name = names[number % len(names)]
        mutation = mutation_names[(number // len(names)) % len(mutation_names)]
        original, suffix = originals[seed_name]
        rng = random.Random(f"vclip-fuzz:{seed}:{number}")
        data = bytearray(original)
        detail = MUTATIONS[mutation](data, rng, _KIND[suffix])
        if rng.random() < 0.15:  # now and then a second, different damage
            extra = rng.choice(mutation_names)
            detail += f"; {extra}: " + MUTATIONS[extra](data, rng, _KIND[suffix])
        if not data:
            data = bytearray(original[:1])
        if data == original:  # the damage happened to change nothing: one bit flip anywhere
            detail += "; unchanged, so " + _flip(data, rng, (0, len(data)), 1)
        yield Mutant(number, seed_name, mutation, detail, suffix, bytes(data))


# -- checks -------------------------------------------------------------------------------------
class BadResult(AssertionError):
    """A call succeeded with a wrongly shaped result, or failed without naming the file."""


def _expect_shape(what: str, array, shape: tuple) -> None:
    if tuple(array.shape) != shape or str(array.dtype) != "uint8":
        raise BadResult(f"{what}: {tuple(array.shape)} {array.dtype}, expected {shape} uint8")


def check_api(path: str, device: str = "cpu") -> None:
    """index_video, then get_frames and get_clips, each result's shape checked; raises what they raise."""
    index = vclip.index_video(path)
    try:
        check_index(index)
    except ValueError as error:
        raise BadResult(f"inconsistent index: {error}") from None
    decoder = vclip.VideoDecoder(path, device=device)
    width, height = index.orientation.displayed_size(index.width, index.height)  # frames come out as shown
    n, size = index.num_frames, (height, width, 3)
    frames = [0, n // 2, n - 1, -1]
    _expect_shape("get_frames", decoder.get_frames(frames).data, (len(frames),) + size)
    clips = decoder.get_clips(vclip.contiguous(4, starts="even", clips_per_video=2), seed=0)
    _expect_shape("get_clips", clips.data, (2, 4) + size)


def check_cli(path: str, device: str, folder: Path, api_outcome: str) -> None:
    """``vclip info`` and ``vclip sample`` in-process: exit 0 with the right output, or exit 1 naming
    the file; ``info`` must fail exactly when the API's index_video did."""
    from vclip.cli import main

    written_to = folder / (Path(path).name + ".npz")
    for command in (
        ["info", path],
        [
            "sample",
            path,
            "--mode",
            "contiguous",
            "--sequence-length",
            "4",
            "--out",
            str(written_to),
            "--device",
            device,
            "--seed",
            "0",
        ],
    ):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(command)
        if status not in (0, 1):
            raise BadResult(f"vclip {command[0]} exited {status}: {err.getvalue().strip()[-300:]}")
        if status == 1 and path not in err.getvalue():
            raise BadResult(f"vclip {command[0]} failed without naming the file: {err.getvalue().strip()[-300:]}")
        if command[0] == "info" and (status == 1) != (api_outcome.startswith("index:")):
            raise BadResult(f"vclip info exited {status} where the API gave {api_outcome}")
        if command[0] == "sample" and status == 0:
            with np.load(written_to) as written:
                clips = written["clips"]
            written_to.unlink()
            if clips.ndim != 5 or clips.shape[:2] != (1, 4) or clips.shape[-1] != 3:
                raise BadResult(f"vclip sample wrote clips of shape {clips.shape}")


def check_good(path: str, device: str) -> None:
    """A pristine video decodes exactly on ``device``: every frame's barcode is its number (and a
    GPU request is not quietly served by the CPU, which would hide a broken CUDA context)."""
    decoder = vclip.VideoDecoder(path, device=device)
    frames = decoder.get_frames(list(range(decoder.index.num_frames)))
    if device != "cpu" and frames.fell_back_to_cpu:
        raise BadResult(f"good video {path} was decoded on the CPU, not on {device}")
    data = host(frames.data)
    found = [read_barcode(frame) for frame in data]
    if found != list(range(decoder.index.num_frames)):
        raise BadResult(f"good video {path} decoded as frames {found}")


def _with_timeout(function: Callable[[], object], timeout: float) -> tuple[str, BaseException | None]:
    """("done", error or None) or ("hang", None) when ``function`` is still running after ``timeout``."""
    outcome: list = []

    def run() -> None:
        try:
            function()
            outcome.append(None)
        except BaseException as error:  # noqa: BLE001 - classified by the caller
            outcome.append(error)

    worker = threading.Thread(target=run, daemon=True, name="vclip-fuzz-case")
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return "hang", None
    return "done", outcome[0]


def _stage_of(error: BaseException) -> str:
    names = [frame.name for frame in traceback.extract_tb(error.__traceback__)]
    for stage in ("get_clips", "get_frames", "__init__", "index_video"):
        if stage in names:
            return {"__init__": "decoder", "index_video": "index"}.get(stage, stage)
    return "index"


@dataclass
class CampaignSummary:
    device: str
    cases: int = 0
    outcomes: Counter = field(default_factory=Counter)  # "ok", "index:CorruptVideoError"...
    by_mutation: dict = field(default_factory=dict)  # mutation -> Counter of ok / VideoError / failure
    cli_cases: int = 0
    good_checks: int = 0
    failures: list = field(default_factory=list)  # (mutant name, problem, details)
    seconds: float = 0.0

    def add(self, mutant: Mutant, outcome: str) -> None:
        self.cases += 1
        self.outcomes[outcome] += 1
        short = "ok" if outcome == "ok" else ("VideoError" if ":" in outcome else "FAILURE")
        self.by_mutation.setdefault(mutant.mutation, Counter())[short] += 1

    def report(self) -> str:
        lines = [
            f"vclip fuzz on {self.device}: {self.cases} mutants in {self.seconds:.1f} s, "
            f"{self.cli_cases} also through the CLI, {self.good_checks} good-video checks, "
            f"{len(self.failures)} failures"
        ]
        lines += [f"  {count:5d}  {outcome}" for outcome, count in sorted(self.outcomes.items(), key=lambda x: -x[1])]
        lines.append(
            "  by mutation: "
            + "; ".join(
                f"{name} " + "/".join(f"{k} {v}" for k, v in sorted(counts.items()))
                for name, counts in self.by_mutation.items()
            )
        )
        for name, problem, details in self.failures[:20]:
            lines.append(f"  FAILED {name}: {problem}\n{details}")
        return "\n".join(lines)


def run_campaign(
    folder: str | os.PathLike,
    *,
    count: int = 500,
    seed_names: Collection[str] | None = None,
    device: str = "cpu",
    seed: int = 0,
    check: Callable[[str, str], None] = check_api,
    timeout: float = 30.0,
    good_every: int = 50,
    cli_every: int = 0,
    keep: bool = False,
    log: Callable[[str], None] | None = None,
) -> CampaignSummary:
    """Make ``count`` mutants under ``folder`` (of the seeds named in ``seed_names``, default all)
    and run each through ``check(path, device)``.

    ``check`` decodes one file (default :func:`check_api`: index, get_frames, get_clips, shapes
    checked); it may raise only :class:`vclip.VideoError` naming the file. Every ``cli_every``-th
    mutant also goes through the CLI (0: never); every ``good_every`` mutants a pristine video must
    decode exactly. Mutant files are deleted after their case unless ``keep`` or they failed.
    """
    folder = Path(folder)
    seeds = make_seeds(folder / "seeds")
    if seed_names is not None:
        unknown = set(seed_names) - set(seeds)
        if unknown:
            raise ValueError(f"no seeds named {sorted(unknown)}; the seeds are {sorted(seeds)}")
        seeds = {name: path for name, path in seeds.items() if name in seed_names}
    work = folder / "mutants"
    work.mkdir(parents=True, exist_ok=True)
    summary = CampaignSummary(device=device)
    good = [path for name, path in sorted(seeds.items()) if name in (_GOOD_ON_CPU if device == "cpu" else _GOOD_ON_GPU)]
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # truncation and fallback warnings are expected here
        for mutant in mutants(seeds, count, seed=seed):
            path = str(work / mutant.name)
            Path(path).write_bytes(mutant.data)
            state, error = _with_timeout(lambda path=path: check(path, device), timeout)
            outcome, problem = _classify(path, state, error)
            if problem is None and cli_every and mutant.number % cli_every == 0:
                summary.cli_cases += 1
                state, cli_error = _with_timeout(
                    lambda path=path, outcome=outcome: check_cli(path, device, work, outcome), timeout
                )
                _, problem = _classify(path, state, cli_error)
                if problem is not None:
                    outcome, problem, error = "FAILURE cli", "cli: " + problem, cli_error
            if problem is not None:
                details = "".join(traceback.format_exception(error)) if error is not None else ""
                summary.failures.append((mutant.name, f"{problem} [{mutant.detail}]", details[-3000:]))
                outcome = outcome if outcome.startswith("FAILURE") else f"FAILURE {outcome}"
            summary.add(mutant, outcome)
            if problem is None and not keep:
                os.unlink(path)
            if good_every and good and (mutant.number + 1) % good_every == 0:
                summary.good_checks += 1
                pristine = good[(mutant.number // good_every) % len(good)]
                state, error = _with_timeout(lambda pristine=pristine: check_good(pristine, device), timeout)
                if state != "done" or error is not None:
                    summary.failures.append((f"good video after {mutant.name}", f"{state}: {error!r}", ""))
            if log and (mutant.number + 1) % 100 == 0:
                log(
                    f"{mutant.number + 1} mutants, {len(summary.failures)} failures, "
                    f"{time.perf_counter() - started:.1f} s"
                )
    summary.seconds = time.perf_counter() - started
    return summary


def _classify(path: str, state: str, error: BaseException | None) -> tuple[str, str | None]:
    """(outcome class, problem or None)."""
    if state == "hang":
        return "FAILURE hang", "still running after the timeout"
    if error is None:
        return "ok", None
    if isinstance(error, VideoError):
        outcome = f"{_stage_of(error)}:{type(error).__name__}"
        if error.path != path or path not in str(error):
            return f"FAILURE unnamed {type(error).__name__}", f"the error does not name the file: {error}"
        return outcome, None
    if isinstance(error, BadResult):
        return "FAILURE bad result", str(error)
    return f"FAILURE {type(error).__name__}", f"{type(error).__name__}: {error}"


def loader_epoch(paths: list[str], *, device: str = "cpu", timeout: float = 120.0) -> dict:
    """One epoch of ``vclip.ClipLoader(on_error="skip")`` over ``paths``: every batch shaped
    ``[4, 4, 48, 64, 3]`` (a resize makes mutants of any size share batches).

    Returns ``{"batches", "clips", "skipped"}``. Raises BadResult on a wrong shape or a hang, and
    whatever the loader raises.
    """
    result: dict = {"batches": 0, "clips": 0, "skipped": set()}

    def epoch() -> None:
        loader = vclip.ClipLoader(
            [(path, number) for number, path in enumerate(paths)],
            vclip.contiguous(4),
            transform=vclip.TransformSpec(resize=(HEIGHT, WIDTH)),
            device=device,
            batch_size=4,
            on_error="skip",
        )
        try:
            for batch in loader:
                shape = tuple(batch.data.shape)
                if shape[1:] != (4, HEIGHT, WIDTH, 3) or not 1 <= shape[0] <= 4:
                    raise BadResult(f"loader batch of shape {shape}")
                result["batches"] += 1
                result["clips"] += shape[0]
                result["skipped"].update(batch.skipped_videos)
        finally:
            close = getattr(loader, "close", None)
            if close is not None:
                close()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        state, error = _with_timeout(epoch, timeout)
    if state == "hang":
        raise BadResult(f"the loader epoch was still running after {timeout} s")
    if error is not None:
        raise error
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000, help="mutants to try (default 1000)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N (default cpu)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", help=f"comma-separated seed videos to mutate (default all: {', '.join(SEEDS)})")
    parser.add_argument("--out", help="folder for seeds and mutants, failing ones kept (default: a new temporary one)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per case before it counts as a hang")
    parser.add_argument("--good-every", type=int, default=50, help="check a good video every N mutants")
    parser.add_argument("--cli-every", type=int, default=8, help="also run the CLI on every N-th mutant (0: never)")
    parser.add_argument("--keep", action="store_true", help="keep every mutant file")
    args = parser.parse_args(argv)
    args.out = args.out or tempfile.mkdtemp(prefix="vclip-fuzz-")
    print(f"seeds and mutants in {args.out}", flush=True)
    summary = run_campaign(
        args.out,
        count=args.count,
        device=args.device,
        seed=args.seed,
        seed_names=args.seeds.split(",") if args.seeds else None,
        timeout=args.timeout,
        good_every=args.good_every,
        cli_every=args.cli_every,
        keep=args.keep,
        log=lambda line: print(line, flush=True),
    )
    print(summary.report())
    return 1 if summary.failures else 0


if __name__ == "__main__":
    sys.exit(main())
