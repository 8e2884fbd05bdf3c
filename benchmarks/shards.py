"""WebDataset shards: what reading videos from inside tar shards costs against reading them as files.

1. ``bytes``: bytes per clip. One long H.264 video (``--duration`` seconds at ``--size``, 30 fps,
   keyframe every ``--keyframe-interval``, 2 B-frames) written into a shard beside a short one, both
   the shard and the video as a separate file served by a local HTTP server that honours Range
   requests and counts the bytes it sends (tests/range_server.py). The member and the file are
   indexed once, then the same ``--clips`` clips of 16 frames at stride 2 are decoded from each
   (barcodes checked); per clip: bytes served and requests.
2. ``index``: indexing ``--members`` tiny synthetic videos across shards of ``--per-shard``
   members (``--distinct`` different videos, repeated under their own keys). Timed: the member
   tables from the ``.idx`` files and from the headers alone (local shards, bytes counted), and the
   catalog (``build_catalog``, every core) of the local shards and of the same shards over HTTP,
   where the server counts every byte: against the members' own bytes, what the demux pass needs.
3. ``train``: the train workload of benchmarks/loader.py (batches of 8 clips, 16 frames at stride 2,
   224x224 ImageNet-normalized) on ``--train-videos`` videos of the ``--set`` set written into shards
   of ``--shard-size``, read from ``--source`` (``s3``: a local S3-compatible server through s3fs;
   ``http``; ``local``: the shards on disk) against the same videos as local files, in
   ``--repeats`` alternated passes (medians); the first batches are checked equal. The S3 server is
   ``--s3-server``: ``alocals3`` (the default), which reads only the range each request asks for,
   as a real object store does, or ``moto``, which reads the whole object for every range request
   (so it cannot show what S3 costs). Also timed: one 256 kB range GET from the middle of a shard
   and of a file, the server's own cost per range.

    python benchmarks/shards.py --out results/ --parts bytes,index              # CPU: bytes per clip, indexing
    python benchmarks/shards.py --out results/ --parts train --device cuda --source s3 --set 1080p --train-videos 8

alocals3's server is a static executable inside its wheel (0.11.2, on PyPI for Python 3.12 and
later; any Python runs the executable). On a machine without network access, bring the wheel as a
file: fetch it where there is network,

    pip download alocals3==0.11.2 --no-deps --only-binary=:all: --python-version 3.12 \
        --platform manylinux_2_28_x86_64 -d wheels/

copy ``wheels/alocals3-0.11.2-cp312-abi3-manylinux_2_28_x86_64.whl`` over, and name it:

    python benchmarks/shards.py --out results/ --parts train --device cuda --source s3 --set 1080p \
        --train-videos 8 --alocals3 wheels/alocals3-0.11.2-cp312-abi3-manylinux_2_28_x86_64.whl

The benchmark unpacks the executable from the wheel into ``--work``, starts it on a free 127.0.0.1
port with its database and objects in ``--work`` (tests/alocals3_server.py), uploads the shards
with plain HTTP PUTs, points fsspec's ``s3`` at ``http://127.0.0.1:PORT/s3`` with path-style
addressing, and stops the server at the end. ``--alocals3`` also takes the executable itself;
without it, the installed alocals3 package's (or ``$VCLIP_ALOCALS3``'s) is used. The S3 source
needs the remote extra (s3fs); moto needs the test extra.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import make_video_set, save_results
from remote import _clips_per_second, _loader, _long_video

import vclip
from vclip._bytes import sources as _sources
from vclip._outputs.images import to_numpy
from vclip.synthetic import BARCODE_BITS, make_video, read_barcode
from vclip.webdataset import WebDatasetSource, write_shards

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from alocals3_server import alocals3_executable, alocals3_server
from range_server import range_server, s3_server

LENGTH, STRIDE = 16, 2


# -- 1. bytes per clip ------------------------------------------------------------------------------
def bytes_per_clip(video: Path, work: Path, clips: int, device: str) -> dict:
    """The same clips from the video as a file and as a member of a shard, over HTTP."""
    served = work / "served_bytes"
    shutil.rmtree(served, ignore_errors=True)
    served.mkdir(parents=True)
    shutil.copy(video, served / video.name)
    short = _long_video(work, 128, 96, 2, 30)
    write_shards([(video, 0), (short, 1)], served / "shard-{0}.tar", max_size="100GB")
    with range_server(served) as server:
        member = WebDatasetSource(server.url("shard-0.tar")).videos[0].path
        decoders = {}
        index_bytes = {}
        for name, source in (("file", server.url(video.name)), ("member", member)):
            server.reset_counts()
            decoders[name] = vclip.VideoDecoder(source, device=device)
            index_bytes[name] = server.bytes_sent
        index = decoders["file"].index
        starts = np.random.default_rng(0).integers(0, index.num_frames - (LENGTH - 1) * STRIDE, clips).tolist()
        per_clip: dict[str, list[dict]] = {"file": [], "member": []}
        for start in starts:
            frames = list(range(start, start + LENGTH * STRIDE, STRIDE))
            for name, decoder in decoders.items():
                server.reset_counts()
                found = [read_barcode(frame) for frame in to_numpy(decoder.get_frames(frames).data)]
                if found != [frame % 2**BARCODE_BITS for frame in frames]:
                    raise AssertionError(f"{name}: clip from {start}: frames {found}, not {frames}")
                per_clip[name].append({"start": start, "bytes": server.bytes_sent, "requests": len(server.requests)})
    sent = {name: [clip["bytes"] for clip in clips_] for name, clips_ in per_clip.items()}
    ratio = sum(sent["member"]) / sum(sent["file"])
    return {
        "file_bytes": video.stat().st_size, "frames": index.num_frames, "width": index.width, "height": index.height,
        "clip": {"frames": LENGTH, "stride": STRIDE, "count": clips},
        "index_pass_bytes": index_bytes,
        "bytes_per_clip_median": {name: statistics.median(values) for name, values in sent.items()},
        "requests_per_clip_median": {name: statistics.median(c["requests"] for c in per_clip[name])
                                     for name in per_clip},
        "member_over_file_bytes": ratio,
        "per_clip": per_clip,
    }


# -- 2. indexing many members -------------------------------------------------------------------------
class _CountingReads:
    """Counts the bytes read from local files through vclip's range readers (this process)."""

    def __init__(self):
        self.bytes = self.calls = 0
        self._original = _sources._LocalFileReader.read_ranges

    def __enter__(self):
        counter = self

        def read_ranges(reader, ranges):
            counter.calls += 1
            counter.bytes += sum(length for _, length in ranges)
            return counter._original(reader, ranges)

        _sources._LocalFileReader.read_ranges = read_ranges  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc):
        _sources._LocalFileReader.read_ranges = self._original  # type: ignore[method-assign]


def index_members(work: Path, members: int, per_shard: int, distinct: int, workers: int) -> dict:
    from vclip.catalog import build_catalog

    tiny = work / "tiny"
    tiny.mkdir(parents=True, exist_ok=True)
    files = [make_video(tiny / f"t{i:03d}.mp4", num_frames=8, width=32, height=32, keyframe_interval=8, seed=i)
             if not (tiny / f"t{i:03d}.mp4").exists() else str(tiny / f"t{i:03d}.mp4") for i in range(distinct)]
    shards = work / "index_shards"
    shutil.rmtree(shards, ignore_errors=True)
    started = time.perf_counter()
    written = write_shards([(files[i % distinct], i % 10) for i in range(members)], shards / "s-{000000}.tar",
                           max_count=per_shard, max_size="100GB")
    write_seconds = time.perf_counter() - started
    pattern = str(shards / f"s-{{000000..{len(written.shards) - 1:06d}}}.tar")
    video_bytes = 0
    results: dict = {"members": members, "shards": len(written.shards), "distinct_videos": distinct,
                     "shard_bytes": written.bytes, "write_seconds": write_seconds, "workers": workers}
    for way in ("member_index", "headers"):
        if way == "headers":
            for index_file in written.index_files:
                os.rename(index_file, index_file + ".away")
        _sources._readers.clear()
        with _CountingReads() as reads:
            began = time.perf_counter()
            source = WebDatasetSource(pattern)
            seconds = time.perf_counter() - began
        assert len(source.videos) == members and source.from_member_index == (len(written.shards) if way ==
                                                                                "member_index" else 0)
        video_bytes = sum(sample.video.size for sample in source.samples)
        results[f"table_from_{way}"] = {"seconds": seconds, "bytes_read": reads.bytes, "reads": reads.calls}
    for index_file in written.index_files:
        os.rename(index_file + ".away", index_file)
    results["video_member_bytes"] = video_bytes
    began = time.perf_counter()
    built = build_catalog(pattern, work / "index_local.parquet", workers=workers, incremental=False, progress=False)
    results["catalog_local"] = {"seconds": time.perf_counter() - began, "unusable": len(built.unusable),
                                "members_per_second": members / (time.perf_counter() - began)}
    with range_server(shards) as server:
        urls = server.url(f"s-{{000000..{len(written.shards) - 1:06d}}}.tar")
        began = time.perf_counter()
        built = build_catalog(urls, work / "index_http.parquet", workers=workers, incremental=False, progress=False)
        seconds = time.perf_counter() - began
        methods = [method for method, *_ in server.requests]
        results["catalog_http"] = {
            "seconds": seconds, "unusable": len(built.unusable), "members_per_second": members / seconds,
            "bytes_served": server.bytes_sent, "over_video_member_bytes": server.bytes_sent / video_bytes,
            "requests": {"GET": methods.count("GET"), "HEAD": methods.count("HEAD")},
        }
    return results


# -- 3. the train workload from shards ------------------------------------------------------------------
def train_from_shards(work: Path, video_set: str, count: int, shard_size: str, source: str, device: str,
                      batches: int, warmup: int, processes: int, repeats: int, s3_server_kind: str = "alocals3",
                      alocals3: str | None = None) -> dict:
    paths = make_video_set(work, video_set, count=count)
    shards = work / f"train_shards_{video_set}_{count}"
    shutil.rmtree(shards, ignore_errors=True)
    written = write_shards([(path, 0) for path in paths], shards / "shard-{000000}.tar", max_size=shard_size)
    names = [Path(shard).name for shard in written.shards]
    pattern = f"shard-{{000000..{len(names) - 1:06d}}}.tar"

    def measure(members: list[str]) -> dict:
        total = batches + warmup
        rates: dict[str, list[float]] = {"shards": [], "files": []}
        firsts = {}
        for _ in range(repeats):  # alternated, so that a busy moment of the machine hits both
            for name, videos in (("shards", members), ("files", paths)):
                rate, firsts[name] = _clips_per_second(_loader(videos, device, total, processes), batches, warmup,
                                                       device)
                rates[name].append(rate)
        if firsts["shards"][0].tolist() != firsts["files"][0].tolist() or not np.allclose(firsts["shards"][1],
                                                                                           firsts["files"][1]):
            raise AssertionError("the first batch from the shards differs from the one from the files")
        shard_rate, file_rate = statistics.median(rates["shards"]), statistics.median(rates["files"])
        rate = {"shards": shard_rate, "files": file_rate, "shards_over_files": shard_rate / file_rate}
        return {"runs_clips_per_second": rates, "clips_per_second": rate}

    facts = {"set": video_set, "videos": len(paths), "shards": len(names), "shard_bytes": written.bytes,
             "source": source, "batches": batches, "warmup_batches": warmup, "decode_processes": processes,
             "repeats": repeats}
    if source == "s3":
        facts["s3_server"] = s3_server_kind
    if source == "local":
        return {**facts, **measure([video.path for video in WebDatasetSource(str(shards / pattern)).videos])}
    if source == "http":
        with range_server(shards) as server:
            return {**facts, **measure([video.path for video in WebDatasetSource(server.url(pattern)).videos])}
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ[name] = value
    if s3_server_kind == "alocals3":
        executable = alocals3_executable(alocals3, folder=work)
        if executable is None:
            raise SystemExit("--s3-server alocals3: name its wheel or executable with --alocals3 (see the docstring)")
        with alocals3_server(executable, work / "alocals3") as server:
            _point_fsspec_at(server.fsspec_options())
            server.create_bucket("shards")
            for file in sorted(shards.iterdir()):
                server.put("shards", f"train/{file.name}", file)
            server.put("shards", "files/video.mp4", paths[0])
            members = [video.path for video in WebDatasetSource(f"s3://shards/train/{pattern}").videos]

            def range_get(key: str, start: int, length: int) -> bytes:
                return server.get_range("shards", key, start, length)

            sizes = {key: os.path.getsize(file) for key, file in ((f"train/{names[0]}", shards / names[0]),
                                                                  ("files/video.mp4", paths[0]))}
            return {**facts, "server_range_get_seconds": {
                "shard": _range_get_seconds(range_get, f"train/{names[0]}", sizes[f"train/{names[0]}"]),
                "file": _range_get_seconds(range_get, "files/video.mp4", sizes["files/video.mp4"])},
                **measure(members)}
    import boto3

    with s3_server() as endpoint:
        _point_fsspec_at({"endpoint_url": endpoint})
        client = boto3.client("s3", endpoint_url=endpoint)
        client.create_bucket(Bucket="shards")
        for file in sorted(shards.iterdir()):
            client.upload_file(str(file), "shards", f"train/{file.name}")
        members = [video.path for video in WebDatasetSource(f"s3://shards/train/{pattern}").videos]
        client.upload_file(paths[0], "shards", "files/video.mp4")

        def range_get(key: str, start: int, length: int) -> bytes:
            answer = client.get_object(Bucket="shards", Key=key, Range=f"bytes={start}-{start + length - 1}")
            return answer["Body"].read()

        sizes = {key: client.head_object(Bucket="shards", Key=key)["ContentLength"]
                 for key in (f"train/{names[0]}", "files/video.mp4")}
        return {**facts, "server_range_get_seconds": {
            "shard": _range_get_seconds(range_get, f"train/{names[0]}", sizes[f"train/{names[0]}"]),
            "file": _range_get_seconds(range_get, "files/video.mp4", sizes["files/video.mp4"])},
            **measure(members)}


def _point_fsspec_at(options: dict) -> None:
    """fsspec's ``s3`` options for this process and, through the environment, for decode processes."""
    import json

    import fsspec

    os.environ["FSSPEC_S3"] = json.dumps(options)
    fsspec.config.conf["s3"] = dict(options)


def _range_get_seconds(range_get, key: str, size: int, requests: int = 20, length: int = 256 << 10) -> float:
    """Median seconds of one GET of ``length`` bytes from the middle of object ``key`` (``size``
    bytes) with ``range_get(key, start, length)``: what the server itself costs per range read
    (moto reads the whole object for each)."""
    start = max(0, size // 2 - length)
    times = []
    for _ in range(requests):
        began = time.perf_counter()
        if len(range_get(key, start, length)) != min(length, size - start):
            raise AssertionError(f"{key}: the range GET answered another length")
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for shards.json")
    parser.add_argument("--parts", default="bytes,index", help="bytes, index, train (default bytes,index)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    parser.add_argument("--work", default=None, help="folder for the generated videos and shards (default: a temp one)")
    parser.add_argument("--size", default="640x360", help="bytes: the long video's WIDTHxHEIGHT (default 640x360)")
    parser.add_argument("--duration", type=int, default=120, help="bytes: the long video's seconds (default 120)")
    parser.add_argument("--keyframe-interval", type=int, default=60, help="bytes: frames per keyframe (default 60)")
    parser.add_argument("--clips", type=int, default=50, help="bytes: clips decoded from each (default 50)")
    parser.add_argument("--members", type=int, default=10_000, help="index: video members (default 10,000)")
    parser.add_argument("--per-shard", type=int, default=1000, help="index: members per shard (default 1,000)")
    parser.add_argument("--distinct", type=int, default=100, help="index: different tiny videos (default 100)")
    parser.add_argument("--workers", type=int, default=None, help="index: catalog processes (default every core)")
    parser.add_argument("--set", default="360p", help="train: video set, 360p or 1080p (default 360p)")
    parser.add_argument("--train-videos", type=int, default=8, help="train: videos of the set (default 8)")
    parser.add_argument("--shard-size", default="1GB", help="train: largest shard (default 1GB)")
    parser.add_argument("--source", default="s3", choices=("s3", "http", "local"), help="train: where the shards are")
    parser.add_argument("--s3-server", default="alocals3", choices=("alocals3", "moto"),
                        help="train: the local S3 server (default alocals3, which reads only the ranges asked for)")
    parser.add_argument("--alocals3", default=None, metavar="WHEEL_OR_EXECUTABLE",
                        help="train: alocals3's wheel (its server is unpacked from it) or server executable "
                             "(default: the installed alocals3 package's, or $VCLIP_ALOCALS3)")
    parser.add_argument("--batches", type=int, default=10, help="train: timed batches (default 10)")
    parser.add_argument("--warmup", type=int, default=2, help="train: batches before timing (default 2)")
    parser.add_argument("--repeats", type=int, default=3, help="train: alternated passes (default 3)")
    parser.add_argument("--processes", type=int, default=0, help="train: decode_processes (default 0)")
    args = parser.parse_args()
    parts = args.parts.split(",")
    if not parts or set(parts) - {"bytes", "index", "train"}:
        parser.error(f"--parts takes bytes, index and train, not {args.parts!r}")
    work = Path(args.work or tempfile.mkdtemp(prefix="vclip-shards-"))
    work.mkdir(parents=True, exist_ok=True)
    results: dict = {"device": args.device}
    if "bytes" in parts:
        width, height = map(int, args.size.lower().split("x"))
        video = _long_video(work, width, height, args.duration, args.keyframe_interval)
        found = bytes_per_clip(video, work, args.clips, args.device)
        median = found["bytes_per_clip_median"]
        print(f"bytes per clip over HTTP: member {median['member'] / 1e3:.0f} kB, file {median['file'] / 1e3:.0f} kB "
              f"(median); member/file over all clips {found['member_over_file_bytes']:.4f}")
        results["bytes_per_clip"] = found
    if "index" in parts:
        found = index_members(work, args.members, args.per_shard, args.distinct, args.workers or os.cpu_count() or 1)
        http, listed, scanned = found["catalog_http"], found["table_from_member_index"], found["table_from_headers"]
        print(f"index {found['members']} members in {found['shards']} shards: tables from .idx "
              f"{listed['seconds']:.2f} s ({listed['bytes_read']} bytes), from headers {scanned['seconds']:.2f} s "
              f"({scanned['bytes_read']} bytes); catalog local {found['catalog_local']['seconds']:.1f} s, "
              f"over HTTP {http['seconds']:.1f} s reading {http['over_video_member_bytes']:.3f}x the members' bytes")
        results["index"] = found
    if "train" in parts:
        found = train_from_shards(work, args.set, args.train_videos, args.shard_size, args.source, args.device,
                                  args.batches, args.warmup, args.processes, args.repeats, args.s3_server,
                                  args.alocals3)
        rates = found["clips_per_second"]
        print(f"train from {args.source} shards {rates['shards']:.1f} clips/s, files {rates['files']:.1f} clips/s "
              f"({rates['shards_over_files']:.2f}x)" + (
                  "; the server's 256 kB range GET: {shard:.4f} s from the shard, {file:.4f} s from a file".format(
                      **found["server_range_get_seconds"]) if "server_range_get_seconds" in found else ""))
        results["train"] = found
    name = "shards" if parts == ["bytes", "index"] else "shards_" + "_".join(parts) + (
        f"_{args.source}" if "train" in parts else "") + (
        f"_{args.s3_server}" if "train" in parts and args.source == "s3" else "")
    print(save_results(name, results, args.out))


if __name__ == "__main__":
    main()
