"""The dataset catalog: built in parallel over synthetic videos and bad files, read back without
opening any video, indexes equal to fresh ones, exact frames through them, and incremental runs."""

import json
import os
import pickle
import shutil
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction

import numpy as np
import pytest
from helpers import require_extra

pa = require_extra("pyarrow")
import pyarrow.parquet as pq  # noqa: E402

import vclip  # noqa: E402
import vclip.catalog._read as catalog_read  # noqa: E402
from vclip import catalog as vcatalog  # noqa: E402
from vclip._jobs.runner import Processes  # noqa: E402
from vclip.catalog._indexing import IndexItem, index_row, index_rows  # noqa: E402
from vclip.cli import main  # noqa: E402
from vclip.errors import CorruptVideoError, NotAVideoError, VideoNotFoundError  # noqa: E402
from vclip.synthetic import make_video, read_barcode  # noqa: E402

# class folder -> (file, make_video options)
DATASET = {
    "cats": [
        ("a.mp4", dict(num_frames=24, width=64, height=48, keyframe_interval=8, b_frames=2)),
        (
            "b.mkv",
            dict(
                num_frames=20,
                width=48,
                height=32,
                time_base=Fraction(1, 1000),
                frame_pts=[i * 33 + (i % 3) * 9 for i in range(20)],
            ),
        ),
        ("c.mp4", dict(num_frames=16, width=64, height=48, codec="libx265", keyframe_interval=8)),
    ],
    "dogs": [
        ("d.mp4", dict(num_frames=30, width=32, height=32, keyframe_interval=10, seed=3)),
        ("e.mp4", dict(num_frames=12, width=40, height=24, codec="mpeg4", keyframe_interval=4)),
    ],
}
BAD = {"dogs/not_a_video.mp4": b"this is not a video file\n" * 64, "cats/empty.mp4": b""}


def make_dataset(root):
    for name, files in DATASET.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        for file, options in files:
            make_video(root / name / file, **options)
    for file, data in BAD.items():
        (root / file).write_bytes(data)
    return root


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("catalog") / "videos")


@pytest.fixture(scope="module")
def built(dataset, tmp_path_factory):
    out = tmp_path_factory.mktemp("catalog_out") / "dataset.parquet"
    return vcatalog.build_catalog(dataset, out, workers=2, progress=False)


def fields_equal(one: vclip.VideoIndex, other: vclip.VideoIndex) -> None:
    """Every field equal and of the same type (arrays: the same dtype)."""
    for name in vclip.VideoIndex.__dataclass_fields__:
        mine, theirs = getattr(one, name), getattr(other, name)
        assert type(mine) is type(theirs), name
        if isinstance(mine, np.ndarray):
            assert mine.dtype == theirs.dtype, name
            np.testing.assert_array_equal(mine, theirs, err_msg=name)
        else:
            assert mine == theirs, name


def test_build_lists_every_video_with_its_label_and_the_bad_ones_as_unusable(built, dataset):
    catalog = vcatalog.read_catalog(built.path)
    assert built.videos == len(catalog) == 7 and built.kept == 0 and len(built.indexed) == 7
    assert catalog.class_names == ("cats", "dogs")
    by_name = {os.path.basename(entry.path): entry for entry in catalog}
    assert [os.path.basename(p) for p in catalog.paths] == [
        "a.mp4",
        "b.mkv",
        "c.mp4",
        "empty.mp4",
        "d.mp4",
        "e.mp4",
        "not_a_video.mp4",
    ]
    assert all(os.path.isabs(path) for path in catalog.paths)
    assert (by_name["a.mp4"].label, by_name["a.mp4"].class_name) == (0, "cats")
    assert (by_name["e.mp4"].label, by_name["e.mp4"].class_name) == (1, "dogs")
    assert sorted(os.path.basename(path) for path, _ in built.unusable) == ["empty.mp4", "not_a_video.mp4"]
    bad = by_name["not_a_video.mp4"]
    assert not bad.usable and "not a video container" in bad.error
    with pytest.raises(NotAVideoError, match="not_a_video.mp4"):
        bad.index()
    with pytest.raises(CorruptVideoError, match="empty"):
        by_name["empty.mp4"].index()
    assert [entry.usable for entry in catalog.unusable] == [False, False] and len(catalog.usable) == 5


def test_rows_hold_what_vclip_info_shows(built):
    table = pq.read_table(built.path)
    for column in (
        "codec",
        "width",
        "height",
        "average_fps",
        "num_frames",
        "duration_seconds",
        "keyframe_count",
        "bit_depth",
        "color_matrix",
        "color_range",
        "pixel_format",
        "time_base",
        "stream_index",
        "fingerprint",
        "label",
        "class_name",
        "size_bytes",
        "pts",
        "packet_is_keyframe",
        "packet_is_reference",
        "frame_packet",
        "packet_pos",
        "packet_size",
    ):
        assert column in table.column_names
    catalog = vcatalog.read_catalog(built.path)
    for entry in catalog.usable:
        facts, index = entry.facts(), vclip.index_video(entry.path)
        info = index.to_dict()
        for name in (
            "codec",
            "width",
            "height",
            "average_fps",
            "num_frames",
            "duration_seconds",
            "bit_depth",
            "color_matrix",
            "color_range",
            "pixel_format",
            "time_base",
            "stream_index",
            "start_seconds",
        ):
            assert facts[name] == info[name], name
        assert facts["keyframe_count"] == len(info["keyframe_indices"])
        assert facts["fingerprint"] == vclip._bytes.fingerprint.content_fingerprint(entry.path)
        assert facts["size_bytes"] == os.path.getsize(entry.path)


def test_index_from_the_catalog_equals_a_fresh_index(built):
    catalog = vcatalog.read_catalog(built.path)
    vclip.clear_index_cache()
    for entry in catalog.usable:
        fields_equal(catalog.index_of(entry.path), vclip.index_video(entry.path))
        fields_equal(entry.index(verify=True), vclip.index_video(entry.path))


def test_an_index_from_the_catalog_has_the_stream_facts_of_the_file(tmp_path):
    """Every fact comes back as the type the file's own index has: a 4:3 pixel aspect as a
    Fraction, so the display size is computed as for the file."""
    options = dict(num_frames=12, width=64, height=48, keyframe_interval=6)
    anamorphic = make_video(tmp_path / "anamorphic.mp4", **options, encoder_options={"aspect": "4/3"})
    square = make_video(tmp_path / "square.mp4", **options)
    out = vcatalog.build_catalog([anamorphic, square], tmp_path / "c.parquet", workers=1, progress=False).path
    catalog = vcatalog.read_catalog(out)
    for entry, ratio, display_size in zip(catalog.entries, [Fraction(4, 3), Fraction(1)], [(85, 48), (64, 48)]):
        index = entry.index()
        fields_equal(index, vclip.index_video(entry.path))
        assert type(index.sample_aspect_ratio) is Fraction and index.sample_aspect_ratio == ratio
        assert type(index.time_base) is Fraction and index.display_size == display_size


def test_a_row_group_read_by_several_threads_at_once_is_counted_once(built, monkeypatch):
    """Threads that all miss the same row group each read it; the cache keeps one copy and counts
    its bytes once."""
    catalog = vcatalog.read_catalog(built.path)
    reads = []
    check = catalog_read._damaged_rows

    def slow_check(arrays):  # between reading a group and caching it: the other threads miss it too
        reads.append(1)
        time.sleep(0.2)
        return check(arrays)

    monkeypatch.setattr(catalog_read, "_damaged_rows", slow_check)
    entry = catalog.usable[0]
    start = threading.Barrier(4)

    def index():
        start.wait()
        return entry.index()

    with ThreadPoolExecutor(4) as pool:
        indexes = [future.result() for future in [pool.submit(index) for _ in range(4)]]
    assert len(reads) > 1  # the threads did race
    for other in indexes[1:]:
        fields_equal(other, indexes[0])
    assert len(catalog._groups) == 1
    assert catalog._groups_bytes == sum(size for _, _, _, size in catalog._groups.values())


def test_frames_decoded_through_the_catalog_index_are_exact(built):
    catalog = vcatalog.read_catalog(built.path)
    for entry in catalog.usable:
        decoder = vclip.VideoDecoder(entry, device="cpu")  # the catalog's index, the fingerprint checked
        fields_equal(decoder.index, entry.index())
        n = decoder.index.num_frames
        wanted = [n - 1, 0, n // 2, 3, 3, n // 3]
        frames = decoder.get_frames(wanted)
        assert [read_barcode(frame) for frame in frames.data] == wanted
        np.testing.assert_array_equal(frames.pts_seconds, vclip.index_video(entry.path).pts_seconds[wanted])


def test_reading_the_catalog_opens_no_video(dataset, tmp_path):
    videos = make_dataset(tmp_path / "videos")
    out = tmp_path / "catalog.parquet"
    vcatalog.build_catalog(videos, out, workers=1, progress=False)
    shutil.rmtree(videos)  # nothing left to open
    catalog = vcatalog.read_catalog(out)
    assert len(catalog) == 7
    for path, label, index in catalog.sources():
        entry = catalog.entry(path)
        assert label == entry.label
        if entry.usable:
            built = index()
            assert built.num_frames == entry.facts()["num_frames"] > 0
            assert built.keyframe_indices[0] == 0
            assert vclip.plan_decode(built, [[built.num_frames - 1]]).segments
    frame = catalog.to_pandas() if _has("pandas") else None
    if frame is not None:
        assert frame["path"].tolist() == catalog.paths
    first = catalog.usable[0]
    with pytest.raises(VideoNotFoundError, match="does not exist"):
        first.index(verify=True)  # checking the fingerprint is the first time the file is needed


def test_a_loader_starts_from_the_catalog_without_opening_any_video(tmp_path):
    """ClipLoader(catalog): built while the videos are away (nothing to open), then exact batches
    once they are back; a video changed since the catalog is indexed again at its first clip."""
    videos = make_dataset(tmp_path / "videos")
    out = vcatalog.build_catalog(videos, tmp_path / "catalog.parquet", workers=1, progress=False).path
    away = tmp_path / "away"
    shutil.move(videos, away)
    options = dict(transform=vclip.TransformSpec(resize=(32, 32)), batch_size=2, shuffle=True, seed=1, device="cpu")
    loader = vclip.ClipLoader(out, vclip.contiguous(4), **options)
    assert loader.class_names == ("cats", "dogs") and len(loader.videos) == 7
    assert set(loader.stats().skipped.videos) == {str(videos / name) for name in BAD}  # unusable in the catalog
    shutil.move(away, videos)
    reference = vclip.ClipLoader(videos, vclip.contiguous(4), **options)
    batches, expected = list(loader), list(reference)
    assert len(batches) == len(expected) > 0
    for batch, other in zip(batches, expected):
        assert batch.frame_indices.tolist() == other.frame_indices.tolist()
        assert batch.labels.tolist() == other.labels.tolist() and batch.data.equal(other.data)


def test_a_changed_video_is_indexed_again_with_a_warning(tmp_path):
    path = make_video(tmp_path / "v.mp4", num_frames=20, width=32, height=32, keyframe_interval=5)
    out = vcatalog.build_catalog([path], tmp_path / "c.parquet", workers=1, progress=False).path
    catalog = vcatalog.read_catalog(out)
    assert catalog[0].is_current() and catalog[0].label is None
    # A same-size, same-mtime replacement: one byte flipped in a packet, mtime put back.
    index = catalog[0].index()
    stat = os.stat(path)
    position = int(index.packet_pos[3] + index.packet_size[3] // 2)
    data = bytearray(open(path, "rb").read())
    data[position] ^= 0xFF
    open(path, "wb").write(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert not catalog[0].is_current()
    # a new video with more frames in its place
    make_video(path, num_frames=28, width=32, height=32, keyframe_interval=5)
    catalog = vcatalog.read_catalog(out)
    with pytest.warns(vcatalog.CatalogWarning, match="changed since catalog"):
        again = catalog.index_of(path, verify=True)
    assert again.num_frames == 28 and catalog.index_of(path).num_frames == 20
    with warnings_as_errors():
        assert catalog.index_of(path, verify=True).num_frames == 28  # checked once, warned once


def test_incremental_run_indexes_only_new_and_changed_files(tmp_path):
    videos = make_dataset(tmp_path / "videos")
    out = tmp_path / "catalog.parquet"
    first = vcatalog.build_catalog(videos, out, workers=2, progress=False)
    assert len(first.indexed) == 7
    untouched = vcatalog.read_catalog(out).entry(videos / "dogs" / "d.mp4").facts()
    make_video(videos / "cats" / "a.mp4", num_frames=26, width=64, height=48, keyframe_interval=8)  # changed
    make_video(videos / "dogs" / "f.mp4", num_frames=10, width=32, height=32)  # new
    (videos / "cats" / "b.mkv").unlink()  # gone
    second = vcatalog.build_catalog(videos, out, workers=2, progress=False)
    assert [os.path.basename(path) for path in second.indexed] == ["a.mp4", "f.mp4"]
    assert second.kept == 5 and second.videos == 7  # the bad files too: unchanged, so not tried again
    catalog = vcatalog.read_catalog(out)
    assert [os.path.basename(p) for p in catalog.paths] == [
        "a.mp4",
        "c.mp4",
        "empty.mp4",
        "d.mp4",
        "e.mp4",
        "f.mp4",
        "not_a_video.mp4",
    ]
    assert catalog.entry(videos / "cats" / "a.mp4").facts()["num_frames"] == 26
    assert catalog.entry(videos / "dogs" / "f.mp4").label == 1
    assert catalog.entry(videos / "dogs" / "d.mp4").facts() == untouched
    for entry in catalog.usable:
        fields_equal(entry.index(), vclip.index_video(entry.path))
    third = vcatalog.build_catalog(videos, out, workers=2, progress=False)
    assert third.indexed == () and third.kept == 7
    assert len(vcatalog.build_catalog(videos, out, workers=2, incremental=False, progress=False).indexed) == 7


def test_sources_can_be_files_list_files_and_pairs(dataset, tmp_path):
    listing = tmp_path / "list.csv"
    listing.write_text(f"path,label\n{dataset / 'cats' / 'a.mp4'},5\n{dataset / 'dogs' / 'd.mp4'},7\n")
    sources = [
        listing,
        dataset / "dogs" / "e.mp4",
        (dataset / "cats" / "c.mp4", 2),
        dataset / "dogs" / "d.mp4",
        tmp_path / "missing.mp4",
    ]
    videos, names = vcatalog.resolve_sources(sources)
    assert names is None
    assert [(os.path.basename(path), label) for path, label in videos] == [
        ("a.mp4", 5),
        ("d.mp4", 7),
        ("e.mp4", None),
        ("c.mp4", 2),
        ("missing.mp4", None),
    ]
    built = vcatalog.build_catalog(sources, tmp_path / "c.parquet", workers=1, progress=False)
    catalog = vcatalog.read_catalog(built.path)
    assert [entry.label for entry in catalog] == [5, 7, None, 2, None]
    assert [label for _, label, _ in catalog.sources()] == [5, 7, -1, 2, -1]
    with pytest.raises(VideoNotFoundError):
        catalog.index_of(tmp_path / "missing.mp4")
    with pytest.raises(FileNotFoundError, match="nope"):
        vcatalog.resolve_sources([tmp_path / "nope"])


def test_class_name_labels_of_a_list_file_are_kept_in_the_catalog(dataset, tmp_path):
    """A list naming classes: the catalog numbers them in sorted order (as the loader does), keeps
    the names in its metadata and rows, and a loader from it has the same ``classes``."""
    listing = tmp_path / "named.csv"
    listing.write_text(f"path,label\n{dataset / 'cats' / 'a.mp4'},playing guitar\n"
                       f"{dataset / 'dogs' / 'd.mp4'},abseiling\n{dataset / 'cats' / 'c.mp4'},playing guitar\n")
    videos, names = vcatalog.resolve_sources(listing)
    assert names == ("abseiling", "playing guitar") and [label for _, label in videos] == [1, 0, 1]
    built = vcatalog.build_catalog(listing, tmp_path / "named.parquet", workers=1, progress=False)
    catalog = vcatalog.read_catalog(built.path)
    assert catalog.class_names == ("abseiling", "playing guitar")
    assert pq.read_table(built.path, columns=["class_name"]).column(0).to_pylist() == [
        "playing guitar", "abseiling", "playing guitar"]
    loader = vclip.ClipLoader(built.path, vclip.contiguous(4), transform=vclip.TransformSpec(resize=(32, 32)),
                              device="cpu", decode_processes=0)
    assert loader.classes == ("abseiling", "playing guitar") and [v.label for v in loader.videos] == [1, 0, 1]
    loader.close()


def test_a_catalog_moves_with_its_dataset(tmp_path):
    """Videos inside the catalog's folder (files and members of shards) are stored relative to it,
    so the dataset moves, or mounts elsewhere, with its catalog: every row still names its video
    and a loader reads it; a video outside keeps its absolute path; an incremental run in the new
    place keeps the rows."""
    from vclip.webdataset import write_shards

    root = tmp_path / "data"
    make_dataset(root / "videos")
    write_shards([(root / "videos" / "dogs" / "d.mp4", 1)], root / "shards" / "part-{0000}.tar")
    (tmp_path / "elsewhere").mkdir()
    outside = make_video(tmp_path / "elsewhere" / "x.mp4", num_frames=12, width=32, height=32)
    sources = [root / "videos", *sorted((root / "shards").glob("*.tar")), outside]
    built = vcatalog.build_catalog(sources, root / "catalog.parquet", workers=1, progress=False)
    stored = pq.read_table(built.path, columns=["path", "shard"])
    paths, shards = stored.column("path").to_pylist(), stored.column("shard").to_pylist()
    assert paths[0] == os.path.join("videos", "cats", "a.mp4") and paths[-1] == outside
    assert paths[-2].startswith(os.path.join("shards", "part-0000.tar") + "#") and shards[-2] == os.path.join(
        "shards", "part-0000.tar")
    moved = tmp_path / "mounted" / "data"
    moved.parent.mkdir()
    shutil.move(root, moved)
    catalog = vcatalog.read_catalog(moved / "catalog.parquet")
    assert catalog.paths[0] == str(moved / "videos" / "cats" / "a.mp4") and catalog.paths[-1] == outside
    assert catalog.paths[-2].startswith(str(moved / "shards" / "part-0000.tar") + "#")
    assert catalog.to_table(["path", "shard"]).to_pylist()[-2]["shard"] == str(moved / "shards" / "part-0000.tar")
    spec = vclip.TransformSpec(resize=(32, 32))
    loader = vclip.ClipLoader(moved / "catalog.parquet", vclip.contiguous(4), transform=spec, batch_size=3,
                              device="cpu", decode_processes=0)
    batches = list(loader)
    assert set(loader.stats().skipped.videos) == {str(moved / "videos" / name) for name in BAD}
    assert sum(len(batch) for batch in batches) == 9
    for batch in batches:
        for clip, video, frames in zip(batch.data, batch.video_ids.tolist(), batch.frame_indices.tolist()):
            decoder = vclip.VideoDecoder(loader.videos[video].path, device="cpu")
            np.testing.assert_array_equal(clip.numpy(), decoder.get_frames(frames, transform=spec).data)
    loader.close()
    again = vcatalog.build_catalog([moved / "videos", *sorted((moved / "shards").glob("*.tar")), outside],
                                   moved / "catalog.parquet", workers=1, progress=False)
    assert again.indexed == () and again.kept == 9


def test_a_catalog_of_format_1_with_absolute_paths_still_reads(built, tmp_path):
    table = pq.read_table(built.path)
    absolute = vcatalog.read_catalog(built.path).paths
    metadata = {**catalog_read.catalog_metadata(table.schema, built.path), "format_version": 1}
    metadata.pop("paths")
    old = table.set_column(0, "path", pa.array(absolute, pa.string())).replace_schema_metadata(
        {b"vclip.catalog": json.dumps(metadata).encode()})
    pq.write_table(old, tmp_path / "old.parquet")
    catalog = vcatalog.read_catalog(tmp_path / "old.parquet")
    assert catalog.paths == absolute and os.path.dirname(absolute[0]) != str(tmp_path)
    usable = catalog.usable[0]
    assert usable.index().num_frames == vclip.index_video(usable.path).num_frames


def test_the_build_is_logged_once_named_by_the_logger(dataset, tmp_path, caplog):
    """Log lines read ``INFO:vclip:catalog ...`` with Python's default format, not ``vclip:vclip:``:
    the logger's name says where they come from."""
    import logging

    with caplog.at_level(logging.INFO, logger="vclip"):
        vcatalog.build_catalog(dataset / "dogs", tmp_path / "logged.parquet", workers=1, progress=False)
    lines = [logging.Formatter(logging.BASIC_FORMAT).format(record) for record in caplog.records]
    assert [line for line in lines if "catalog" in line] == [
        line for line in lines if line.startswith(f"INFO:vclip:catalog {tmp_path / 'logged.parquet'}: 3 videos")]
    assert lines and not any("vclip:vclip" in line for line in lines)


def test_a_file_that_crashes_its_worker_is_listed_not_fatal(dataset):
    paths = [str(p) for p in sorted(dataset.rglob("*.mp4")) if p.name not in ("empty.mp4", "not_a_video.mp4")]
    jobs = [IndexItem(number, path) for number, path in enumerate(paths + ["/crash/me.mp4"] + paths)]
    rows = sorted(index_rows(jobs, Processes(2), function=crash_on_request), key=lambda row: row["position"])
    assert [row["position"] for row in rows] == list(range(len(jobs)))
    crashed = rows[len(paths)]
    assert not crashed["usable"] and crashed["fingerprint"] is None and crashed["error_type"] == "CorruptVideoError"
    assert crashed["error"] == "its worker process crashed (exit code -9, SIGKILL); the file may be damaged"
    assert all(row["usable"] for row in rows if row is not crashed)


def crash_on_request(job):
    """index_row, but a worker given /crash/... dies as FFmpeg crashing would kill it."""
    if job.path.startswith("/crash/"):
        os.kill(os.getpid(), signal.SIGKILL)
    return index_row(job)


def test_catalog_pickles_and_refuses_a_replaced_file(built, tmp_path):
    out = tmp_path / "copy.parquet"
    shutil.copy(built.path, out)
    catalog = vcatalog.read_catalog(out)
    copy = pickle.loads(pickle.dumps(catalog))
    assert copy.paths == catalog.paths
    fields_equal(copy[0].index(), catalog[0].index())
    table = pq.read_table(out)
    meta = dict(table.schema.metadata)
    meta[b"vclip.catalog"] = meta[b"vclip.catalog"].replace(catalog.metadata["catalog_id"].encode(), b"0" * 32)
    pq.write_table(table.replace_schema_metadata(meta), out)
    with pytest.raises(ValueError, match="replaced"):
        pickle.loads(pickle.dumps(catalog))


def test_reading_refuses_files_that_are_not_catalogs(tmp_path):
    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"a": [1]}), plain)
    with pytest.raises(ValueError, match="not a vclip catalog"):
        vcatalog.read_catalog(plain)
    with pytest.raises(FileNotFoundError):
        vcatalog.read_catalog(tmp_path / "none.parquet")
    (tmp_path / "junk.parquet").write_bytes(b"junk")
    with pytest.raises(ValueError, match="not a readable Parquet"):
        vcatalog.read_catalog(tmp_path / "junk.parquet")


def test_building_never_replaces_a_file_that_is_not_a_catalog(dataset, tmp_path, capsys):
    other = tmp_path / "results.parquet"
    pq.write_table(pa.table({"accuracy": [0.9]}), other)
    with pytest.raises(ValueError, match="not a vclip catalog; refusing"):
        vcatalog.build_catalog(dataset, other, workers=1, progress=False)
    assert main(["index", str(dataset), "--out", str(other), "--rebuild"]) == 2
    assert "refusing" in capsys.readouterr().err
    assert pq.read_table(other).column_names == ["accuracy"]
    (tmp_path / "folder.parquet").mkdir()
    with pytest.raises(ValueError, match="is a folder"):
        vcatalog.build_catalog(dataset, tmp_path / "folder.parquet", workers=1, progress=False)


def test_a_damaged_row_is_indexed_from_the_video_instead(built, tmp_path):
    table = pq.read_table(built.path)
    rows = table.column("frame_packet").to_pylist()
    rows[0] = [value + 1000 for value in rows[0]]  # packet numbers out of range
    damaged = table.set_column(
        table.column_names.index("frame_packet"), "frame_packet", pa.array(rows, pa.list_(pa.int64()))
    )
    pq.write_table(damaged, tmp_path / "damaged.parquet")
    catalog = vcatalog.read_catalog(tmp_path / "damaged.parquet")
    with pytest.warns(vcatalog.CatalogWarning, match="damaged"):
        index = catalog[0].index()
    fields_equal(index, vclip.index_video(catalog[0].path))
    fields_equal(catalog[1].index(), vclip.index_video(catalog[1].path))  # the others are fine


def _with_row(table, column: str, row: int, value):
    """``table`` with ``column``'s value in ``row`` replaced."""
    values = table.column(column).to_pylist()
    values[row] = value
    return table.set_column(table.column_names.index(column), column, pa.array(values, table.schema.field(column).type))


def _usable_rows(table) -> list[int]:
    return [row for row, usable in enumerate(table.column("usable").to_pylist()) if usable]


@pytest.mark.parametrize("column, damage", [
    ("pts", lambda value: value[::-1]),  # reversed frames
    ("pts", lambda value: [value[0]] * len(value)),
    ("packet_pts", lambda value: value[1:] + value[:1]),  # frames' pts no longer their packets'
    ("packet_frame", lambda value: [-1] * len(value)),
    ("packet_size", lambda value: [-5] + value[1:]),
    ("time_base", lambda value: "1/0"),
    ("time_base", lambda value: "-1/30"),
    ("bit_depth", lambda value: 0),
    ("width", lambda value: -64),
    ("color_range", lambda value: "sideways"),
    ("sample_aspect_ratio", lambda value: "2147483647/1"),
    ("rotation", lambda value: 45),
])
def test_a_damaged_row_is_that_videos_problem_reported_once(built, tmp_path, column, damage):
    """Rows are checked as disk-cache entries are (check_index): one damaged row is indexed from
    its video instead, with one warning, and the other rows of its row group are untouched."""
    table = pq.read_table(built.path)
    row, other = _usable_rows(table)[:2]
    damaged = _with_row(table, column, row, damage(table.column(column)[row].as_py()))
    pq.write_table(damaged.replace_schema_metadata(table.schema.metadata), tmp_path / "damaged.parquet")
    catalog = vcatalog.read_catalog(tmp_path / "damaged.parquet")
    with pytest.warns(vcatalog.CatalogWarning, match="its row in catalog .* is damaged") as caught:
        for _ in range(3):
            index = catalog[row].index()
    assert len([w for w in caught if issubclass(w.category, vcatalog.CatalogWarning)]) == 1
    fields_equal(index, vclip.index_video(catalog[row].path))
    fields_equal(catalog[other].index(), vclip.index_video(catalog[other].path))


def test_the_row_group_check_agrees_with_check_index(built, tmp_path):
    """The vectorized check of a row group's arrays (_damaged_rows) against check_index, its
    one-video twin, over single damages of every integer array of every usable row."""
    from vclip._index.record import check_index

    table = pq.read_table(built.path)
    changes = (lambda v: v[::-1], lambda v: [v[0] - 1] + v[1:], lambda v: v[:-1] + [v[-1] + 10**6],
               lambda v: [-2] + v[1:], lambda v: v[1:] + v[:1], lambda v: v[:1] * len(v))
    disagreements, cases = [], 0
    for name, dtype in vclip.VideoIndex.STORED_ARRAYS.items():
        if dtype is np.bool_:
            continue  # any value is possible
        for row in _usable_rows(table):
            for change in changes:
                damaged = _with_row(table, name, row, change(table.column(name)[row].as_py()))
                pq.write_table(damaged.replace_schema_metadata(table.schema.metadata), tmp_path / "one.parquet")
                stored, passed = vcatalog.read_catalog(tmp_path / "one.parquet")._stored(row)
                try:
                    check_index(vclip.VideoIndex(path="x", **stored))
                    refused = False
                except (ValueError, IndexError):
                    refused = True
                cases += 1
                if passed == refused:
                    disagreements.append((name, row, stored[name][:6].tolist(), passed, refused))
    assert cases > 100 and disagreements == []
    # frames listed backwards, consistently in all three arrays: only their order betrays them
    row = _usable_rows(table)[0]
    frame_packet = table.column("frame_packet")[row].as_py()[::-1]
    packet_frame = [-1] * len(table.column("packet_frame")[row].as_py())
    for frame, packet in enumerate(frame_packet):
        packet_frame[packet] = frame
    backwards = table
    for name, value in (("pts", table.column("pts")[row].as_py()[::-1]), ("frame_packet", frame_packet),
                        ("packet_frame", packet_frame)):
        backwards = _with_row(backwards, name, row, value)
    pq.write_table(backwards.replace_schema_metadata(table.schema.metadata), tmp_path / "backwards.parquet")
    assert not vcatalog.read_catalog(tmp_path / "backwards.parquet")._stored(row)[1]


def test_column_types_other_than_the_catalogs_are_refused_at_once(built, tmp_path):
    table = pq.read_table(built.path)
    for column, kind in (("pts", pa.list_(pa.int32())), ("width", pa.string())):
        retyped = table.set_column(table.column_names.index(column), column, table.column(column).cast(kind))
        pq.write_table(retyped.replace_schema_metadata(table.schema.metadata), tmp_path / "retyped.parquet")
        with pytest.raises(ValueError, match=rf"retyped.parquet is not a vclip catalog as written: column {column} "):
            vcatalog.read_catalog(tmp_path / "retyped.parquet")


def test_an_empty_catalog_is_refused_by_the_loader_in_words(built, tmp_path):
    table = pq.read_table(built.path)
    pq.write_table(table.slice(0, 0), tmp_path / "empty.parquet")
    assert len(vcatalog.read_catalog(tmp_path / "empty.parquet")) == 0
    with pytest.raises(vclip.ArgumentError, match=r"videos \(catalog .*empty.parquet\) holds no videos"):
        vclip.ClipLoader(str(tmp_path / "empty.parquet"), vclip.contiguous(4), device="cpu")


def test_from_arrays_refuses_arrays_that_do_not_fit(built):
    stored = vcatalog.read_catalog(built.path).usable[0].index().to_arrays()
    with pytest.raises(ValueError, match="do not fit"):
        vclip.VideoIndex.from_arrays("x.mp4", {**stored, "pts": stored["pts"][:-1]})
    with pytest.raises(ValueError, match="out of range"):
        vclip.VideoIndex.from_arrays("x.mp4", {**stored, "frame_packet": stored["frame_packet"] + 1000})
    with pytest.raises(ValueError, match="missing fields"):
        vclip.VideoIndex.from_arrays("x.mp4", {k: v for k, v in stored.items() if k != "codec"})


def test_the_readme_queries_run(built):
    pandas = require_extra("pandas")
    df = pandas.read_parquet(
        built.path, columns=["class_name", "codec", "average_fps", "duration_seconds", "size_bytes", "usable"]
    )
    summary = df[df.usable].groupby("class_name").agg(videos=("codec", "size"), hours=("duration_seconds", "sum"))
    assert summary["videos"].to_dict() == {"cats": 3, "dogs": 2}
    duckdb = require_extra("duckdb")
    rows = duckdb.sql(
        f"SELECT codec, count(*) AS videos FROM '{built.path}' WHERE usable GROUP BY codec ORDER BY codec"
    ).fetchall()
    assert rows == [("h264", 3), ("hevc", 1), ("mpeg4", 1)]


def test_cli_index_builds_then_updates(dataset, tmp_path, capsys):
    out = tmp_path / "cli.parquet"
    assert main(["index", str(dataset), "--out", str(out), "--workers", "2"]) == 3  # some unusable
    captured = capsys.readouterr()
    assert "7 videos (7 indexed, 0 unchanged), 2 unusable" in captured.out
    assert "unusable" in captured.err and "not_a_video.mp4" in captured.err
    assert len(vcatalog.read_catalog(out)) == 7
    assert main(["index", str(dataset), "--out", str(out), "--json"]) == 3
    report = __import__("json").loads(capsys.readouterr().out)
    assert (report["indexed"], report["kept"], len(report["unusable"])) == (0, 7, 2)
    assert main(["index", str(dataset / "cats" / "a.mp4"), "--out", str(out)]) == 0
    assert "1 video (0 indexed, 1 unchanged)" in capsys.readouterr().out
    assert main(["index", str(dataset), "--out", str(tmp_path / "x.csv")]) == 2
    assert main(["index", str(tmp_path / "nope"), "--out", str(out)]) == 2
    assert "nope" in capsys.readouterr().err


def _has(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


class warnings_as_errors:
    def __enter__(self):
        import warnings

        self._context = warnings.catch_warnings()
        self._context.__enter__()
        warnings.simplefilter("error")

    def __exit__(self, *exc):
        return self._context.__exit__(*exc)
