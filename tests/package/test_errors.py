"""Every exception a user meets on the public API's error paths is vclip's: a VideoError (naming the
file) or an ArgumentError, of a class that also derives from the built-in exception it takes the
place of, so that ``except IndexError`` (or ``ValueError``, ``FileNotFoundError``, ``KeyError``)
written against the built-in still catches it."""

from __future__ import annotations

import pytest
from helpers import require_extra, zero_second_half

import vclip
from vclip.synthetic import make_video


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("errors")
    video = make_video(folder / "clip.mp4", num_frames=40, width=64, height=48, keyframe_interval=20)
    (folder / "notes.mp4").write_text("not a video\n" * 20)
    return {
        "folder": folder,
        "video": video,
        "damaged": zero_second_half(video, folder / "damaged.mp4", 20),
        "text": str(folder / "notes.mp4"),
        "missing": str(folder / "missing.mp4"),
    }


def _decoder(files, name="video"):
    return vclip.VideoDecoder(files[name], device="cpu")


# (what, call, vclip's class, the built-in it takes the place of, words of the message)
CASES = [
    ("a missing video", lambda f: _decoder(f, "missing"), vclip.VideoNotFoundError, FileNotFoundError,
     "missing.mp4: file does not exist"),
    ("a text file", lambda f: _decoder(f, "text"), vclip.NotAVideoError, Exception, "notes.mp4"),
    ("a frame number out of range", lambda f: _decoder(f).get_frames([0, 40]), vclip.FrameIndexError, IndexError,
     "clip.mp4: frame index 40 is out of range"),
    ("decoder[i] out of range", lambda f: _decoder(f)[-41], vclip.FrameIndexError, IndexError,
     "frame index -41 is out of range"),
    ("an indexed sampler out of range", lambda f: vclip.indexed([5]).sample(3), vclip.FrameIndexError, IndexError,
     "frame index 5 is out of range"),
    ("no frame numbers", lambda f: _decoder(f).get_frames([]), vclip.ArgumentError, ValueError,
     "list of frame indices is empty"),
    ("a time outside the stream", lambda f: _decoder(f).get_frames_played_at(9.0), vclip.ArgumentError, ValueError,
     "clip.mp4: time 9.0 s is outside the stream"),
    ("a video shorter than one clip, end_policy='error'",
     lambda f: _decoder(f).get_clips(vclip.strided(30, 2, end_policy="error")), vclip.NoClipFitsError, ValueError,
     "clip.mp4: a clip needs 59 frames"),
    ("a frame count shorter than one clip", lambda f: vclip.contiguous(10, end_policy="error").sample(5),
     vclip.NoClipFitsError, ValueError, "a clip needs 10 frames"),
    ("a segment that holds no frame",
     lambda f: _decoder(f).get_clips(vclip.contiguous(4), segment=(50.0, 60.0)), vclip.NoClipFitsError, ValueError,
     "clip.mp4: the segment [50 s, 60 s) holds no frame"),
    ("a crop larger than the resized frame",
     lambda f: _decoder(f).get_frames([0], transform=vclip.TransformSpec(resize=32, crop=64)), vclip.ArgumentError,
     ValueError, "clip.mp4: crop 64x64 (HxW) is larger than the resized frame"),
    ("a removed method", lambda f: _decoder(f).get_frames_at([0]), vclip.ArgumentError, TypeError,
     "get_frames_at is ambiguous"),
    ("a bad device", lambda f: vclip.VideoDecoder(f["video"], device="tpu"), vclip.ArgumentError, ValueError,
     "device ('tpu')"),
    ("a bad stride", lambda f: vclip.strided(4, 0), vclip.ArgumentError, ValueError, "stride (0) must be"),
    ("a bad byte count", lambda f: vclip.parse_bytes("8 parsecs"), vclip.ArgumentError, ValueError,
     "memory size ('8 parsecs')"),
    ("a damaged frame", lambda f: _decoder(f, "damaged").get_frames([25]), vclip.CorruptVideoError, Exception,
     "damaged.mp4: frame 20 cannot be decoded"),
    ("a closed decoder", lambda f: _closed(_decoder(f)).get_frames([0]), vclip.ArgumentError, ValueError,
     "this VideoDecoder is closed"),
    ("a synthetic video of a codec that is not one", lambda f: make_video(f["folder"] / "x.mp4", codec="mp3"),
     vclip.ArgumentError, ValueError, "'mp3' is not a video codec"),
]


def _closed(decoder):
    decoder.close()
    return decoder


@pytest.mark.parametrize("what, call, error, builtin, words", CASES, ids=[case[0] for case in CASES])
def test_public_error_paths_raise_vclip_errors_that_are_also_the_builtin(files, what, call, error, builtin, words):
    with pytest.raises(builtin) as caught:
        call(files)
    assert type(caught.value) is error, f"{what}: {type(caught.value).__name__}: {caught.value}"
    assert type(caught.value).__module__ == "vclip" and isinstance(caught.value, (vclip.VideoError,
                                                                                   vclip.ArgumentError))
    assert words in str(caught.value)


def test_dataset_inputs_that_do_not_exist_are_path_not_found(files):
    require_extra("torch")
    missing = str(files["folder"] / "no_such_folder")
    with pytest.raises(FileNotFoundError) as caught:
        vclip.ClipLoader(missing, vclip.contiguous(4), device="cpu", decode_processes=0)
    assert type(caught.value) is vclip.PathNotFoundError and "no_such_folder" in str(caught.value)


def test_catalog_errors_are_vclips(files, tmp_path):
    require_extra("pyarrow")
    from vclip.catalog import build_catalog, read_catalog

    with pytest.raises(FileNotFoundError) as caught:
        read_catalog(tmp_path / "none.parquet")
    assert type(caught.value) is vclip.PathNotFoundError
    out = tmp_path / "dataset.parquet"
    build_catalog([files["video"]], out, workers=1)
    catalog = read_catalog(out)
    with pytest.raises(KeyError) as missing:
        catalog.entry(files["missing"])
    assert type(missing.value) is vclip.NotInCatalogError
    assert str(missing.value) == f"{files['missing']!r} is not in catalog {out}"
    assert files["missing"] not in catalog and files["video"] in catalog
    (tmp_path / "table.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(ValueError) as unreadable:
        read_catalog(tmp_path / "table.parquet")
    assert type(unreadable.value) is vclip.ArgumentError and "table.parquet" in str(unreadable.value)


def test_the_new_classes_keep_their_fields_across_processes():
    import pickle

    for error in (vclip.FrameIndexError("a.mp4: frame index 9 is out of range"),
                  vclip.NoClipFitsError("a.mp4", "short"), vclip.PathNotFoundError("videos ('x') is neither"),
                  vclip.NotInCatalogError("'x' is not in catalog")):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error) and str(copy) == str(error)
    assert vclip.NoClipFitsError("a.mp4", "short").path == "a.mp4"
