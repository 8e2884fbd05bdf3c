"""Videos that are not local files: bytes, file objects, HTTP(S) and S3 URLs, against real servers
started on localhost (tests/range_server.py, tests/alocals3_server.py) that count the bytes they send
or read."""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import time

import numpy as np
import pytest
from alocals3_server import ALOCALS3_VARIABLE, alocals3_executable, alocals3_server
from helpers import require_extra
from range_server import free_port, range_server, s3_bucket

import vclip
from vclip._bytes.remote import RemoteReads, coalesce, remote_reads
from vclip.cli import main
from vclip.errors import NotAVideoError, RemoteReadWarning, UnreadableVideoError, VideoNotFoundError
from vclip.synthetic import make_video, read_barcode

LONG_FRAMES, KEYFRAME_INTERVAL = 600, 30


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A served folder: a 600-frame video (keyframe every 30), a short one, a Matroska and a TS one."""
    root = tmp_path_factory.mktemp("served")
    make_video(root / "long.mp4", num_frames=LONG_FRAMES, width=192, height=112, keyframe_interval=KEYFRAME_INTERVAL)
    make_video(root / "short.mp4", num_frames=40, width=128, height=96, keyframe_interval=16, seed=1)
    make_video(root / "short.mkv", num_frames=40, width=128, height=96, keyframe_interval=16, seed=2)
    make_video(root / "short.ts", num_frames=40, width=128, height=96, keyframe_interval=16, seed=3)
    (root / "notes.mp4").write_bytes(b"this is text, not a video\n" * 100)
    return root


@pytest.fixture(scope="module")
def http(folder):
    with range_server(folder) as server:
        yield server


def barcodes(frames) -> list[int]:
    return [read_barcode(frame) for frame in np.asarray(frames)]


def local_frames(path, indices) -> np.ndarray:
    return vclip.VideoDecoder(path, device="cpu").get_frames(indices).data


@pytest.mark.parametrize("name", ["long.mp4", "short.mkv", "short.ts"])
def test_http_frames_equal_the_local_files(http, folder, name):
    indices = [0, 17, 39, 38, 5] if name.startswith("short") else [599, 0, 301, 302, 303, 45]
    decoder = vclip.VideoDecoder(http.url(name), device="cpu")
    assert decoder.index.path == http.url(name)
    assert decoder.index.num_frames == vclip.index_video(folder / name).num_frames
    frames = decoder.get_frames(indices)
    assert barcodes(frames.data) == indices
    np.testing.assert_array_equal(frames.data, local_frames(folder / name, indices))


def test_a_clip_reads_only_the_byte_ranges_of_its_packets(http, folder):
    url, size = http.url("long.mp4"), os.path.getsize(folder / "long.mp4")
    decoder = vclip.VideoDecoder(url, device="cpu")  # the indexing pass reads the file once
    http.reset_counts()
    clip = decoder.get_frames([310, 311, 312, 313])
    assert barcodes(clip.data) == [310, 311, 312, 313]
    assert 0 < http.bytes_sent < 0.15 * size, (http.bytes_sent, size)
    first, last = decoder.index.decode_start_packet(310), int(decoder.index.frame_packet[313])
    needed = int(decoder.index.packet_size[first : last + 1].sum())
    assert http.bytes_sent < needed + (256 << 10)  # the packets, plus at most a coalesced gap
    assert all(method == "GET" and status == 206 for method, _, _, status in http.requests), http.requests


def test_the_index_cache_keys_urls_by_metadata(http, folder, tmp_path, monkeypatch):
    shutil.copy(folder / "short.mp4", folder / "changing.mp4")
    url = http.url("changing.mp4")
    first = vclip.index_video(url, cache_dir=tmp_path)
    http.reset_counts()
    assert vclip.index_video(url, cache_dir=tmp_path) is first
    assert http.requests == []  # checked less than 30 s ago: no request
    vclip.clear_index_cache()
    again = vclip.index_video(url, cache_dir=tmp_path)  # from the disk cache: one HEAD, no content read
    assert again.num_frames == first.num_frames
    assert [(method, status) for method, _, _, status in http.requests] == [("HEAD", 200)]
    monkeypatch.setattr("vclip._index.lookup._REMOTE_TRUST_SECONDS", 0.0)
    http.reset_counts()
    assert vclip.index_video(url, cache_dir=tmp_path) is again  # metadata unchanged: the same entry
    assert [method for method, *_ in http.requests] == ["HEAD"]
    make_video(folder / "changing.mp4", num_frames=24, width=128, height=96, keyframe_interval=8)
    assert vclip.index_video(url, cache_dir=tmp_path).num_frames == 24  # new ETag and size: indexed again


def test_transient_server_errors_are_retried(http, folder):
    indices = [0, 20, 21, 39]
    http.reset_counts()
    frames = vclip.VideoDecoder(http.url("flaky/short.mp4"), device="cpu").get_frames(indices)
    assert barcodes(frames.data) == indices
    np.testing.assert_array_equal(frames.data, local_frames(folder / "short.mp4", indices))
    statuses = [status for _, _, _, status in http.requests]
    assert statuses.count(503) >= 2 and statuses.count(206) >= 2


def test_a_server_that_keeps_failing_is_reported_after_the_retries(http):
    http.reset_counts()
    with pytest.raises(UnreadableVideoError, match="HTTP 503.*still failing after 4 tries") as caught:
        vclip.index_video(http.url("down/short.mp4"))
    assert caught.value.path == http.url("down/short.mp4")
    assert len(http.requests) >= 4


def test_nearby_ranges_are_fetched_in_one_request():
    ranges = [(5000, 100), (0, 1000), (1000, 10), (300_000, 5), (1 << 30, 7)]
    assert coalesce(ranges, gap=2048) == [(0, 1010), (5000, 5100), (300_000, 300_005), (1 << 30, (1 << 30) + 7)]
    assert coalesce(ranges, gap=1 << 20) == [(0, 300_005), (1 << 30, (1 << 30) + 7)]
    assert coalesce([(0, 600), (500, 600)], gap=0, limit=1000) == [(0, 1100)]  # overlapping: always one
    assert coalesce([(0, 600), (700, 600)], gap=200, limit=1000) == [(0, 600), (700, 1300)]  # over the limit


def test_a_missing_url_is_video_not_found(http):
    url = http.url("nowhere.mp4")
    with pytest.raises(VideoNotFoundError, match="not found") as caught:
        vclip.VideoDecoder(url, device="cpu")
    assert caught.value.path == url and url in str(caught.value)


def test_access_denied_and_not_a_video_name_the_url(http):
    with pytest.raises(UnreadableVideoError, match="access denied") as denied:
        vclip.index_video(http.url("secret/long.mp4"))
    assert denied.value.path == http.url("secret/long.mp4")
    with pytest.raises(NotAVideoError, match="not a video container") as text:
        vclip.index_video(http.url("notes.mp4"))
    assert text.value.path == http.url("notes.mp4")


def test_unknown_protocol_is_an_unreadable_video():
    with pytest.raises(UnreadableVideoError, match="nosuchprotocol://x/v.mp4"):
        vclip.index_video("nosuchprotocol://x/v.mp4")


@pytest.mark.parametrize("kind", ["bytes", "file object"])
def test_bytes_and_file_objects(folder, kind):
    data = (folder / "short.mkv").read_bytes()
    source = data if kind == "bytes" else io.BytesIO(data)
    decoder = vclip.VideoDecoder(source, device="cpu")
    assert decoder.index.path.startswith("<bytes:" if kind == "bytes" else "<file:")
    clips = decoder.get_clips(vclip.strided(4, 3, clips_per_video=2), seed=5)
    local = vclip.VideoDecoder(folder / "short.mkv", device="cpu")
    expected = local.get_clips(vclip.strided(4, 3, clips_per_video=2), seed=5)
    assert clips.frame_indices.tolist() == expected.frame_indices.tolist()
    assert [barcodes(clip) for clip in clips.data] == clips.frame_indices.tolist()
    np.testing.assert_array_equal(clips.data, expected.data)


def test_clip_loader_takes_urls(http, folder):
    names = ["short.mp4", "short.mkv", "short.ts"]
    options = {"device": "cpu", "batch_size": 3, "num_threads": 2, "seed": 3}
    sampler = vclip.strided(4, 2, clips_per_video=1)
    remote = list(vclip.ClipLoader([(http.url(n), i) for i, n in enumerate(names)], sampler, **options))
    local = list(vclip.ClipLoader([(folder / n, i) for i, n in enumerate(names)], sampler, **options))
    assert len(remote) == len(local) == 1
    assert remote[0].frame_indices.tolist() == local[0].frame_indices.tolist()
    assert remote[0].labels.tolist() == local[0].labels.tolist()
    assert np.array_equal(remote[0].data.numpy(), local[0].data.numpy())


def test_cli_info_and_sample_take_urls(http, folder, tmp_path, capsys):
    url = http.url("short.mkv")
    assert main(["info", "--json", url]) == 0
    report = json.loads(capsys.readouterr().out)[0]
    assert report["file"] == url and report["video"]["num_frames"] == 40
    listing = tmp_path / "videos.txt"
    listing.write_text(f"{http.url('short.mp4')},0\n{url} 1\n")
    out = tmp_path / "clips.npz"
    assert (
        main(
            [
                "sample",
                str(listing),
                "--mode",
                "indexed",
                "--frame-indices",
                "3,30",
                "--out",
                str(out),
                "--device",
                "cpu",
                "--no-progress",
            ]
        )
        == 0
    ), capsys.readouterr().err
    with np.load(out) as stored:
        assert stored["paths"].tolist() == [http.url("short.mp4"), url]
        assert stored["video_ids"].tolist() == [0, 1]
        assert [barcodes(clip) for clip in stored["clips"]] == [[3, 30], [3, 30]]


@pytest.mark.gpu
def test_http_frames_on_the_gpu_equal_the_local_files(http, folder):
    import cupy

    indices = [599, 0, 301, 302, 45]
    remote = vclip.VideoDecoder(http.url("long.mp4"), device="cuda").get_frames(indices)
    local = vclip.VideoDecoder(folder / "long.mp4", device="cuda").get_frames(indices)
    assert remote.device.startswith("cuda") and not remote.fell_back_to_cpu
    data = cupy.asnumpy(remote.data)
    assert barcodes(data) == indices
    np.testing.assert_array_equal(data, cupy.asnumpy(local.data))


# -- S3 (moto's server) ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def s3(folder):
    """A bucket ``videos`` on a local S3-compatible server holding the served folder's videos."""
    with s3_bucket("videos", {name: folder / name for name in ("long.mp4", "short.mkv")}) as endpoint:
        yield endpoint


def test_s3_frames_equal_the_local_files(s3, folder):
    indices = [598, 0, 300, 301, 31]
    decoder = vclip.VideoDecoder("s3://videos/long.mp4", device="cpu")
    assert decoder.index.num_frames == LONG_FRAMES
    frames = decoder.get_frames(indices)
    assert barcodes(frames.data) == indices
    np.testing.assert_array_equal(frames.data, local_frames(folder / "long.mp4", indices))


def test_decode_processes_read_s3_with_the_fsspec_configuration_set_in_memory(s3, folder):
    """The bucket's endpoint is only in this process's ``fsspec.config.conf``: the loader's decode
    processes (fresh interpreters) take it over and read the same clips as the threads."""
    import fsspec.config

    assert fsspec.config.conf["s3"]["endpoint_url"] == s3 and "FSSPEC_S3" not in os.environ
    batches = {}
    for processes in (0, 1):
        loader = vclip.ClipLoader([("s3://videos/long.mp4", 0)], vclip.strided(8, 3, clips_per_video=4),
                                  batch_size=2, device="cpu", seed=1, decode_processes=processes)
        try:
            assert loader.decode_processes == processes
            batches[processes] = [(batch.frame_indices.numpy(), batch.data.numpy()) for batch in loader]
        finally:
            loader.close()
    assert len(batches[1]) == 2
    for (indices, data), (indices_threads, data_threads) in zip(batches[1], batches[0]):
        assert np.array_equal(indices, indices_threads) and np.array_equal(data, data_threads)
        assert [barcodes(clip) for clip in data] == indices.tolist()


def test_s3_missing_objects_and_buckets(s3):
    for url in ("s3://videos/nothing.mp4", "s3://no-such-bucket/v.mp4"):
        with pytest.raises(VideoNotFoundError) as caught:
            vclip.VideoDecoder(url, device="cpu")
        assert caught.value.path == url


# -- S3 from a server that reads only the ranges asked for (alocals3) ------------------------------
PADDING_BYTES = 48 << 20  # a large member before the video in the shard: a range read never touches it


@pytest.fixture(scope="module")
def alocals3(folder, tmp_path_factory):
    """alocals3's S3 server (started here, on 127.0.0.1, from its wheel's executable) with a bucket
    ``videos``: ``long.mp4``, ``short.mkv`` and ``big.tar``, a shard whose ``long.mp4`` follows
    48 MiB of other bytes."""
    work = tmp_path_factory.mktemp("alocals3")
    executable = alocals3_executable(folder=work)
    if executable is None:
        pytest.skip(f"alocals3's server is not installed (pip install '.[test]' on Python 3.12 or later) and "
                    f"${ALOCALS3_VARIABLE} names neither its executable nor its wheel")
    require_extra("s3fs")
    import fsspec

    shard = work / "big.tar"
    with tarfile.open(shard, "w") as tar:
        padding = work / "padding.bin"
        padding.write_bytes(np.random.default_rng(0).integers(0, 256, PADDING_BYTES, dtype=np.uint8).tobytes())
        tar.add(padding, "padding.bin")
        tar.add(folder / "long.mp4", "long.mp4")
    with alocals3_server(executable, work / "server") as server, pytest.MonkeyPatch.context() as patch:
        server.create_bucket("videos")
        for name, file in (("long.mp4", folder / "long.mp4"), ("short.mkv", folder / "short.mkv"), ("big.tar", shard)):
            server.put("videos", name, file)
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            patch.setenv(name, "testing")
        patch.setitem(fsspec.config.conf, "s3", server.fsspec_options())
        vclip.clear_index_cache()  # the moto tests' indexes of the same URLs
        yield server
    vclip.clear_index_cache()


@pytest.mark.parametrize("name", ["long.mp4", "short.mkv"])
def test_s3_frames_from_a_server_that_reads_ranges_equal_the_local_files(alocals3, folder, name):
    decoder = vclip.VideoDecoder(f"s3://videos/{name}", device="cpu")
    indices = [decoder.index.num_frames - 1, 0, decoder.index.num_frames // 2, 31]
    frames = decoder.get_frames(indices)
    assert barcodes(frames.data) == indices
    np.testing.assert_array_equal(frames.data, local_frames(folder / name, indices))


def test_a_member_after_48_mib_of_a_shard_on_s3_costs_only_its_ranges(alocals3, folder):
    """The server reads (its own /proc/PID/io) and the client receives only the member's ranges: a
    few MB of a 49 MB object, where a server that reads the whole object for each range request
    (moto's) reads 48 MiB more per request."""
    size = (folder / "long.mp4").stat().st_size
    server_before, client_before = alocals3.bytes_read(), remote_reads()
    decoder = vclip.VideoDecoder("s3://videos/big.tar#long.mp4", device="cpu")
    indices = [598, 0, 300, 301]
    frames = decoder.get_frames(indices)
    assert barcodes(frames.data) == indices
    np.testing.assert_array_equal(frames.data, local_frames(folder / "long.mp4", indices))
    received = sum(reads.bytes_read for reads in remote_reads(since=client_before).values())
    server_read = alocals3.bytes_read() - server_before
    assert size <= received < 3 * size  # the index pass reads the member once, the clip a few of its GOPs
    assert server_read < 3 * size + (1 << 20) and server_read < PADDING_BYTES // 4, (server_read, received)


# -- dead and misbehaving servers (issue 25, item 3) ----------------------------------------------
_OPTION_VARIABLES = ("VCLIP_REMOTE_CONNECT_TIMEOUT", "VCLIP_REMOTE_READ_TIMEOUT", "VCLIP_REMOTE_ATTEMPTS",
                     "VCLIP_REMOTE_SPILL_LIMIT")


@pytest.fixture
def remote_options():
    """vclip.set_remote_options, with the environment variables it sets restored afterwards."""
    saved = {variable: os.environ.pop(variable, None) for variable in _OPTION_VARIABLES}
    yield vclip.set_remote_options
    for variable, value in saved.items():
        os.environ.pop(variable, None)
        if value is not None:
            os.environ[variable] = value


def test_remote_options_are_checked_and_kept_in_the_environment(remote_options):
    assert remote_options() == vclip.RemoteOptions(10.0, 30.0, 4, 2 << 30)
    options = remote_options(read_timeout=2.5, attempts=2, spill_limit="1MiB")
    assert options == vclip.RemoteOptions(connect_timeout=10.0, read_timeout=2.5, attempts=2, spill_limit=1 << 20)
    assert os.environ["VCLIP_REMOTE_READ_TIMEOUT"] == "2.5" and os.environ["VCLIP_REMOTE_SPILL_LIMIT"] == "1048576"
    with pytest.raises(vclip.ArgumentError, match=r"attempts \(0\) must be an integer >= 1"):
        remote_options(attempts=0)
    with pytest.raises(vclip.ArgumentError, match=r"connect_timeout \(-1\) must be a number > 0"):
        remote_options(connect_timeout=-1)
    os.environ["VCLIP_REMOTE_ATTEMPTS"] = "many"
    with pytest.raises(vclip.ArgumentError, match=r"environment variable VCLIP_REMOTE_ATTEMPTS: attempts \('many'\)"):
        remote_options()


def test_a_server_that_never_answers_times_out(http, remote_options):
    """A stalled server fails after attempts x read_timeout (plus backoffs of 0.1, 0.2 s...): one
    HEAD per try, not fsspec's HEAD and then GET, which made it 242 s with the defaults."""
    remote_options(read_timeout=0.3, attempts=2)
    url = http.url("hang/short.mp4")
    http.reset_counts()
    started = time.perf_counter()
    with pytest.raises(UnreadableVideoError, match=r"timed out waiting for the server's answer \(read_timeout 0.3 s\), "
                                                   r"still failing after 2 tries") as caught:
        vclip.VideoDecoder(url, device="cpu")
    assert caught.value.path == url
    assert 0.6 <= time.perf_counter() - started < 3
    assert [method for method, *_ in http.requests] == ["HEAD"] * 2


def test_a_refused_connection_is_retried_then_unreadable_not_missing(remote_options):
    url = f"http://127.0.0.1:{free_port()}/short.mp4"  # nothing listens there
    with pytest.raises(UnreadableVideoError, match=r"cannot connect to the server .*still failing after 4 tries"):
        vclip.VideoDecoder(url, device="cpu")
    assert remote_reads([url])[url] == RemoteReads(requests=4, retries=3)


def test_missing_and_denied_objects_are_reported_at_once(http):
    for name, error in (("nowhere.mp4", VideoNotFoundError), ("secret/short.mp4", UnreadableVideoError)):
        url, before = http.url(name), remote_reads()
        with pytest.raises(error, match="HTTP 404" if error is VideoNotFoundError else "access denied"):
            vclip.index_video(url)
        assert remote_reads([url], since=before)[url].requests == 1


def test_truncated_bodies_are_retried(http, folder):
    indices = [0, 20, 39]
    frames = vclip.VideoDecoder(http.url("cut-once/short.mp4"), device="cpu").get_frames(indices)
    np.testing.assert_array_equal(frames.data, local_frames(folder / "short.mp4", indices))
    url = http.url("cut/short.mp4")
    with pytest.raises(UnreadableVideoError, match=r"truncated body.*still failing after 4 tries"):
        vclip.VideoDecoder(url, device="cpu")


def test_a_busy_server_is_asked_again_after_its_retry_after(http, folder):
    decoder = vclip.VideoDecoder(http.url("busy/short.mp4"), device="cpu")
    http.reset_counts()
    started = time.perf_counter()
    frames = decoder.get_frames([0])  # one range: 429 with Retry-After: 1, then 206
    assert time.perf_counter() - started >= 1.0  # not the 0.1 s of the first backoff
    assert [status for *_, status in http.requests] == [429, 206]
    np.testing.assert_array_equal(frames.data, local_frames(folder / "short.mp4", [0]))


def test_a_missing_object_of_a_protocol_without_status_is_not_called_http_404():
    with pytest.raises(VideoNotFoundError, match=r"memory://nothing.mp4: not found \(no such object\)$"):
        vclip.index_video("memory://nothing.mp4")


def test_a_redirect_loop_is_reported_as_such(http):
    url, before = http.url("loop/short.mp4"), remote_reads()
    with pytest.raises(UnreadableVideoError, match="too many redirects"):
        vclip.index_video(url)
    assert remote_reads([url], since=before)[url].requests == 1  # not retried


@pytest.mark.parametrize("name", ["long.mp4", "short.mp4"])
def test_a_server_that_ignores_range_is_read_once_into_a_spill_file(http, folder, name):
    """short.mp4 is smaller than the first read (64 KiB), which so asked for the whole file: the
    server's 200 answer was taken for the range, and the file was downloaded again later."""
    url, size = http.url(f"whole/{name}"), os.path.getsize(folder / name)
    http.reset_counts()
    before = remote_reads()
    indices_of = ([599, 0], [301, 302, 303], [45]) if name == "long.mp4" else ([39, 0], [20, 21], [5])
    with pytest.warns(RemoteReadWarning, match=f"whole/{name}: the server ignores Range requests") as caught:
        decoder = vclip.VideoDecoder(url, device="cpu")
        for indices in indices_of:
            frames = decoder.get_frames(indices)
            np.testing.assert_array_equal(frames.data, local_frames(folder / name, indices))
    assert len([w for w in caught if issubclass(w.category, RemoteReadWarning)]) == 1
    assert http.bytes_sent == size  # the first answer was the whole file: kept, read from there
    assert remote_reads([url], since=before)[url].whole_file_reads == 1


def test_a_loader_over_a_server_without_range_downloads_each_video_once(http, folder):
    """A server without Range was downloaded twice per video by the loader."""
    names = ["once.mp4", "once.mkv"]  # read nowhere else: nothing of them is cached yet
    for name in names:
        shutil.copy(folder / name.replace("once", "short"), folder / name)
    http.reset_counts()
    with pytest.warns(RemoteReadWarning):
        loader = vclip.ClipLoader([(http.url(f"whole/{name}"), k) for k, name in enumerate(names)],
                                  vclip.strided(4, 2), batch_size=2, device="cpu", decode_processes=0, seed=1)
        try:
            batches = list(loader)
        finally:
            loader.close()
    assert [barcodes(clip) for batch in batches for clip in batch.data.numpy()] == [
        indices for batch in batches for indices in batch.frame_indices.tolist()]
    assert http.bytes_sent == sum(os.path.getsize(folder / name) for name in names)


@pytest.mark.parametrize("prefix", ["lying", "endless"])
def test_an_answer_longer_than_asked_is_refused_before_it_is_read(http, prefix):
    """Threat: a broken proxy (or a hostile server) answering a range request with 200 and an
    800 MiB body (declared, or without a length) was read whole into memory (a 1.7 GB peak)
    before its length was checked: enough to get a training job killed. The declared length is
    refused before the body is read; a body without one is read with a cap, into a spill file."""
    import tracemalloc

    url = http.url(f"{prefix}/short.mp4")
    http.reset_counts()
    tracemalloc.start()
    try:
        with pytest.raises(UnreadableVideoError, match="neither the range nor the whole file") as caught:
            vclip.index_video(url)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.path == url
    assert peak < 32 << 20, peak
    assert http.bytes_sent < 64 << 20, http.bytes_sent


def test_a_spill_limit_smaller_than_the_file_is_reported(http, remote_options):
    remote_options(spill_limit=1000)
    url = http.url("whole/short.mkv")
    with pytest.raises(UnreadableVideoError, match=r"ignores Range requests.*more than the spill limit \(1,000 bytes"):
        vclip.index_video(url)


@pytest.mark.parametrize("decode_processes, names", [(0, ["short.mp4", "short.mkv"]), (1, ["long.mp4", "short.ts"])])
def test_loader_stats_count_what_was_read_per_url(http, decode_processes, names):
    """In this process and in a decode process (its counts come back with each video)."""
    urls = [http.url(f"flaky/{name}") for name in names]  # each range fails once first: retries counted
    http.reset_counts()
    loader = vclip.ClipLoader([(url, k) for k, url in enumerate(urls)], vclip.strided(4, 2), device="cpu",
                              batch_size=2, decode_processes=decode_processes,
                              transform=vclip.TransformSpec(resize=(48, 64)))
    try:
        assert len(list(loader)) == 1
        reads = loader.stats().remote_reads
    finally:
        loader.close()
    assert set(reads) == set(urls)
    assert sum(r.bytes_read for r in reads.values()) == http.bytes_sent
    failed = sum(status == 503 for *_, status in http.requests)
    assert sum(r.retries for r in reads.values()) == failed > 0
    assert sum(r.requests for r in reads.values()) == len(http.requests)
    assert "remote:" in loader.stats().summary()
