"""Labelled segments: list files and Python inputs that give rows a time window; clips drawn only
from the frames whose pts lie inside it, with the segment's label; short segments and the end
policies; malformed rows refused with the file and line."""

import numpy as np
import pytest
from helpers import require_extra

import vclip
from vclip._datasets.inputs import load_videos
from vclip.synthetic import make_video, read_barcode

# Two segments of one 5-second 30 fps video (frames 15..59 and 90..134), with different labels.
SEGMENTS = [(0.5, 2.0, 3), (3.0, 4.5, 7)]


@pytest.fixture(scope="module")
def video(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("segments")
    return make_video(folder / "movie.mp4", num_frames=150, width=64, height=48, fps=30, keyframe_interval=30)


def make_loader(videos, sampler, **options) -> "vclip.ClipLoader":
    require_extra("torch")
    options = {"device": "cpu", "batch_size": 8, "num_threads": 2, "seed": 1} | options
    return vclip.ClipLoader(videos, sampler, **options)


def check_batches(loader: "vclip.ClipLoader", expected_rows: int) -> set[int]:
    """Every clip's frames lie inside its row's segment (by pts), with the row's label; returns the rows seen."""
    seen = set()
    for batch in loader:
        assert batch.segment_ids.tolist() == batch.video_ids.tolist()
        for clip, frames, pts, label, row in zip(
            batch.data.numpy(),
            batch.frame_indices.numpy(),
            batch.pts_seconds.numpy(),
            batch.labels.tolist(),
            batch.segment_ids.tolist(),
        ):
            segment = loader.videos[row]
            assert label == segment.label
            assert np.all(pts >= segment.start - 1e-9) and np.all(pts < segment.end), (row, pts)
            assert [read_barcode(frame) for frame in clip] == frames.tolist()
            seen.add(row)
    assert len(seen) == expected_rows
    return seen


def test_csv_with_header_two_segments_of_one_video(video, tmp_path):
    rows = "".join(f"movie.mp4,{start},{end},{label}\n" for start, end, label in SEGMENTS)
    list_file = tmp_path / "segments.csv"
    (tmp_path / "movie.mp4").symlink_to(video)
    list_file.write_text("path,start,end,label\n" + rows)
    loader = make_loader(str(list_file), vclip.strided(4, 3, clips_per_video=6))
    assert [(v.start, v.end, v.label) for v in loader.videos] == SEGMENTS
    check_batches(loader, 2)
    # In seconds as well: 4 frames at 10 fps inside each segment.
    check_batches(make_loader(str(list_file), vclip.contiguous(4, fps=10, clips_per_video=6)), 2)


def test_whitespace_lines_tuples_and_rows_agree(video, tmp_path):
    (tmp_path / "movie.mp4").symlink_to(video)
    text = tmp_path / "segments.txt"
    text.write_text("# path start end label\nmovie.mp4 0.5 2 3\nmovie.mp4 00:03 0:04.5 7\n")
    other_order = tmp_path / "other_order.csv"
    other_order.write_text("label,path,end_seconds,start_seconds\n3,movie.mp4,2.0,0.5\n7,movie.mp4,4.5,3\n")
    tuples = [(video, label, start, end) for start, end, label in SEGMENTS]
    rows = [vclip.LabeledVideo(video, label, start, end) for start, end, label in SEGMENTS]
    for source in (str(text), str(other_order), tuples, rows):
        listed, _ = load_videos(source)
        assert [(v.start, v.end, v.label) for v in listed] == SEGMENTS
    sampler = vclip.contiguous(6, starts="even", clips_per_video=2)
    first = [batch.frame_indices.tolist() for batch in make_loader(tuples, sampler)]
    assert first == [batch.frame_indices.tolist() for batch in make_loader(str(text), sampler)]
    # Even starts span each segment: first clip at its first frame, last clip ending on its last one.
    assert first[0] == [list(range(15, 21)), list(range(54, 60)), list(range(90, 96)), list(range(129, 135))]


def test_a_row_without_times_is_the_whole_video_and_old_lists_still_work(video, tmp_path):
    (tmp_path / "movie.mp4").symlink_to(video)
    (tmp_path / "mixed.csv").write_text("path,label,start,end\nmovie.mp4,1,,\nmovie.mp4,2,4,\n")
    whole, tail = load_videos(str(tmp_path / "mixed.csv"))[0]
    assert whole.segment is None and tail.segment == (4.0, None)
    (tmp_path / "plain.txt").write_text("movie.mp4 5\n")
    (plain,) = load_videos(str(tmp_path / "plain.txt"))[0]
    assert (plain.label, plain.segment) == (5, None)
    index = vclip.index_video(video)
    clips = vclip.contiguous(10, starts="step", step=10).sample(index, segment=tail.segment)
    assert [clip[0] for clip in clips] == [120, 130, 140]  # from 4 s to the end


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("repeat_last", [30, 31, 32, 33, 34, 35, 35, 35, 35, 35]),
        ("wrap", [30, 31, 32, 33, 34, 35, 30, 31, 32, 33]),
    ],
)
@pytest.mark.parametrize("in_seconds", [False, True])
def test_short_segment_pads_inside_it(video, policy, expected, in_seconds):
    """[1.0, 1.2) holds frames 30..35; a clip of 10 frames cannot fit."""
    options = dict(fps=30.0) if in_seconds else {}
    sampler = vclip.contiguous(10, end_policy=policy, **options)
    decoder = vclip.VideoDecoder(video, device="cpu")
    result = decoder.get_clips(sampler, segment=(1.0, 1.2))
    assert result.frame_indices.tolist() == [expected]
    assert result.padded.tolist() == [[False] * 6 + [True] * 4]
    assert [[read_barcode(frame) for frame in clip] for clip in np.asarray(result.data)] == [expected]
    loader = make_loader([(video, 4, 1.0, 1.2), (video, 5, 2.0, 3.0)], sampler, batch_size=2)
    (batch,) = list(loader)
    assert batch.frame_indices.tolist()[0] == expected and batch.labels.tolist() == [4, 5]


@pytest.mark.parametrize("in_seconds", [False, True])
def test_short_segment_drop_and_error(video, in_seconds):
    options = dict(fps=30.0) if in_seconds else {}
    index = vclip.index_video(video)
    assert vclip.contiguous(10, end_policy="drop", **options).sample(index, segment=(1.0, 1.2)) == []
    with pytest.raises(ValueError, match=r"movie\.mp4: .*the segment \[1 s, 1\.2 s\).*end_policy='error'"):
        vclip.contiguous(10, end_policy="error", **options).sample(index, segment=(1.0, 1.2))
    # In the loader the row whose clips are all dropped is left out like a bad video.
    sampler = vclip.contiguous(10, end_policy="drop", **options)
    loader = make_loader([(video, 4, 1.0, 1.2), (video, 5, 2.0, 3.0)], sampler, batch_size=2)
    assert "no clip of 10 frames" in loader.stats().skipped.videos[video]
    assert "the segment [1 s, 1.2 s)" in loader.stats().skipped.videos[video]
    (batch,) = list(loader)
    assert set(batch.labels.tolist()) == {5}


def test_empty_or_reversed_segments_are_refused(video, tmp_path):
    index = vclip.index_video(video)
    with pytest.raises(ValueError, match=r"the segment \[6 s, 7 s\) holds no frame"):
        vclip.contiguous(4).sample(index, segment=(6.0, 7.0))
    with pytest.raises(vclip.ArgumentError, match=r"segment \(\(2\.0, 1\.0\)\) must be a \(start, end\) pair"):
        vclip.contiguous(4).sample(index, segment=(2.0, 1.0))
    with pytest.raises(ValueError, match=r"segment start \(2\.0\) must be before its end \(1\.0\)"):
        vclip.LabeledVideo(video, 0, 2.0, 1.0)
    bad = tmp_path / "bad.csv"
    for text, message in [
        ("path,start,end,label\nmovie.mp4,2,1,0\n", r"bad\.csv, line 2: .*start \(2\.0\) must be before"),
        ("path,start,end,label\nmovie.mp4,x,1,0\n", r"bad\.csv, line 2: .*start \('x'\) must be seconds"),
        ("path,begin,label\nmovie.mp4,1,0\n", r"unknown column 'begin'"),
        ("path,start,end,label\nmovie.mp4,1,0\n", r"line 2 .* has 3 fields, the header names 4"),
    ]:
        bad.write_text(text)
        with pytest.raises(ValueError, match=message):
            load_videos(str(bad))
    with pytest.raises(ValueError, match=r"videos\[0\] .* must be a \(path, label\) pair or a"):
        load_videos([(video, 1, 2.0)])


def test_times_and_labels_are_read_as_written_not_as_python_literals(video, tmp_path):
    """Python's float() and int() read ``1_0`` as 10: a time or label with an underscore is refused,
    naming the line; times in seconds (also ``1e3``, ``.5``) and ``[HH:]MM:SS[.ff]`` still read."""
    table = tmp_path / "segments.csv"
    for field, text in [("start", "path,start,end,label\nmovie.mp4,1_0,20,0\n"),
                        ("end", "path,start,end,label\nmovie.mp4,0,2_0,0\n")]:
        table.write_text(text)
        with pytest.raises(vclip.ArgumentError, match=rf"segments\.csv, line 2: .*{field} \('[12]_0'\) must be"):
            load_videos(str(table))
    table.write_text("path,start,end,label\nmovie.mp4,0,2,3\nmovie.mp4,0,2,1_0\n")  # not the integer 10
    with pytest.raises(vclip.ArgumentError, match=r"the labels mix integers \(.*segments\.csv, line 2: '3'\) and "
                                                  r"class names \(.*segments\.csv, line 3: '1_0'\)"):
        load_videos(str(table))
    table.write_text("path,start,end,label\nmovie.mp4,.5,1e1,+3\nmovie.mp4,00:01,0:01:02.5,-1\n")
    (first, second), _ = load_videos(str(table))
    assert (first.start, first.end, first.label) == (0.5, 10.0, 3)
    assert (second.start, second.end, second.label) == (1.0, 62.5, -1)
    assert vclip.LabeledVideo(video, np.int64(2), np.float32(0.5), 2).start == 0.5


def test_segments_change_the_resume_fingerprint(video):
    sampler = vclip.contiguous(4)
    first = make_loader([(video, 0, 0.0, 1.0)], sampler).state_dict()["fingerprint"]
    assert first != make_loader([(video, 0, 0.0, 2.0)], sampler).state_dict()["fingerprint"]
