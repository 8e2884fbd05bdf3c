"""WebDataset tar shards as a source: member tables, brace patterns, samples and labels, shards
written by vclip, the loader over shards on disk, behind HTTP (with Range) and on S3 (moto's
server, started here) against the loader over the same videos as files, the catalog, the command
line, and streaming."""

from __future__ import annotations

import gzip
import io
import json
import logging
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
from helpers import require_extra
from range_server import range_server, s3_bucket

import vclip
from vclip._bytes.braces import expand_braces
from vclip._bytes.shards import group_samples, split_key
from vclip._bytes.sources import hold_video, open_reader, split_slice_name
from vclip._bytes.tar import parse_member_index, read_tar_table
from vclip._datasets.shard_videos import needs_faststart
from vclip.cli import main
from vclip.errors import CorruptVideoError, NotAVideoError
from vclip.synthetic import make_video, read_barcode
from vclip.webdataset import WebDatasetSource, write_shards

torch = require_extra("torch")

CLASSES = ("jump", "run", "walk")
SAMPLER = vclip.strided(8, 2)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """Class folders of small videos, a long video, and shards of the class folders."""
    root = tmp_path_factory.mktemp("webdataset")
    for label, name in enumerate(CLASSES):
        (root / "classes" / name).mkdir(parents=True)
        for number in range(3):
            make_video(root / "classes" / name / f"v{number}.mp4", num_frames=40, width=64, height=48,
                       keyframe_interval=10, seed=10 * label + number)
    make_video(root / "long.mp4", num_frames=600, width=192, height=112, keyframe_interval=30, seed=7)
    written = write_shards(root / "classes", root / "shards" / "shard-{000000}.tar", max_size="48KB")
    assert len(written.shards) >= 3 and written.videos == 9 and written.remuxed == 9
    return root


@pytest.fixture(scope="module")
def pattern(root) -> str:
    count = len(list((root / "shards").glob("*.tar")))
    return str(root / "shards" / f"shard-{{000000..{count - 1:06d}}}.tar")


def batches_of(videos, epochs=2, **options) -> list[tuple[torch.Tensor, ...]]:
    loader = vclip.ClipLoader(videos, SAMPLER, batch_size=4, shuffle=True, seed=5, device="cpu", **options)
    try:
        found = []
        for epoch in range(epochs):
            loader.set_epoch(epoch)
            found += [(b.data.clone(), b.labels.clone(), b.video_ids.clone(), b.frame_indices.clone()) for b in loader]
        return found
    finally:
        loader.close()


def assert_same_batches(found, expected):
    assert len(found) == len(expected) > 0
    for got, want in zip(found, expected):
        for a, b in zip(got, want):
            assert torch.equal(a, b)


@pytest.fixture(scope="module")
def folder_batches(root):
    return batches_of(str(root / "classes"))


# -- member tables ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
def test_the_member_table_is_what_tarfile_finds_from_headers_only(kind):
    rng = np.random.default_rng(kind)
    names = ["a.mp4", "deep/" + "x" * 120 + ".mp4", "ünï/cödé.json", "p" * 90 + "/" + "q" * 60 + ".cls", "empty.txt"]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=kind) as archive:
        for name in names:
            if kind == tarfile.USTAR_FORMAT and (len(name.rsplit("/", 1)[-1]) > 100 or not name.isascii()):
                continue
            data = rng.integers(0, 256, int(rng.integers(1, 3000))).astype(np.uint8).tobytes() if "empty" not in name \
                else b""
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        folder = tarfile.TarInfo("folder")
        folder.type = tarfile.DIRTYPE
        archive.addfile(folder)
    data = buffer.getvalue()
    name, holder = hold_video(data)
    table = read_tar_table(open_reader(name), payload_wanted=lambda member: member.name.endswith(".json"))
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        expected = [(m.name, m.offset_data, m.size) for m in archive.getmembers() if m.isfile()]
    assert [(m.name, m.offset, m.size) for m in table.members] == expected
    assert len(expected) == (3 if kind == tarfile.USTAR_FORMAT else 5)
    for member in table.members:
        if member.name.endswith(".json"):
            assert table.payloads[member.offset] == data[member.offset:member.offset + member.size]
    assert set(table.payloads) == {m.offset for m in table.members if m.name.endswith(".json")}
    assert table.problem is None and table.cut_member is None


def test_the_member_index_written_beside_a_shard_is_its_table(root):
    shard = root / "shards" / "shard-000000.tar"
    listed = parse_member_index((root / "shards" / "shard-000000.idx").read_text(), "idx")
    assert listed == read_tar_table(open_reader(str(shard))).members
    source = WebDatasetSource(str(shard))
    assert source.from_member_index == 1


def test_a_stale_member_index_is_not_used(root, tmp_path, caplog):
    shutil.copy(root / "shards" / "shard-000000.tar", tmp_path / "s.tar")
    shutil.copy(root / "shards" / "shard-000001.idx", tmp_path / "s.idx")  # another shard's index
    with caplog.at_level(logging.WARNING, logger="vclip"):
        source = WebDatasetSource(str(tmp_path / "s.tar"))
    assert source.from_member_index == 0 and "does not fit" in caplog.text
    original = str(root / "shards" / "shard-000000.tar")
    expected = [v.path.replace(original, str(tmp_path / "s.tar")) for v in WebDatasetSource(original).videos]
    assert [v.path for v in source.videos] == expected
    (tmp_path / "s.idx").write_text("not an index\n")
    with caplog.at_level(logging.WARNING, logger="vclip"):
        assert WebDatasetSource(str(tmp_path / "s.tar")).from_member_index == 0
    assert "not a wds2idx member index" in caplog.text


def test_compressed_cut_off_and_non_tar_shards_are_refused_naming_them(root, tmp_path):
    shard = (root / "shards" / "shard-000000.tar").read_bytes()
    (tmp_path / "z.tar").write_bytes(gzip.compress(shard))
    with pytest.raises(NotAVideoError, match="gzip-compressed.*uncompressed .tar") as caught:
        WebDatasetSource(str(tmp_path / "z.tar"))
    assert caught.value.path == str(tmp_path / "z.tar")
    (tmp_path / "cut.tar").write_bytes(shard[:700])  # inside its first member
    with pytest.raises(CorruptVideoError, match="ends at byte 700 inside member '000000000.mp4'"):
        WebDatasetSource(str(tmp_path / "cut.tar"))
    (tmp_path / "text.tar").write_bytes(b"hello, not a tar\n" * 100)
    with pytest.raises(NotAVideoError, match="not a tar archive"):
        WebDatasetSource(str(tmp_path / "text.tar"))
    with pytest.raises(FileNotFoundError, match="nowhere.tar"):
        WebDatasetSource(str(tmp_path / "nowhere.tar"))


def test_brace_patterns_expand_as_shard_lists_are_written():
    assert expand_braces("s-{000..003}.tar") == ["s-000.tar", "s-001.tar", "s-002.tar", "s-003.tar"]
    assert expand_braces("{train,val}-{0..1}.tar") == ["train-0.tar", "train-1.tar", "val-0.tar", "val-1.tar"]
    assert expand_braces("a{b,c{d,e}}f") == ["abf", "acdf", "acef"]
    assert expand_braces("x{0..10..5}") == ["x0", "x5", "x10"] and expand_braces("plain.tar") == ["plain.tar"]
    for bad in ("s-{0..3.tar", "s-}.tar"):
        with pytest.raises(ValueError, match="pattern"):
            expand_braces(bad)


def test_a_pattern_of_too_many_names_is_refused_before_any_is_made():
    """10**7 names cost 1.6 GB before anything was read; the count is now known first."""
    import tracemalloc

    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"names 10,000,000 files, more than 1,000,000"):
            expand_braces("s-{0000000..9999999}.tar")
        with pytest.raises(ValueError, match=r"names 1,048,576 files"):
            expand_braces("s" + "{a,b}" * 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak
    with pytest.raises(ValueError, match="too many braces"):
        expand_braces("{a}" * 5000)
    with pytest.raises(vclip.ArgumentError, match="names 10,000,000 files"):
        WebDatasetSource("s3://bucket/s-{0000000..9999999}.tar")
    assert len(expand_braces("s-{000000..999999}.tar")) == 1_000_000


# -- samples and labels -----------------------------------------------------------------------------
def _tar(members: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_members_group_into_samples_by_key_as_webdataset_groups_them():
    assert split_key("videos/000123.mp4") == ("videos/000123", "mp4")
    assert split_key("a.b/c.left.mp4") == ("a.b/c", "left.mp4")
    assert split_key("noext") is None and split_key("d/.hidden.mp4") is None
    name, holder = hold_video(_tar([(n, b"x") for n in (
        "d/x.mp4", "d/x.json", "d/x.seg.txt", "b.MP4", ".hidden.mp4", "noext", "c.webm", "c.mp4", "e.json", "b.mp4")]))
    members = read_tar_table(open_reader(name)).members
    samples, without = group_samples("s.tar", members, ("mp4", "webm"))
    assert [(s.key, s.video_extension, sorted(s.members)) for s in samples] == [
        ("d/x", "mp4", ["json", "mp4", "seg.txt"]), ("b", "mp4", ["mp4"]), ("c", "mp4", ["mp4", "webm"]),
        ("b", "mp4", ["mp4"]),  # a key met again later is a new sample, as in WebDataset
    ]
    assert without == 1  # e.json
    assert [s.video_extension for s in group_samples("s.tar", members, ("webm", "mp4"))[0]][2] == "webm"


def test_labels_come_from_a_member_or_a_json_key_path(root, tmp_path):
    video = (root / "classes" / "jump" / "v0.mp4").read_bytes()
    facts = [json.dumps({"meta": {"class": name}, "caption": f"c{number}"}).encode()
             for number, name in enumerate(("walk", "jump"))]
    (tmp_path / "a.tar").write_bytes(_tar([
        ("0.mp4", video), ("0.cls", b"2\n"), ("0.json", facts[0]),
        ("1.mp4", video), ("1.cls", b"0"), ("1.json", facts[1]), ("1.txt", b"one"),
    ]))
    shard = str(tmp_path / "a.tar")
    assert [v.label for v in WebDatasetSource(shard).videos] == [2, 0]
    named = WebDatasetSource(shard, label="json:meta.class")
    assert named.class_names == ("jump", "walk") and [v.label for v in named.videos] == [1, 0]
    given = WebDatasetSource(shard, label="json:meta.class", class_names=CLASSES)
    assert [v.label for v in given.videos] == [2, 0]
    assert [v.label for v in WebDatasetSource(shard, label=None).videos] == [-1, -1]
    assert given.metadata(1) == {"cls": 0, "json": {"meta": {"class": "jump"}, "caption": "c1"}, "txt": "one"}
    with pytest.raises(vclip.ArgumentError, match=r"1 of 2 samples have no .txt label member.*a.tar#0"):
        WebDatasetSource(shard, label="txt")
    with pytest.raises(vclip.ArgumentError, match="has no 'meta.nope'"):
        WebDatasetSource(shard, label="json:meta.nope")
    with pytest.raises(vclip.ArgumentError, match="label"):
        WebDatasetSource(shard, label="json:")
    (tmp_path / "b.tar").write_bytes(_tar([("0.mp4", video), ("1.mp4", video)]))
    assert WebDatasetSource(str(tmp_path / "b.tar")).label_rule is None  # "auto": no .cls anywhere, no labels


# -- shards written by vclip ------------------------------------------------------------------------
def test_written_shards_hold_faststart_videos_labels_and_indexes(root, tmp_path):
    shards = sorted((root / "shards").glob("*.tar"))
    for shard in shards:
        assert shard.stat().st_size <= 48_000
    source = WebDatasetSource(str(root / "shards" / "shardindex.json"))
    assert source.class_names == CLASSES and source.from_member_index == len(shards)
    files = sorted((root / "classes").glob("*/*.mp4"))
    assert [v.label for v in source.videos] == [CLASSES.index(f.parent.name) for f in files]
    for number, (video, file) in enumerate(zip(source.videos, files)):
        container, label, offset, size = split_slice_name(video.path)
        head = open_reader(container).read_ranges([(offset, 4096)])[0]
        assert not needs_faststart(head) and needs_faststart(file.read_bytes()[:4096])  # moved to the front
        assert source.metadata(number)["json"] == {"label": video.label, "class_name": CLASSES[video.label],
                                                   "source": str(file)}
    member = vclip.VideoDecoder(source.videos[4].path, device="cpu")
    frames = list(range(40))
    np.testing.assert_array_equal(member.get_frames(frames).data,
                                  vclip.VideoDecoder(files[4], device="cpu").get_frames(frames).data)
    again = write_shards(root / "classes", tmp_path / "s-{000000}.tar", max_size="48KB")
    assert [Path(a).read_bytes() == b.read_bytes() for a, b in zip(again.shards, shards)] == [True] * len(shards)
    description = json.loads((tmp_path / "shardindex.json").read_text())
    assert [s["nsamples"] for s in description["shardlist"]] == [len(WebDatasetSource(s).videos) for s in again.shards]
    with pytest.raises(vclip.ArgumentError, match=r"exists \(and 10 more files of this shard set\); pass "
                                                  "overwrite=True"):
        write_shards(root / "classes", tmp_path / "s-{000000}.tar")
    with pytest.raises(vclip.ArgumentError, match="placeholder"):
        write_shards(root / "classes", tmp_path / "s.tar")


def test_decoders_take_members_by_name(root):
    shard = str(root / "shards" / "shard-000000.tar")
    first = WebDatasetSource(shard).videos[1].path
    for name in (first, f"{shard}#000000001.mp4", f"{shard}#000000001"):
        assert vclip.VideoDecoder(name, device="cpu").index.path == first
    frames = vclip.VideoDecoder(f"{shard}#000000001.mp4", device="cpu").get_frames([0, 17, 39]).data
    assert [read_barcode(frame) for frame in frames] == [0, 17, 39]
    with pytest.raises(vclip.ArgumentError, match="holds .* videos; name one as SHARD#MEMBER"):
        vclip.index_video(shard)
    with pytest.raises(vclip.ArgumentError, match="has no video member 'nope.mp4'"):
        vclip.index_video(f"{shard}#nope.mp4")


def test_a_local_file_named_like_a_slice_is_that_file(root, tmp_path, capsys):
    """``clip#cut@0+100`` was taken for 100 bytes of a file called ``clip``, and could not be opened."""
    path = tmp_path / "clip#cut@0+100"
    shutil.copy(root / "classes" / "run" / "v1.mp4", path)
    decoder = vclip.VideoDecoder(str(path), device="cpu")
    assert decoder.index.num_frames == 40 and decoder.index.path == str(path)
    assert [read_barcode(frame) for frame in decoder.get_frames([0, 39]).data] == [0, 39]
    assert main(["info", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["video"]["num_frames"] == 40
    shutil.copy(root / "shards" / "shard-000000.tar", tmp_path / "clip")  # a slice of an existing file stays one
    member = WebDatasetSource(str(root / "shards" / "shard-000000.tar")).videos[0].path
    as_slice = member.replace(str(root / "shards" / "shard-000000.tar"), str(tmp_path / "clip"))
    assert vclip.VideoDecoder(as_slice, device="cpu").index.num_frames == 40


# -- the loader over shards ------------------------------------------------------------------------
def test_a_loader_over_local_shards_gives_the_batches_of_the_loader_over_the_folder(root, pattern, folder_batches,
                                                                                      tmp_path):
    assert_same_batches(batches_of(pattern), folder_batches)
    assert_same_batches(batches_of(str(root / "shards" / "shardindex.json")), folder_batches)  # the description
    loader = vclip.ClipLoader(pattern, SAMPLER, device="cpu")
    assert loader.class_names == CLASSES  # from the shardindex.json beside the shards
    loader.close()
    pairs = []  # the shards extracted, labelled by their .cls members
    for shard in sorted((root / "shards").glob("*.tar")):
        with tarfile.open(shard) as archive:
            archive.extractall(tmp_path, filter="data")
    for video in sorted(tmp_path.glob("*.mp4")):
        pairs.append((str(video), int(video.with_suffix(".cls").read_text())))
    assert_same_batches(batches_of(pairs), folder_batches)


def _served(root, tmp_path):
    served = tmp_path / "served"
    shutil.copytree(root / "shards", served)
    shutil.copy(root / "long.mp4", served / "long.mp4")
    return served


def test_a_loader_over_shards_behind_http_gives_the_same_batches(root, tmp_path, folder_batches):
    served = _served(root, tmp_path)
    count = len(list(served.glob("*.tar")))
    with range_server(served) as http:
        urls = http.url(f"shard-{{000000..{count - 1:06d}}}.tar")
        assert_same_batches(batches_of(urls), folder_batches)
        whole = [r for r in http.requests if r[0] == "GET" and r[1].endswith(".tar") and r[2] is None]
        assert whole == []  # every read of a shard is a range
        assert vclip.ClipLoader(urls, SAMPLER, device="cpu").class_names == CLASSES
        from vclip.streaming import ClipStream

        streamed = [list(ClipStream(shards, SAMPLER, batch_size=4, seed=2, device="cpu")) for shards in (
            urls, str(served / f"shard-{{000000..{count - 1:06d}}}.tar"))]
        assert [len(batch) for batch in streamed[0]] == [4, 4, 1]
        assert all(torch.equal(a.data, b.data) and torch.equal(a.labels, b.labels)
                   for a, b in zip(*streamed))  # the same clips wherever the shards lie


def test_stats_count_what_the_loader_read_from_shards_over_http(root, tmp_path):
    """remote_reads stayed empty for members of shards behind HTTP: it counts them by shard URL,
    the bytes of every range the server sent from each shard."""
    served = _served(root, tmp_path)
    count = len(list(served.glob("*.tar")))
    with range_server(served) as http:
        urls = http.url(f"shard-{{000000..{count - 1:06d}}}.tar")
        http.reset_counts()
        loader = vclip.ClipLoader(urls, SAMPLER, batch_size=4, device="cpu", decode_processes=0)
        batches = list(loader)
        reads = loader.stats().remote_reads
        loader.close()
    sent: dict[str, int] = {}
    for method, path, byte_range, status in http.requests:
        if method == "GET" and path.endswith(".tar") and status == 206:
            first, last = (int(end) for end in byte_range.removeprefix("bytes=").split("-"))
            sent[http.url(path.lstrip("/"))] = sent.get(http.url(path.lstrip("/")), 0) + last - first + 1
    assert batches and set(reads) == set(sent) == {http.url(f"shard-{number:06d}.tar") for number in range(count)}
    assert {url: read.bytes_read for url, read in reads.items()} == sent
    assert all(read.requests > 0 for read in reads.values())


def test_a_clip_of_a_member_over_http_reads_what_it_reads_from_the_video_as_a_file(root, tmp_path):
    write_shards([(root / "long.mp4", 0), (root / "classes" / "run" / "v0.mp4", 1)], tmp_path / "s-{0}.tar")
    shutil.copy(root / "long.mp4", tmp_path / "long.mp4")
    with range_server(tmp_path) as http:
        member, other = (video.path for video in WebDatasetSource(http.url("s-0.tar")).videos)
        as_file = vclip.VideoDecoder(http.url("long.mp4"), device="cpu")
        http.reset_counts()
        in_shard = vclip.VideoDecoder(member, device="cpu")
        vclip.index_video(other)
        assert [method for method, *_ in http.requests].count("HEAD") == 1  # the shard's metadata serves both
        sent = {}
        for name, decoder in (("file", as_file), ("member", in_shard)):
            sent[name] = []
            for start in (5, 133, 290, 461, 560):
                clip = list(range(start, start + 32, 2))
                http.reset_counts()
                assert [read_barcode(f) for f in decoder.get_frames(clip).data] == clip
                sent[name].append(http.bytes_sent)
    file_bytes, member_bytes = sum(sent["file"]), sum(sent["member"])
    print(f"bytes per clip: member {sent['member']}, file {sent['file']}")
    assert 0 < member_bytes <= 1.1 * file_bytes and member_bytes >= 0.9 * file_bytes, sent


@pytest.fixture(scope="module")
def s3(root, tmp_path_factory):
    """The shards in bucket ``shards`` of a local S3-compatible server (moto)."""
    files = {f"train/{file.name}": file for file in sorted((root / "shards").iterdir())}
    with s3_bucket("shards", files) as endpoint:
        yield endpoint


def test_a_loader_over_shards_on_s3_gives_the_same_batches(root, s3, folder_batches):
    count = len(list((root / "shards").glob("*.tar")))
    source = WebDatasetSource(f"s3://shards/train/shard-{{000000..{count - 1:06d}}}.tar")
    assert source.from_member_index == count and source.class_names == CLASSES
    assert_same_batches(batches_of(source), folder_batches)
    assert_same_batches(batches_of(WebDatasetSource("s3://shards/train/shardindex.json")), folder_batches)


@pytest.mark.gpu
def test_members_decode_on_the_gpu_as_their_files(root, pattern):
    import cupy

    member = WebDatasetSource(pattern).videos[2].path  # the shards keep the sorted order of the files
    file = sorted((root / "classes").glob("*/*.mp4"))[2]
    indices = [0, 9, 10, 39, 21]
    gpu = vclip.VideoDecoder(member, device="cuda").get_frames(indices)
    assert gpu.device.startswith("cuda") and not gpu.fell_back_to_cpu
    np.testing.assert_array_equal(cupy.asnumpy(gpu.data),
                                  cupy.asnumpy(vclip.VideoDecoder(file, device="cuda").get_frames(indices).data))
    assert [read_barcode(frame) for frame in cupy.asnumpy(gpu.data)] == indices


# -- the catalog over shards ------------------------------------------------------------------------
def test_a_catalog_of_shards_locates_members_and_feeds_the_loader(root, pattern, folder_batches, tmp_path):
    import pyarrow.parquet as pq

    from vclip.catalog import build_catalog, read_catalog

    out = tmp_path / "catalog.parquet"
    built = build_catalog(pattern, out, workers=2, progress=False)
    assert built.videos == 9 and not built.unusable
    rows = pq.read_table(out, columns=["path", "shard", "member", "offset_bytes", "size_bytes", "fingerprint",
                                       "class_name"]).to_pylist()
    for row in rows:
        assert split_slice_name(row["path"]) == (row["shard"], row["member"], row["offset_bytes"], row["size_bytes"])
        assert row["fingerprint"].startswith(f"slice-{row['offset_bytes']}-{row['size_bytes']}-")
    assert [row["class_name"] for row in rows] == [name for name in CLASSES for _ in range(3)]
    assert read_catalog(out).class_names == CLASSES
    assert build_catalog(pattern, out, workers=1, progress=False).kept == 9  # unchanged members: kept
    assert_same_batches(batches_of(out), folder_batches)

    sampler, options = SAMPLER, dict(batch_size=2, shuffle=True, seed=5, device="cpu")
    running = vclip.ClipLoader(str(out), sampler, **options)
    expected = [b.data.clone() for b in running]
    partial = vclip.ClipLoader(str(out), sampler, **options)
    iterator = iter(partial)
    for _ in range(2):
        next(iterator)
    state = partial.state_dict()
    resumed = vclip.ClipLoader(str(out), sampler, **options)
    resumed.load_state_dict(state)
    rest = [b.data for b in resumed]
    assert len(rest) == len(expected) - 2 and all(torch.equal(a, b) for a, b in zip(rest, expected[2:]))
    for loader in (running, partial, resumed):
        loader.close()
    by_rank = []  # ranks share out videos, not tars
    for rank in range(2):
        loader = vclip.ClipLoader(str(out), sampler, batch_size=1, device="cpu", shard_id=rank, num_shards=2)
        by_rank.append({int(video) for batch in loader for video in batch.video_ids})
        loader.close()
    assert not by_rank[0] & by_rank[1] and by_rank[0] | by_rank[1] == set(range(9))


def test_a_member_that_went_bad_is_skipped_by_the_loader_from_the_catalog(root, tmp_path):
    from vclip.catalog import build_catalog

    shutil.copytree(root / "shards", tmp_path / "shards")
    shards = sorted((tmp_path / "shards").glob("*.tar"))
    build_catalog([str(shard) for shard in shards], tmp_path / "c.parquet", workers=1, progress=False)
    last = WebDatasetSource(str(shards[-1])).videos[-1].path
    _, _, offset, size = split_slice_name(last)
    with open(shards[-1], "r+b") as file:
        file.truncate(offset + size // 2)  # the shard loses the end of its last video
    loader = vclip.ClipLoader(str(tmp_path / "c.parquet"), SAMPLER, batch_size=3, device="cpu", seed=1)
    found = list(loader)  # its fingerprint cannot be read at its first clip: a bad video
    assert sum(len(batch) for batch in found) == 9  # its clip replaced by another video's
    assert list(loader.stats().skipped.videos) == [last]
    assert any(batch.skipped_videos == (last,) for batch in found)
    loader.close()


# -- the command line ------------------------------------------------------------------------------
def test_the_command_line_writes_indexes_describes_and_checks_shards(root, tmp_path, capsys):
    out = tmp_path / "out" / "part-{0000}.tar"
    assert main(["shard", str(root / "classes"), "--out", str(out), "--max-count", "4", "--json", "--no-progress"]) == 0
    written = json.loads(capsys.readouterr().out)
    assert written["videos"] == 9 and len(written["shards"]) == 3 and written["remuxed"] == 9
    pattern = str(tmp_path / "out" / "part-{0000..0002}.tar")
    assert main(["info", pattern, "--json", "--no-progress"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert len(described) == 9 and all(report["video"]["num_frames"] == 40 for report in described)
    assert main(["info", str(tmp_path / "out" / "part-0001.tar#000000005.mp4"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["file"].startswith(str(tmp_path / "out" / "part-0001.tar#000000005"))
    assert main(["check", pattern, "--json", "--device", "cpu", "--no-progress", "--workers", "1"]) == 0
    assert [result["status"] for result in json.loads(capsys.readouterr().out)] == ["ok"] * 9
    assert main(["index", pattern, "--out", str(tmp_path / "c.parquet"), "--workers", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["videos"] == 9
    assert main(["info", str(tmp_path / "out" / "part-0009.tar")]) == 2
    assert "does not exist" in capsys.readouterr().err


# -- Hugging Face datasets --------------------------------------------------------------------------
def test_a_hugging_face_dataset_is_a_loader_source(root, folder_batches, tmp_path):
    datasets = require_extra("datasets")
    files = sorted((root / "classes").glob("*/*.mp4"))
    labels = [CLASSES.index(file.parent.name) for file in files]
    features = datasets.Features({"video": datasets.Video(), "label": datasets.ClassLabel(names=list(CLASSES))})
    by_path = datasets.Dataset.from_dict({"video": [str(f) for f in files], "label": labels}, features=features)
    source = vclip.HuggingFaceSource(by_path)
    assert source.class_names == CLASSES and [v.path for v in source.videos] == [str(f) for f in files]
    assert_same_batches(batches_of(by_path), folder_batches)  # the Dataset itself, its Video feature undecoded
    by_bytes = datasets.Dataset.from_dict({"clip": [f.read_bytes() for f in files],
                                           "y": [CLASSES[label] for label in labels]})
    source = vclip.HuggingFaceSource(by_bytes, video_column="clip", label_column="y")
    assert source.class_names == CLASSES and all(v.path.startswith("<bytes:") for v in source.videos)
    assert_same_batches(batches_of(source), folder_batches)
    with pytest.raises(vclip.ArgumentError, match="video_column .'nope'. is not a column.*clip, y"):
        vclip.HuggingFaceSource(by_bytes, video_column="nope")
    from vclip.catalog import build_catalog

    with pytest.raises(ValueError, match="holds bytes; write them as shards first"):
        build_catalog(by_bytes.rename_column("clip", "video"), tmp_path / "c.parquet", workers=1)
    written = write_shards(source, tmp_path / "hf-{00}.tar")
    assert {sample.video_extension for sample in WebDatasetSource(list(written.shards)).samples} == {"mp4"}  # probed
    assert_same_batches(batches_of(list(written.shards)), folder_batches)
    saved = tmp_path / "saved"
    by_bytes.save_to_disk(str(saved))  # memory-mapped Arrow: the bytes are used where they lie
    assert_same_batches(batches_of(vclip.HuggingFaceSource(datasets.load_from_disk(str(saved)), video_column="clip",
                                                           label_column="y")), folder_batches)


# -- streaming --------------------------------------------------------------------------------------
def test_a_stream_reads_each_video_once_per_epoch_in_a_seeded_order(root, pattern):
    from vclip.streaming import ClipStream

    def epoch(stream, number):
        stream.set_epoch(number)
        return list(stream)

    stream = ClipStream(pattern, SAMPLER, batch_size=4, shuffle_buffer=4, seed=3, device="cpu")
    first = epoch(stream, 0)
    assert [len(batch) for batch in first] == [4, 4, 1]
    keys = [key for batch in first for key in batch.keys]
    assert sorted(keys) == sorted(f"{v.path.split('#')[0]}#{v.path.split('#')[1].split('.')[0]}"
                                  for v in WebDatasetSource(pattern).videos)
    expected_labels = {key: int(key.rsplit("#", 1)[1]) // 3 for key in keys}
    assert all(label == expected_labels[key]
               for batch in first for key, label in zip(batch.keys, batch.labels.tolist()))
    for batch in first:
        for clip, indices in zip(batch.data.numpy(), batch.frame_indices.tolist()):
            assert [read_barcode(frame) for frame in clip] == indices
    again = epoch(stream, 0)
    assert all(torch.equal(a.data, b.data) and a.keys == b.keys for a, b in zip(first, again))
    assert [k for b in epoch(stream, 1) for k in b.keys] != keys
    in_order = ClipStream(pattern, SAMPLER, batch_size=9, shuffle_buffer=1, shuffle=False, device="cpu")
    assert sorted(list(in_order)[0].keys) == list(list(in_order)[0].keys)
    count = len(stream.shards)
    parts = [ClipStream(pattern, SAMPLER, seed=3, device="cpu", shard_id=rank, num_shards=count).shards_of_epoch()
             for rank in range(count)]
    assert sorted(shard for part in parts for shard in part) == sorted(stream.shards)
    with pytest.raises(vclip.ArgumentError, match="num_shards"):
        ClipStream(pattern, SAMPLER, device="cpu", shard_id=0, num_shards=count + 1)
