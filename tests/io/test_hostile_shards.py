"""Shards from strangers: tar headers with negative or absurd sizes, cut-off archives, member
indexes and dataset descriptions that lie, labels that are not labels. Every one ends in a clean
vclip error naming the shard or the sample, or in the intact samples with a warning, never in a
hang, a traceback or another sample's data."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import signal
import tarfile
from collections.abc import Iterator

import pytest
from helpers import require_extra
from range_server import range_server

import vclip
from vclip._bytes.shards import list_shard
from vclip._bytes.sources import open_reader
from vclip._bytes.tar import format_member_index, read_tar_table
from vclip.cli import main
from vclip.errors import CorruptVideoError
from vclip.synthetic import make_video
from vclip.webdataset import WebDatasetSource

torch = require_extra("torch")


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fail with TimeoutError when the block runs longer than ``seconds`` (a hang is a failure)."""
    def expired(*_):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def video(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("hostile") / "v.mp4"
    make_video(path, num_frames=12, width=64, height=48, keyframe_interval=6)
    return path.read_bytes()


def shard_bytes(members: list[tuple[str, bytes]], pax: dict[int, dict[str, str]] | None = None) -> bytes:
    """A PAX tar of ``members`` (``pax``: extra PAX records of the member at that position)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for number, (name, data) in enumerate(members):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.pax_headers = (pax or {}).get(number, {})
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def with_size_field(data: bytes, member: int, field: bytes) -> bytes:
    """``data`` with the 12-byte size field of header ``member`` replaced (its checksum made right)."""
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        at = archive.getmembers()[member].offset
    header = bytearray(data[at:at + 512])
    header[124:136] = field
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    return data[:at] + bytes(header) + data[at + 512:]


SAMPLES = [("0.mp4", 0), ("0.cls", 1), ("1.mp4", 0), ("1.cls", 1)]


def sample_members(video: bytes) -> list[tuple[str, bytes]]:
    return [(name, video if kind == 0 else name[0].encode()) for name, kind in SAMPLES]


# -- sizes -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("damage", ["octal -512", "octal -1", "octal with junk", "base-256 negative",
                                    "base-256 absurd", "pax -1536", "pax +5", "pax 1_0"])
def test_a_negative_or_absurd_member_size_is_a_clean_error_not_a_hang(video, tmp_path, damage):
    """Threat: a 1.5 KB tar whose first header claims ``-0001000`` bytes (or a PAX ``size=-1536``)
    made every reader loop forever while its memory grew; a GNU base-256 negative size gave a bare
    OverflowError. The shard is refused as damaged, by every reader, at once."""
    members = sample_members(video)
    kind, _, value = damage.partition(" ")
    if kind == "pax":
        data = shard_bytes(members, pax={0: {"size": value}})
    else:
        field = {"octal -512": b"-0001000\0\0\0\0", "octal -1": b"-1".rjust(11, b"0") + b"\0",
                 "octal with junk": b"0000001x00\0\0", "base-256 negative": b"\xff" * 12,
                 "base-256 absurd": b"\x80" + (1 << 80).to_bytes(11, "big")}[damage]
        data = with_size_field(shard_bytes(members), 0, field)
    shard = tmp_path / "s.tar"
    shard.write_bytes(data)
    with deadline(10):
        with pytest.raises(CorruptVideoError, match=r"damaged (tar|PAX) header at byte \d+ \((size|a )") as caught:
            WebDatasetSource(str(shard))
        assert caught.value.path == str(shard)
        stream = vclip.ClipStream(str(shard), vclip.contiguous(4), device="cpu", on_error="skip")
        with pytest.raises(vclip.VideoError) as streamed:
            list(stream)
        assert streamed.value.path == str(shard)
        assert main(["info", str(shard), "--json", "--no-progress"]) == 2


# -- cut-off and damaged shards --------------------------------------------------------------------
@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> list[bytes]:
    """Three videos told apart by their length (12, 16 and 20 frames)."""
    folder = tmp_path_factory.mktemp("three")
    for frames in (12, 16, 20):
        make_video(folder / f"{frames}.mp4", num_frames=frames, width=64, height=48, keyframe_interval=6)
    return [(folder / f"{frames}.mp4").read_bytes() for frames in (12, 16, 20)]


def three_samples(videos: list[bytes]) -> list[tuple[str, bytes]]:
    return [member for number, video in enumerate(videos)
            for member in ((f"{number}.mp4", video), (f"{number}.cls", str(number).encode()))]


def offsets(data: bytes) -> dict[str, tuple[int, int]]:
    """``name: (header offset, data offset)`` of each member."""
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        return {member.name: (member.offset, member.offset_data) for member in archive.getmembers()}


def frame_counts(source: WebDatasetSource) -> list[int]:
    return [source.index(number).num_frames for number in range(len(source))]


def streamed_labels(shard: str) -> list[int]:
    stream = vclip.ClipStream(shard, vclip.contiguous(4), batch_size=1, shuffle_buffer=1, shuffle=False,
                              device="cpu")
    return [int(batch.labels[0]) for batch in stream]


@pytest.mark.parametrize("cut, kept, left_out", [
    ("inside 1.mp4", [0], "'1' is left out"),
    ("inside 1.cls", [0], "'1' is left out"),
    ("at the header of 2.mp4", [0, 1], "without the end-of-archive marker"),
    ("before the end marker", [0, 1, 2], "without the end-of-archive marker"),
    ("damaged header of 2.mp4", [0, 1], "damaged tar header at byte"),
])
def test_a_cut_off_shard_keeps_its_whole_samples_with_a_warning(videos, tmp_path, caplog, cut, kept, left_out):
    """An interrupted download: the samples before the cut are used (their videos and labels),
    the sample the cut runs through is left out, and a warning says what happened."""
    data = shard_bytes(three_samples(videos))
    where = offsets(data)
    end = {"inside 1.mp4": where["1.mp4"][1] + 1000, "inside 1.cls": where["1.cls"][1],
           "at the header of 2.mp4": where["2.mp4"][0], "before the end marker": where["2.cls"][1] + 512,
           "damaged header of 2.mp4": len(data)}[cut]
    if cut.startswith("damaged"):
        header = where["2.mp4"][0]
        data = data[:header] + b"\x01" * 512 + data[header + 512:]
    shard = tmp_path / "s.tar"
    shard.write_bytes(data[:end])
    with caplog.at_level(logging.WARNING, logger="vclip"):
        source = WebDatasetSource(str(shard))
    assert [video.label for video in source.videos] == kept
    assert frame_counts(source) == [(12, 16, 20)[number] for number in kept]
    assert f"shard {shard} is incomplete" in caplog.text and left_out in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="vclip"):
        assert streamed_labels(str(shard)) == kept
    assert f"shard {shard} is incomplete" in caplog.text and left_out in caplog.text


# -- duplicate keys --------------------------------------------------------------------------------
def test_a_key_that_comes_again_is_another_sample_with_its_own_label(videos, tmp_path):
    """Labels were looked up by member name: of three samples keyed 0, 1, 0, the first took the
    third's label (2, 1, 2). Each sample keeps its own members, from the headers or an index."""
    members = three_samples(videos)
    renamed = [(name.replace("2.", "0.", 1), data) for name, data in members]
    shard = tmp_path / "dup.tar"
    shard.write_bytes(shard_bytes(renamed))
    source = WebDatasetSource(str(shard))
    assert source.from_member_index == 0
    assert [video.label for video in source.videos] == [0, 1, 2] and frame_counts(source) == [12, 16, 20]
    assert streamed_labels(str(shard)) == [0, 1, 2]
    table = read_tar_table(open_reader(str(shard)))
    assert [m.name for m in table.members] == [name for name, _ in renamed]
    samples = list_shard(str(shard), ("mp4",), None).samples
    (tmp_path / "dup.idx").write_text(format_member_index([list(s.members.items()) for s in samples]))
    indexed = WebDatasetSource(str(shard))
    assert indexed.from_member_index == 1
    assert [video.label for video in indexed.videos] == [0, 1, 2] and frame_counts(indexed) == [12, 16, 20]


# -- member indexes --------------------------------------------------------------------------------
@pytest.mark.parametrize("lie", ["another sample's video", "a size 512 bytes short", "other names"])
def test_every_entry_of_a_member_index_is_checked_against_its_header(videos, tmp_path, caplog, lie):
    """Only the first and last entries were checked: a wrong middle entry gave sample 1 the video
    of sample 2. Every header is read (with the labels, in the same requests); an index that does
    not fit is set aside with a warning and the headers give the right samples."""
    shard = tmp_path / "s.tar"
    shard.write_bytes(shard_bytes(three_samples(videos)))
    samples = list_shard(str(shard), ("mp4",), None).samples
    lines = format_member_index([list(sample.members.items()) for sample in samples]).splitlines()
    middle = lines[2].split(" ")
    video, other = samples[1].video, samples[2].video
    if lie == "another sample's video":
        middle[1:3] = [str(other.offset), str(other.size)]
    elif lie == "a size 512 bytes short":
        middle[2] = str(video.size - 512)
    else:
        middle = [field.replace("1.", "7.") for field in middle]
    lines[2] = " ".join(middle)
    (tmp_path / "s.idx").write_text("\n".join(lines) + "\n")
    with caplog.at_level(logging.WARNING, logger="vclip"):
        source = WebDatasetSource(str(shard))
    assert source.from_member_index == 0 and "does not fit" in caplog.text
    assert [video.label for video in source.videos] == [0, 1, 2] and frame_counts(source) == [12, 16, 20]
    (tmp_path / "s.idx").write_text(format_member_index([list(sample.members.items()) for sample in samples]))
    assert WebDatasetSource(str(shard)).from_member_index == 1  # the true index is used


# -- labels ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("rule, bad, reason", [
    ("cls", b"9" * 5000, "does not fit a 64-bit integer"),
    ("cls", b"\xff\xfe", "not UTF-8"),
    ("cls", b"  ", "is empty"),
    ("json:label", b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ("json:label", b'{"label": 1e400}', "must be an integer or a class name"),
])
def test_one_bad_label_leaves_out_its_sample_not_the_epoch(videos, tmp_path, caplog, rule, bad, reason):
    """A label member that is not a label ended a whole ClipStream epoch with a bare ValueError or
    RecursionError, on_error="skip" notwithstanding. Under "skip" that sample is left out with a
    warning naming it; under "raise", and for WebDatasetSource, an ArgumentError names it."""
    extension = rule.split(":")[0]
    good = (lambda number: str(number).encode()) if extension == "cls" else (
        lambda number: f'{{"label": {number}}}'.encode())
    members = [member for number, video in enumerate(videos) for member in (
        (f"{number}.mp4", video), (f"{number}.{extension}", bad if number == 1 else good(number)))]
    shard = tmp_path / "labels.tar"
    shard.write_bytes(shard_bytes(members))
    where = f"{shard}#1"
    stream = vclip.ClipStream(str(shard), vclip.contiguous(4), batch_size=1, shuffle_buffer=1, shuffle=False,
                              device="cpu", label=rule)
    with caplog.at_level(logging.WARNING, logger="vclip"):
        assert [int(batch.labels[0]) for batch in stream] == [0, 2]
    assert f"ClipStream left out {where}" in caplog.text and reason in caplog.text
    raising = vclip.ClipStream(str(shard), vclip.contiguous(4), batch_size=1, shuffle_buffer=1, shuffle=False,
                               device="cpu", label=rule, on_error="raise")
    with pytest.raises(vclip.ArgumentError, match=f"{where}: .*{reason}"):
        list(raising)
    with pytest.raises(vclip.ArgumentError, match=f"{where}: .*{reason}"):
        WebDatasetSource(str(shard), label=rule)


def test_label_errors_name_a_sample(videos, tmp_path):
    members = [("0.mp4", videos[0]), ("0.cls", b"3"), ("1.mp4", videos[1]), ("1.cls", b"cat"),
               ("2.mp4", videos[2]), ("2.cls", b"dog")]
    shard = tmp_path / "mixed.tar"
    shard.write_bytes(shard_bytes(members))
    with pytest.raises(vclip.ArgumentError, match=f"mix integers and class names, e.g. {shard}#0 has 3 and "
                                                  f"{shard}#1 has 'cat'"):
        WebDatasetSource(str(shard))
    shard.write_bytes(shard_bytes([member for member in members if member[0][0] != "0"]))
    with pytest.raises(vclip.ArgumentError, match=f"name classes not in class_names \\(1 samples\\), e.g. {shard}#2 "
                                                  "has 'dog'"):
        WebDatasetSource(str(shard), class_names=["cat", "cow"])
    stream = vclip.ClipStream(str(shard), vclip.contiguous(4), device="cpu", class_names=["cat"], on_error="raise")
    with pytest.raises(vclip.ArgumentError, match=f"{shard}#2: label 'dog' is a class name"):
        list(stream)
    (tmp_path / "meta.tar").write_bytes(shard_bytes([("0.mp4", videos[0]), ("0.json", b"{" * 5)]))
    source = WebDatasetSource(str(tmp_path / "meta.tar"))
    with pytest.raises(CorruptVideoError, match=r"meta.tar#0.mp4@\d+\+\d+: its .json member is not JSON"):
        source.metadata(0)


# -- dataset descriptions --------------------------------------------------------------------------
@pytest.fixture
def served(videos, tmp_path):
    """A served folder with a shard, and a private local shard of the client's, outside it."""
    (tmp_path / "served").mkdir()
    (tmp_path / "served" / "s.tar").write_bytes(shard_bytes(three_samples(videos)))
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "mine.tar").write_bytes(shard_bytes([("k.mp4", videos[0])]))
    with range_server(tmp_path / "served") as http:
        yield http, tmp_path


@pytest.mark.parametrize("lie", ["base", "absolute path", "file URL", "chained URL", "memory URL"])
def test_a_remote_description_cannot_point_the_reader_at_local_files(served, lie):
    """Threat: a shardindex.json on a server (given by URL, or read automatically beside a remote
    shard) whose ``base``, an absolute shard path or a ``file://`` URL names the client's own files:
    they were read as shards (or probed, "does not exist"). A remote description may name remote
    shards only; one beside a shard that breaks this is left aside with a warning."""
    http, root = served
    private = root / "private" / "mine.tar"
    entry = {"base": {"base": str(private.parent)}, "absolute path": {"url": str(private)},
             "file URL": {"url": private.as_uri()}, "chained URL": {"url": f"tar://k.mp4::{private.as_uri()}"},
             "memory URL": {"url": "memory://mine.tar"}}[lie]
    description = {"shardlist": [{"url": entry.get("url", "mine.tar"), "nsamples": 1}], "base": entry.get("base")}
    (root / "served" / "shardindex.json").write_text(json.dumps(description))
    with pytest.raises(vclip.ArgumentError, match="comes from a server but names .* read from this machine"):
        WebDatasetSource(http.url("shardindex.json"))
    with pytest.raises(vclip.ArgumentError, match="comes from a server"):
        vclip.ClipStream(http.url("shardindex.json"), vclip.contiguous(4), device="cpu")
    description["shardlist"].append({"url": http.url("s.tar"), "nsamples": 3})
    description["class_names"] = ["stolen"]
    (root / "served" / "shardindex.json").write_text(json.dumps(description))
    source = WebDatasetSource(http.url("s.tar"))  # the description beside it is not used
    assert len(source) == 3 and source.class_names is None


@pytest.mark.parametrize("field, value, problem", [
    ("base", 7, r"'base' \(7\) must be a URL or a folder"),
    ("shardlist", "s.tar", "needs a 'shardlist'"),
    ("shardlist", [{"url": 5}], "needs a 'shardlist'"),
    ("nsamples", -1, r"shardlist\[0\]\['nsamples'\] \(-1\) must be an integer >= 0"),
    ("class_names", [1, 2], "'class_names' must be a list of distinct strings"),
    ("class_names", ["a", "a"], "'class_names' must be a list of distinct strings"),
    ("everything", "[" * 100_000, "nested too deeply"),
])
def test_a_malformed_description_is_a_clean_error_and_is_ignored_beside_a_shard(videos, tmp_path, caplog, field,
                                                                                value, problem):
    """``"base": 7`` in the description beside a shard broke every reader with a TypeError."""
    shard = tmp_path / "s.tar"
    shard.write_bytes(shard_bytes(three_samples(videos)))
    description: dict = {"shardlist": [{"url": "s.tar", "nsamples": 3}]}
    if field == "nsamples":
        description["shardlist"][0]["nsamples"] = value
    else:
        description[field] = value
    path = tmp_path / "shardindex.json"
    path.write_text(value if field == "everything" else json.dumps(description))
    with pytest.raises(vclip.ArgumentError, match=f"{path}: .*{problem}"):
        WebDatasetSource(str(path))
    with caplog.at_level(logging.WARNING, logger="vclip"):
        assert [video.label for video in WebDatasetSource(str(shard)).videos] == [0, 1, 2]
    assert "the dataset description beside" in caplog.text and "is not used" in caplog.text
    assert main(["info", str(shard), "--json", "--no-progress"]) == 0
    assert main(["info", str(path), "--json", "--no-progress"]) == 2
