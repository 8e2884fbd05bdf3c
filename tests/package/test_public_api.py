"""The public surface: the exported names, what ``import vclip`` makes reachable (without torch),
the frame methods' names, one wording for argument errors, padded clips and empty results."""

import re
import subprocess
import sys

import numpy as np
import pytest
import tomllib
from helpers import ROOT, require_extra

import vclip

EXPORTED = [
    "ArgumentError",
    "AudioClips",
    "AudioIndex",
    "AudioSpec",
    "CatalogWarning",
    "Augmentations",
    "ClipBatch",
    "ClipLoader",
    "ClipSampler",
    "ColorJitter",
    "ClipStream",
    "CorruptVideoError",
    "DamagedHeaderWarning",
    "DecodePlan",
    "DecodeSegment",
    "FallbackWarning",
    "FrameGeometry",
    "Frames",
    "HuggingFaceSource",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "IndexCacheWarning",
    "LabeledVideo",
    "LoaderMemoryEstimate",
    "LoaderStats",
    "MemoryEstimate",
    "MultiScaleCrop",
    "NoAudioError",
    "NoClipFitsError",
    "NoVideoLeftError",
    "NotAVideoError",
    "NotInCatalogError",
    "PathNotFoundError",
    "FrameIndexError",
    "RandomResizedCrop",
    "RandomShortSideScale",
    "RemoteOptions",
    "RemoteReadWarning",
    "RemoteReads",
    "ShardWriteResult",
    "StreamBatch",
    "TransformSpec",
    "TruncatedVideoWarning",
    "UnreadableVideoError",
    "UnsupportedCodecError",
    "VideoDecoder",
    "VideoError",
    "VideoIndex",
    "VideoNotFoundError",
    "WebDatasetSource",
    "__version__",
    "clear_index_cache",
    "contiguous",
    "downscaled",
    "estimate_memory",
    "format_bytes",
    "index_audio",
    "index_video",
    "indexed",
    "jittered",
    "keyframe",
    "largest_batch_size",
    "largest_sequence_length",
    "parse_bytes",
    "plan_decode",
    "plan_loader_memory",
    "set_remote_options",
    "strided",
    "write_shards",
]
SUBMODULES = [
    "audio",
    "check",
    "decoder",
    "errors",
    "huggingface",
    "index",
    "keyframes",
    "memory",
    "plan",
    "sampling",
    "synthetic",
    "transforms",
    "webdataset",
]


def run_python(code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter that imports this checkout's vclip."""
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)


# -- names ------------------------------------------------------------------------------------------
def test_exported_names_are_pinned():
    assert sorted(vclip.__all__) == sorted(EXPORTED) and len(set(vclip.__all__)) == len(vclip.__all__)
    for name in EXPORTED:
        if name not in ("ClipLoader", "ClipBatch", "ClipStream", "StreamBatch"):
            assert hasattr(vclip, name), name


def test_every_exception_lives_in_vclip_errors_and_exported_ones_say_vclip():
    """One home for errors and warnings (``vclip.errors``); the exported ones print as ``vclip.X``."""
    import importlib
    import inspect
    import pkgutil

    defined_elsewhere = []
    for module_info in pkgutil.walk_packages(vclip.__path__, "vclip."):
        if module_info.name == "vclip.errors":
            continue
        try:
            module = importlib.import_module(module_info.name)
        except ModuleNotFoundError as missing:  # an optional extra that is not installed
            assert missing.name in ("torch", "pyarrow", "ray"), missing
            continue
        for name, value in vars(module).items():
            if (inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.__name__
                    and not name.startswith("_")):
                defined_elsewhere.append(f"{module.__name__}.{name}")
    assert defined_elsewhere == []
    for name in vclip.__all__:
        value = getattr(vclip, name)
        if inspect.isclass(value) and issubclass(value, BaseException):
            assert value.__module__ == "vclip" and getattr(vclip.errors, name) is value, name
    assert repr(vclip.CorruptVideoError("a.mp4", "bad")).startswith("CorruptVideoError(")
    assert f"{vclip.VideoError.__module__}.{vclip.VideoError.__qualname__}" == "vclip.VideoError"


def test_job_modules_export_their_functions():
    """One video and many: check_video/check_videos, extract_keyframes/extract_keyframes_many and
    find_shot_boundaries/find_shot_boundaries_many."""
    assert sorted(vclip.check.__all__) == ["CheckResult", "check_video", "check_videos"]
    assert sorted(vclip.keyframes.__all__) == [
        "CutRules", "DissolveRules", "FadeRules", "FlashRules", "KEYFRAME_METHODS", "Keyframes", "ProgressCallback",
        "SceneRules", "ShotBoundary", "THUMBNAIL_WIDTH", "UsualChangeRules", "extract_keyframes",
        "extract_keyframes_many", "find_shot_boundaries", "find_shot_boundaries_many",
    ]
    for name in ("ShotBoundary", "SceneRules", "FlashRules", "UsualChangeRules", "CutRules", "FadeRules",
                 "DissolveRules"):
        assert getattr(vclip.keyframes, name).__module__ == "vclip.keyframes"  # made in a private module


def test_dir_lists_everything_public():
    listed = dir(vclip)
    assert set(EXPORTED) <= set(listed)  # ClipLoader and ClipBatch included (torch is installed here)
    assert set(SUBMODULES) | {"loader", "streaming"} <= set(listed)
    assert not [name for name in listed if name.startswith("_") and not name.startswith("__")]


def test_import_vclip_reaches_every_public_module_without_torch():
    """Every public module after ``import vclip`` alone; torch only once the loader is asked for,
    and then ``help(vclip)`` shows the loader's classes."""
    require_extra("torch")
    probe = run_python(
        "import sys, pydoc, vclip\n"
        "assert vclip.keyframes.extract_keyframes and vclip.sampling.strided and vclip.transforms.TransformSpec\n"
        "assert vclip.memory.plan_loader_memory and vclip.index.index_video and vclip.decoder.VideoDecoder\n"
        "assert vclip.errors.VideoError and vclip.synthetic.make_video and vclip.plan.plan_decode\n"
        "assert vclip.webdataset.WebDatasetSource and vclip.huggingface.HuggingFaceSource\n"
        "names = dir(vclip)\n"
        "assert 'torch' not in sys.modules and 'cupy' not in sys.modules, 'import vclip imported torch or cupy'\n"
        "assert vclip.loader.ClipLoader is vclip.ClipLoader and 'torch' in sys.modules\n"
        "text = pydoc.render_doc(vclip, renderer=pydoc.plaintext)\n"
        "assert 'class ClipLoader' in text and 'class ClipBatch' in text, text[:2000]\n"
    )
    assert probe.returncode == 0, probe.stderr


def test_help_works_and_names_the_loader_without_torch():
    probe = run_python(
        "import sys; sys.modules['torch'] = None  # as if torch were not installed\n"
        "import pydoc, vclip\n"
        "text = pydoc.render_doc(vclip, renderer=pydoc.plaintext)\n"
        "assert 'ClipLoader' in text and 'VideoDecoder' in text and 'get_frames_played_at' in text\n"
        "try:\n"
        "    vclip.ClipLoader\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    assert probe.returncode == 0, probe.stderr
    assert "vclip.ClipLoader needs PyTorch, which is not installed: pip install 'vclip-nvdec[torch]'" in probe.stdout


def test_frames_torch_without_torch_says_what_to_install(videos):
    probe = run_python(
        "import sys; sys.modules['torch'] = None  # as if torch were not installed\n"
        "import vclip\n"
        f"frames = vclip.VideoDecoder({videos['h264']!r}, device='cpu').get_frames([0])\n"
        "try:\n"
        "    frames.torch()\n"
        "except ImportError as error:\n"
        "    print(type(error).__name__, error.name, error)\n"
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == ("ImportError torch Frames.torch() needs PyTorch, which is not installed: "
                                    "pip install 'vclip-nvdec[torch]'")


def test_distribution_name_is_free_of_the_unrelated_vclip_and_used_in_hints():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "vclip-nvdec"
    readme = (ROOT / "README.md").read_text()
    assert re.search(r"pip install ['\"]?vclip-nvdec\b", readme)
    for path in (ROOT / "vclip").rglob("*.py"):
        assert not re.search(r"pip install ['\"]?vclip\[", path.read_text()), path


# -- one wording for argument errors ----------------------------------------------------------------
def test_argument_error_is_a_value_error_and_a_type_error():
    assert issubclass(vclip.ArgumentError, ValueError) and issubclass(vclip.ArgumentError, TypeError)


@pytest.mark.parametrize(
    "call, message",
    [
        # the examples
        (lambda: vclip.TransformSpec(resize=1.5), r"resize \(1.5\) must be a positive integer"),
        (lambda: vclip.strided(4, 1.5), r"stride \(1.5\) must be an integer >= 1"),
        (lambda: vclip.strided(4, 0), r"stride \(0\) must be an integer >= 1"),
        (
            lambda: vclip.estimate_memory(width=1.5, height=2, batch_size=1, sequence_length=1),
            r"width \(1.5\) must be an integer >= 1",
        ),
        (
            lambda: vclip.largest_batch_size("lots", width=2, height=2, sequence_length=1),
            r"budget \('lots'\) must be a number of bytes >= 0 or a number with a unit",
        ),
        (
            lambda: vclip.keyframes.extract_keyframes("x.mp4", method="shots"),
            r"method \('shots'\) must be one of 'codec', 'scene'",
        ),
        (
            lambda: vclip.keyframes.extract_keyframes("x.mp4", max_frames=2.0),
            r"max_frames \(2.0\) must be an integer >= 1, or None for all",
        ),
        (
            lambda: vclip.keyframes.extract_keyframes("x.mp4", analysis_width=True),
            r"analysis_width \(True\) must be an integer >= 1",
        ),
    ],
)
def test_one_wording_value_echoed_form_named(call, message):
    with pytest.raises(vclip.ArgumentError, match=message):
        call()


def test_numpy_integers_are_integers_everywhere(videos):
    n = np.int64
    estimate = vclip.estimate_memory(width=n(1920), height=n(1080), batch_size=n(32), sequence_length=n(16))
    assert estimate.bytes == 3_185_049_600
    assert vclip.TransformSpec(resize=n(64), crop=(n(32), n(48))).output_size(320, 240) == (48, 32)
    assert vclip.strided(n(4), n(2), seed=n(1)).sample(n(50))[0].size == 4
    decoder = vclip.VideoDecoder(videos["h264"], stream_index=None, device="cpu")
    frames = decoder.get_frames(np.array([3, 7], dtype=np.int32), seed=n(2))
    assert frames.frame_indices.tolist() == [3, 7]
    keyframes = vclip.keyframes.extract_keyframes(videos["h264"], max_frames=n(2), analysis_width=n(32))
    assert keyframes.frame_indices.tolist() == [0, 120]


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda d: d.get_frames([1], transform="imagenet"),
            r"transform \('imagenet'\) must be a TransformSpec or None",
        ),
        (lambda d: d.get_frames([1], seed=-1), r"seed \(-1\) must be an integer >= 0"),
        (lambda d: d.get_frames([1], scaling_factor=2), r"scaling_factor \(2\) must be a number in \(0, 1\]"),
        (
            lambda d: d.get_frames([0.5, 1.0]),
            r"indices \(\[0.5, 1.0\]\) must be a frame number or a sequence of frame "
            r"numbers \(integers\); for times use get_frames_played_at",
        ),
        (lambda d: d.get_frames_played_at("1s"), r"seconds \('1s'\) must be a time in seconds"),
        (lambda d: d.get_frames_played_at([0.0, float("nan")]), r"seconds \(\[0.0, nan\]\) must be a time in seconds"),
        (lambda d: d.get_clips("strided"), r"sampler \('strided'\) must be a ClipSampler"),
        (lambda d: d.get_clips(vclip.strided(4, 2), seed=1.5), r"seed \(1.5\) must be an integer >= 0"),
    ],
)
def test_decoder_arguments_are_checked(videos, call, message):
    with pytest.raises(vclip.ArgumentError, match=message):
        call(vclip.VideoDecoder(videos["h264"], device="cpu"))


def test_decoder_constructor_arguments_are_checked(videos):
    with pytest.raises(vclip.ArgumentError, match=r"stream_index \('0'\) must be an integer >= 0, or None"):
        vclip.VideoDecoder(videos["h264"], stream_index="0", device="cpu")
    with pytest.raises(vclip.ArgumentError, match=r"skip_non_reference \('no'\) must be True or False"):
        vclip.VideoDecoder(videos["h264"], skip_non_reference="no", device="cpu")


# -- frames by number and by time -------------------------------------------------------------------
def test_get_frames_at_is_gone_and_names_both_replacements(videos):
    decoder = vclip.VideoDecoder(videos["h264"], device="cpu")
    with pytest.raises(TypeError) as raised:
        decoder.get_frames_at([0, 5])  # a torchcodec user asking for frames 0 and 5 must not get frames 0 and 150
    message = str(raised.value)
    assert "get_frames(indices)" in message and "get_frames_played_at(seconds)" in message


def test_frames_by_number_and_by_time_like_torchcodec(videos):
    decoder = vclip.VideoDecoder(videos["h264"], device="cpu")  # 30 fps
    by_number = decoder.get_frames([0, 5])
    by_time = decoder.get_frames_played_at([0.0, 5 / 30 + 0.001])
    assert by_number.frame_indices.tolist() == by_time.frame_indices.tolist() == [0, 5]
    assert np.array_equal(by_number.data, by_time.data)
    assert decoder.get_frames_played_at(np.float32(1.0)).frame_indices.tolist() == [30]


# -- padded clips and empty results -----------------------------------------------------------------
@pytest.mark.parametrize(
    "policy, frames",
    [("repeat_last", [0, 10, 20, 29, 29]), ("wrap", [0, 10, 20, 0, 10])],
)
def test_get_clips_marks_padded_frames(videos, policy, frames):
    decoder = vclip.VideoDecoder(videos["odd"], device="cpu")  # 30 frames; a clip of 5 frames at stride 10 needs 41
    clips = decoder.get_clips(vclip.strided(5, 10, starts="even", clips_per_video=2, end_policy=policy))
    assert clips.frame_indices.tolist() == [frames, frames]
    assert clips.padded.tolist() == [[False, False, False, True, True]] * 2
    assert clips.padded.dtype == bool and clips.padded.shape == clips.frame_indices.shape
    assert "padded=4" in repr(clips)
    fits = decoder.get_clips(vclip.strided(5, 2, clips_per_video=3, end_policy=policy))
    assert fits.padded.shape == (3, 5) and not fits.padded.any()


def test_get_frames_marks_nothing(videos):
    frames = vclip.VideoDecoder(videos["odd"], device="cpu").get_frames([29, 29, 0])
    assert frames.padded.tolist() == [False, False, False]


@pytest.mark.parametrize(
    "transform, scaling_factor, shape, dtype",
    [
        (None, 1.0, (0, 4, 97, 129, 3), np.uint8),
        (None, 0.5, (0, 4, 49, 65, 3), np.uint8),
        (vclip.TransformSpec.imagenet(32), 1.0, (0, 4, 3, 32, 32), np.float32),
        (vclip.TransformSpec(resize=(20, 30), dtype="float16", layout="CTHW"), 1.0, (0, 3, 4, 20, 30), np.float16),
    ],
)
def test_drop_that_drops_every_clip_gives_an_empty_result(videos, transform, scaling_factor, shape, dtype):
    decoder = vclip.VideoDecoder(videos["odd"], device="cpu")  # 30 frames; a clip of 4 frames at stride 10 needs 31
    sampler = vclip.downscaled(vclip.strided(4, 10, clips_per_video=3, end_policy="drop"), scaling_factor)
    clips = decoder.get_clips(sampler, transform=transform)
    assert clips.data.shape == shape and clips.data.dtype == dtype
    assert clips.frame_indices.shape == clips.pts_seconds.shape == clips.padded.shape == (0, 4)
    assert clips.frame_indices.dtype == np.int64 and clips.device == "cpu"
    assert decoder.get_clips(vclip.strided(4, 10, end_policy="repeat_last")).data.shape[0] == 1


def test_same_seed_same_clips_and_flags(videos):
    decoder = vclip.VideoDecoder(videos["odd"], device="cpu")
    sampler = vclip.jittered(6, 4, 1, clips_per_video=3, end_policy="wrap")
    a, b = decoder.get_clips(sampler, seed=4), decoder.get_clips(sampler, seed=4)
    assert np.array_equal(a.frame_indices, b.frame_indices) and np.array_equal(a.padded, b.padded)
    assert np.array_equal(a.frame_indices, np.stack(sampler.sample(decoder.index, seed=4)))


# -- the engine's internal surface ------------------------------------------------------------------
def test_tests_and_benchmarks_reach_the_engine_through_its_surface():
    """``from vclip._engine import name`` only; a module itself is imported only to patch its state."""
    from vclip import _engine

    for name in _engine.__all__:
        assert getattr(_engine, name) is not None, name
    direct = re.compile(r"from vclip\._engine\.\w+ import|from vclip\._engine import \w+ as")
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("tests", "benchmarks", "samples")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if direct.search(line)
    ]
    assert offenders == []


@pytest.mark.slow
@pytest.mark.parametrize("extra_module", ["torch", "pyarrow", "ray", "fsspec"])
def test_the_suite_collects_without_each_optional_extra(extra_module):
    """A missing extra skips the tests that need it, with the extra's name; it never fails collection."""
    probe = run_python(
        f"import sys; sys.modules[{extra_module!r}] = None\n"
        "import pytest\n"
        "sys.exit(pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', 'tests']))\n"
    )
    assert probe.returncode == 0, probe.stdout[-3000:] + probe.stderr[-2000:]
    assert "error" not in probe.stdout.splitlines()[-1], probe.stdout[-3000:]
