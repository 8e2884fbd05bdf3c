"""kernels/shot_features.cu, the scene method's features and gap distances, against its NumPy twin
(vclip/_scenes/features.py): built for the host (tests/host_kernel/shot_harness.cpp) in CI, and through CuPy
on the GPU; on a fresh CuPy cache, shot detection compiles only vclip's own kernels."""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys

import numpy as np
import pytest
from helpers import child_environment, host_kernel_library

from vclip._scenes import features as _features
from vclip._scenes.features import BINS, MAX_GAP, block_grid
from vclip.synthetic import make_scene_video

# (frames, height, width): the default analysis size, sizes the block grid does not divide, one tiny
SIZES = [(60, 36, 64), (45, 37, 66), (3, 3, 5)]


def analysis_frames(num_frames: int, height: int, width: int, seed: int) -> np.ndarray:
    """Frames with still stretches, changes and dark pixels (luma near the fade threshold included)."""
    rng = np.random.default_rng(seed)
    frames = rng.integers(0, 256, (num_frames, height, width, 3), dtype=np.uint8)
    frames[num_frames // 3:num_frames // 2] = frames[num_frames // 3]  # a still run: zero distances
    frames[-5:] //= 9  # dark frames: luma around 24
    return frames


def pointer(array: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(array.ctypes.data)


@pytest.fixture(scope="module")
def host_kernels(tmp_path_factory):
    return host_kernel_library("shot_harness.cpp", "shot_features.cu", tmp_path_factory.mktemp("shot_kernel"))


def host_features(host_kernels, frames: np.ndarray) -> dict:
    n, height, width, _ = frames.shape
    rows, columns, block_h, block_w = block_grid(height, width)
    counts, luma, dark = np.zeros((n, BINS), np.uint32), np.zeros(n, np.uint64), np.zeros(n, np.uint32)
    out = {"H": np.full((n, BINS), -1, np.float32), "B": np.full((n, rows * columns, 3), -1, np.float32),
           "mean": np.full(n, -1, np.float32), "dark": np.full(n, -1, np.float32)}
    ints = [ctypes.c_int(value) for value in (n, height, width, columns, rows * columns, block_h, block_w)]
    host_kernels.vclip_host_shot_features(pointer(np.ascontiguousarray(frames)), *ints, pointer(counts), pointer(luma),
                                          pointer(dark), pointer(out["H"]), pointer(out["B"]), pointer(out["mean"]),
                                          pointer(out["dark"]))
    return out


def host_gaps(host_kernels, features: dict, previous: dict | None) -> dict:
    n, num_blocks = features["H"].shape[0], features["B"].shape[1]
    earlier = previous or {name: features[name][:0] for name in ("H", "B")}
    tables = {name: np.full((MAX_GAP + 1, n), -1, np.float32) for name in ("H", "B")}
    arrays = [np.ascontiguousarray(array) for array in (features["H"], features["B"], earlier["H"], earlier["B"])]
    host_kernels.vclip_host_shot_gaps(ctypes.c_int(MAX_GAP), ctypes.c_int(n), ctypes.c_int(num_blocks),
                                      *map(pointer, arrays[:2]), *map(pointer, arrays[2:]),
                                      ctypes.c_int(earlier["H"].shape[0]), pointer(tables["H"]), pointer(tables["B"]))
    return tables


def assert_features_match(got: dict, expected: dict) -> None:
    """The same bits: histograms, block means and dark shares are integer counts over the same
    divisor, the mean luma an exact integer sum."""
    for name in ("H", "B", "mean", "dark"):
        assert got[name].dtype == np.float32 and got[name].shape == expected[name].shape, name
        assert np.array_equal(got[name], expected[name]), name


def assert_tables_match(got: dict, expected: dict) -> None:
    """B to the bit (the same float operations, then an exact selection of the upper median); H to
    float32 rounding (a sum of 64 terms in another order)."""
    assert np.array_equal(np.isnan(got["H"]), np.isnan(expected["H"]))
    assert np.array_equal(got["B"], expected["B"], equal_nan=True)
    np.testing.assert_allclose(got["H"], expected["H"], rtol=0, atol=2e-6)


@pytest.mark.parametrize("size", SIZES, ids=lambda size: "x".join(map(str, size)))
def test_host_built_kernel_gives_the_twins_features_and_distances(host_kernels, size):
    frames = analysis_frames(*size, seed=sum(size))
    features = _features.frame_features(frames)
    assert_features_match(host_features(host_kernels, frames), features)
    assert features["dark"][-1] > 0.5
    # One chunk with no frame before it, then one that continues after it: every gap crosses.
    split = min(25, size[0] - 1)
    first, second = _features.frame_features(frames[:split]), _features.frame_features(frames[split:])
    assert_tables_match(host_gaps(host_kernels, first, None), _features.gap_distances(first, None))
    previous = _features.recent_features(None, first)
    expected = _features.gap_distances(second, previous)
    assert_tables_match(host_gaps(host_kernels, second, previous), expected)
    # `split` frames before the chunk: every gap up to `split` has a frame, a longer one at frame 0 none
    assert np.isnan(expected["H"][0]).all() and not np.isnan(expected["B"][1:split + 1]).any()
    assert np.isnan(expected["B"][split + 1:, 0]).all()


def test_the_twins_distances_are_their_definitions():
    """H is half the L1 distance of the histograms and B the upper median over blocks of the mean
    absolute RGB change / 255, computed here frame pair by frame pair."""
    frames = analysis_frames(50, 36, 64, seed=3)
    features = _features.frame_features(frames)
    tables = _features.gap_distances(features, None)
    for t, gap in [(1, 1), (49, 40), (30, 7), (20, 13)]:
        hist = 0.5 * np.abs(features["H"][t] - features["H"][t - gap]).sum()
        change = np.sort(np.abs(features["B"][t] - features["B"][t - gap]).sum(axis=1))
        assert tables["H"][gap, t] == pytest.approx(hist, abs=2e-6)
        assert tables["B"][gap, t] == pytest.approx(change[change.size // 2] / 765, rel=1e-6)
    assert np.isnan(tables["H"][10, :10]).all() and np.isnan(tables["B"][0]).all()
    luma = frames.astype(np.float64) @ [0.299, 0.587, 0.114]
    np.testing.assert_allclose(features["mean"], luma.reshape(50, -1).mean(axis=1), rtol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("size", SIZES, ids=lambda size: "x".join(map(str, size)))
def test_cuda_kernel_gives_the_twins_features_and_distances(size):
    cupy = pytest.importorskip("cupy")
    from vclip._scenes import features_cuda as _shots_cuda

    frames = analysis_frames(*size, seed=sum(size))
    on_gpu = cupy.asarray(frames)
    got = {name: value.get() for name, value in _shots_cuda.frame_features(on_gpu, synchronize=True).items()}
    assert_features_match(got, _features.frame_features(frames))
    split = min(25, size[0] - 1)
    first, second = _shots_cuda.frame_features(on_gpu[:split]), _shots_cuda.frame_features(on_gpu[split:])
    previous = _shots_cuda.recent_features(None, first)
    got = {name: table.get() for name, table in _shots_cuda.gap_distances(second, previous).items()}
    twin_first, twin_second = _features.frame_features(frames[:split]), _features.frame_features(frames[split:])
    twin_previous = _features.recent_features(None, twin_first)
    assert_tables_match(got, _features.gap_distances(twin_second, twin_previous))
    # The last MAX_GAP frames across chunks shorter than MAX_GAP (a copy, not a kernel).
    recent = _shots_cuda.recent_features(previous, second)
    twin_recent = _features.recent_features(twin_previous, twin_second)
    for name in ("H", "B"):
        assert np.array_equal(recent[name].get(), twin_recent[name])


COLD_SHOTS = r"""
import json, os, sys
from vclip.keyframes import find_shot_boundaries
from vclip._engine import KernelModule
found = [boundary.frame for boundary in find_shot_boundaries(sys.argv[1], device="cuda")]
transform_kernels = sum(len(module._functions) for module in KernelModule._modules.values())
cached = [name for name in os.listdir(os.environ["CUPY_CACHE_DIR"]) if name.endswith(".cubin")]
print(json.dumps({"found": found, "transform_kernels": transform_kernels, "cached": len(cached)}))
"""


@pytest.mark.gpu
def test_a_cold_cache_compiles_only_vclips_own_kernels(tmp_path):
    """On an empty CuPy kernel cache, shot detection builds the transform kernels it launches and
    the one module of shot_features.cu, and no kernel of CuPy's own (each cost a fresh container
    about half a second)."""
    pytest.importorskip("cupy")
    video = make_scene_video(tmp_path / "cuts.mp4", "cuts", seed=0)
    cache = tmp_path / "cupy-cache"
    done = subprocess.run([sys.executable, "-c", COLD_SHOTS, str(video.path)], capture_output=True, text=True,
                          env=child_environment(CUPY_CACHE_DIR=str(cache)), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert video.score(report["found"]) == {"true": len(video.boundaries), "missed": 0, "false": 0}
    assert report["cached"] == report["transform_kernels"] + 1, report
