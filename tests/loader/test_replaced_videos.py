"""A catalog whose videos were replaced by others of another size: each such video is that video's
error, naming it and both sizes, and ``on_error="skip"`` replaces its clips by clips of the others
(it was "could not broadcast" for every clip, taken for damaged frames, so the video stayed in use and
the epoch ended with "no usable video is left ... 0 of the 6 videos failed")."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import barcodes, require_extra

import vclip
from vclip.synthetic import make_video

require_extra("pyarrow")

FRAMES = 24


@pytest.fixture
def catalog(tmp_path) -> tuple[str, list[str]]:
    """A catalog of six 64x48 videos, two of which were then replaced by 96x64 ones."""
    from vclip.catalog import build_catalog

    videos = [make_video(tmp_path / f"v{i}.mp4", num_frames=FRAMES, width=64, height=48, seed=i) for i in range(6)]
    build_catalog(videos, tmp_path / "catalog.parquet", workers=1)
    for i in (1, 4):
        make_video(tmp_path / f"v{i}.mp4", num_frames=FRAMES, width=96, height=64, seed=10 + i)
    return str(tmp_path / "catalog.parquet"), videos


def test_a_video_replaced_by_one_of_another_size_is_skipped_and_replaced(catalog):
    path, videos = catalog
    loader = vclip.ClipLoader(path, vclip.contiguous(4), batch_size=3, device="cpu", num_threads=1,
                              on_error="skip", seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vclip.CatalogWarning)  # the changed files are indexed again
        batches = list(loader)
    assert sum(batch.data.shape[0] for batch in batches) == 6
    for batch in batches:
        assert tuple(batch.data.shape[1:]) == (4, 48, 64, 3)
        assert set(batch.video_ids.tolist()) <= {0, 2, 3, 5}
        for clip, frames in zip(batch.data, batch.frame_indices):
            assert barcodes(clip) == frames.tolist()
    skipped = loader.stats().skipped.videos
    assert sorted(skipped) == [videos[1], videos[4]]
    for problem in skipped.values():
        assert problem == ("its clips come out [4, 64, 96, 3] (a 96x64 video) but the batch holds [4, 48, 64, 3]: "
                           "the file changed size since it was indexed")


def test_with_on_error_raise_the_replaced_video_is_the_error(catalog):
    path, videos = catalog
    loader = vclip.ClipLoader(path, vclip.contiguous(4), batch_size=6, device="cpu", num_threads=1, seed=3,
                              on_error="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vclip.CatalogWarning)
        with pytest.raises(vclip.VideoError, match=r"v[14].mp4: its clips come out \[4, 64, 96, 3\] \(a 96x64 video\)"):
            next(iter(loader))
    np.testing.assert_array_equal(loader.clip_shape, (4, 48, 64, 3))


def test_when_every_video_failed_the_error_is_vclips_and_names_the_video(tmp_path):
    """Every video of the catalog replaced by one of another size: nothing can take a failed video's
    place. It was a bare ``RuntimeError``; it is a ``NoVideoLeftError`` (still a ``RuntimeError``)
    naming the video whose clip needed a replacement and how many failed."""
    from vclip.catalog import build_catalog

    videos = [make_video(tmp_path / f"v{i}.mp4", num_frames=FRAMES, width=64, height=48, seed=i) for i in range(3)]
    build_catalog(videos, tmp_path / "catalog.parquet", workers=1)
    for i in range(3):
        make_video(tmp_path / f"v{i}.mp4", num_frames=FRAMES, width=96, height=64, seed=10 + i)
    loader = vclip.ClipLoader(str(tmp_path / "catalog.parquet"), vclip.contiguous(4), batch_size=2, device="cpu",
                              num_threads=1, on_error="skip", seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vclip.CatalogWarning)
        with pytest.raises(vclip.NoVideoLeftError) as caught:
            next(iter(loader))
    assert isinstance(caught.value, RuntimeError)
    assert caught.value.path in videos
    assert str(caught.value) == (f"{caught.value.path}: no usable video is left in this shard to replace it: 3 of the "
                                 "3 videos failed (see loader.stats().skipped)")
    assert sorted(loader.stats().skipped.videos) == sorted(videos)
