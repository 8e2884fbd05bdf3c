"""An MPEG-TS file with B-frames cut off anywhere: frame ``i`` is still the ``i``-th picture, with no
gap (a cut loses B-frames shown before pictures already decoded: those pictures are left out), the
same pictures FFmpeg decodes; a file that ends inside a transport packet warns that it is truncated
(a whole one ends at a packet's end); and ``check`` says corrupt where FFmpeg decodes pictures past
the index's last frame. It was a gap (frames ...15, 17 where FFmpeg gives 0..17), a cut with no
warning at all, and ``check`` saying ok."""

from __future__ import annotations

import warnings

import av
import numpy as np
import pytest
from helpers import barcodes

import vclip
from vclip.check import check_video
from vclip.synthetic import make_video, read_barcode

_TS_PACKET = 188


@pytest.fixture(scope="module")
def whole(tmp_path_factory) -> bytes:
    folder = tmp_path_factory.mktemp("ts")
    path = make_video(folder / "b.ts", num_frames=30, width=64, height=48, keyframe_interval=10, b_frames=2)
    return open(path, "rb").read()


def ffmpeg_pictures(path: str) -> list[int]:
    with av.open(path) as container:
        return [read_barcode(frame.to_ndarray(format="rgb24")) for frame in container.decode(video=0)]


def test_a_cut_anywhere_keeps_frames_whole_in_order_and_warns(whole, tmp_path):
    path = str(tmp_path / "cut.ts")
    cuts = [cut for cut in range(8 * _TS_PACKET, len(whole), 61) if cut % _TS_PACKET]
    indexed = 0
    for cut in cuts:
        with open(path, "wb") as file:
            file.write(whole[:cut])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                index = vclip.index_video(path)
            except vclip.VideoError:  # cut before the first picture is whole
                continue
        indexed += 1
        pictures = barcodes(vclip.VideoDecoder(path, device="cpu").get_frames(list(range(index.num_frames))))
        assert pictures == list(range(index.num_frames)), cut  # no gap: frame i is picture i
        assert pictures == ffmpeg_pictures(path)[:index.num_frames], cut
        messages = [str(w.message) for w in caught if issubclass(w.category, vclip.TruncatedVideoWarning)]
        assert len(messages) == 1 and messages[0].startswith(f"{path}: truncated: the file "), (cut, messages)
    assert indexed > 0.8 * len(cuts)


@pytest.mark.parametrize("share", [0.47, 0.64, 0.9])
def test_check_says_corrupt_where_ffmpeg_decodes_past_the_index(whole, tmp_path, share):
    """Cuts where FFmpeg decodes pictures past the frames the index keeps (a concealed one, or ones
    past a hole)."""
    path = str(tmp_path / "cut.ts")
    for cut in range(int(share * len(whole)), len(whole)):
        with open(path, "wb") as file:
            file.write(whole[:cut])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", vclip.TruncatedVideoWarning)
            frames = vclip.index_video(path).num_frames
        if len(ffmpeg_pictures(path)) > frames:
            break
    else:
        pytest.fail("no cut where FFmpeg decodes more pictures than the index keeps")
    result = check_video(path, device="cpu")
    assert result.status == "corrupt" and result.num_frames == frames
    assert any("come out of a cut-off end (truncated" in problem for problem in result.problems), result.problems
    assert np.all(np.asarray(result.bad_frames) < frames)
