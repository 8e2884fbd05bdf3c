"""Shared fixtures: barcode-stamped synthetic videos made once per session, the real videos in
../shared/videos (or $VCLIP_SHARED_VIDEOS; tests skip when absent), and skipping of GPU tests
where NVDEC is not usable. With ``VCLIP_REQUIRE_GPU=1`` every skip of a GPU test is a failure
(use it on GPU machines, where a skip would hide a broken CuPy or driver)."""

from __future__ import annotations

import os
import signal
from fractions import Fraction
from pathlib import Path

import pytest
from helpers import SHARED_VIDEOS

from vclip._device import gpu_unavailable_reason
from vclip.synthetic import make_video

# A runner that starts pytest in the background (nohup, "&" in a script) leaves SIGINT ignored, and an
# ignored signal stays ignored in every child: the tests of Ctrl-C need it delivered, here and there.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REQUIRE_GPU = os.environ.get("VCLIP_REQUIRE_GPU", "").strip() not in ("", "0")

# name: (file name, make_video options)
SYNTHETIC = {
    "h264": ("h264_bframes.mp4", dict(num_frames=150, width=320, height=240, keyframe_interval=30, b_frames=2)),
    "hevc": ("hevc.mp4", dict(num_frames=60, width=256, height=160, codec="libx265", keyframe_interval=30)),
    "vfr": (
        "vfr.mkv",
        dict(
            num_frames=40,
            width=160,
            height=128,
            time_base=Fraction(1, 1000),
            frame_pts=[i * 33 + (i % 3) * 9 for i in range(40)],
        ),
    ),
    "odd": ("odd_size.mp4", dict(num_frames=30, width=129, height=97, codec="mpeg4", keyframe_interval=10)),
    "offset": (
        "first_pts_not_zero.mkv",
        dict(
            num_frames=30,
            width=192,
            height=112,
            time_base=Fraction(1, 1000),
            frame_pts=[1500 + 40 * i for i in range(30)],
        ),
    ),
    "long_gop": ("long_gop.mp4", dict(num_frames=300, width=192, height=112, keyframe_interval=250, b_frames=3)),
    "h264_10bit": ("h264_10bit.mp4", dict(num_frames=20, width=192, height=112, pixel_format="yuv420p10le")),
}


@pytest.fixture(scope="session")
def video_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("videos")


@pytest.fixture(scope="session")
def videos(video_dir) -> dict[str, str]:
    """Paths of the synthetic videos, by name (see SYNTHETIC)."""
    return {name: make_video(video_dir / file, **options) for name, (file, options) in SYNTHETIC.items()}


@pytest.fixture
def shared_decode_processes():
    """Stops the decode processes a test's decoders started (``decode_processes``; shared by the
    process until it exits): their GPU memory would move later tests' device-wide figures."""
    from vclip._engine import close_shared_process_backends

    yield
    close_shared_process_backends()


@pytest.fixture(scope="session")
def shared_videos() -> Path:
    if not SHARED_VIDEOS.is_dir():
        pytest.skip(f"real test videos not found at {SHARED_VIDEOS} (set VCLIP_SHARED_VIDEOS to their folder)")
    return SHARED_VIDEOS


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under VCLIP_REQUIRE_GPU=1, a GPU test that skipped (for any reason) fails instead."""
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_GPU and report.skipped and item.get_closest_marker("gpu") is not None:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"VCLIP_REQUIRE_GPU=1 but this GPU test skipped: {reason}"


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    reason = gpu_unavailable_reason()
    if reason:
        skip = pytest.mark.skip(reason=f"no GPU: {reason}")
        for item in gpu_items:
            item.add_marker(skip)
