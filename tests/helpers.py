"""Helpers shared by the tests: where the checkout and the real test videos are, the devices a test
runs on, frame numbers read back from barcodes, host copies of GPU arrays, FFmpeg's rgb24 frames
(the reference of the decoders' native-size RGB), the environment of child Python processes,
vclip's worker processes, copies of a video with a display matrix or a pixel aspect, and the CUDA
kernels built for the host."""

import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import av
import numpy as np
import pytest

from vclip.synthetic import read_barcode

ROOT = Path(__file__).resolve().parents[1]
"""The checkout."""
SHARED_VIDEOS = Path(os.environ.get("VCLIP_SHARED_VIDEOS", ROOT.parent / "shared" / "videos"))
"""Real videos made elsewhere (../shared/videos, or $VCLIP_SHARED_VIDEOS)."""


EXTRAS = {"torch": "torch", "torchdata": "test", "pyarrow": "catalog", "ray": "ray", "fsspec": "remote",
          "s3fs": "remote", "aiohttp": "remote", "moto": "test", "boto3": "test", "matplotlib": "chart",
          "pandas": "test", "duckdb": None, "torchvision": None, "datasets": "test",
          "pynvml": "gpu-cu13"}
"""The extra of pyproject.toml that installs each optional module the tests use (None: none does)."""


def require_extra(module: str):
    """``module`` imported, or the test (or, called at module level, the test file) skipped with the
    extra that installs it: a missing optional package never fails collection."""
    top = module.split(".")[0]
    extra = EXTRAS[top]
    hint = f"pip install '.[{extra}]'" if extra else f"pip install {top}"
    return pytest.importorskip(module, reason=f"{top} is not installed ({hint})")


def devices() -> list:
    """``cpu`` and ``cuda`` as parameters of one test (``@pytest.mark.parametrize("device", devices())``):
    the ``cuda`` case is marked ``gpu``, so it skips where NVDEC is not usable (and fails there with
    ``VCLIP_REQUIRE_GPU=1``)."""
    return [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)]


def host(array) -> np.ndarray:
    """A NumPy copy of a NumPy, CuPy or torch array (or of a result's ``data``)."""
    array = (
        getattr(array, "data", array)
        if not isinstance(array, np.ndarray) and hasattr(array, "frame_indices")
        else array
    )
    if hasattr(array, "get") and not isinstance(array, np.ndarray):  # CuPy
        return array.get()
    if hasattr(array, "cpu"):  # torch
        return array.cpu().numpy()
    return np.asarray(array)


def barcodes(frames, *, flipped: bool = False) -> list[int]:
    """The frame number stamped into each ``[H, W, 3]`` frame of an array, a result (its ``data``)
    or any iterable of frames."""
    if hasattr(frames, "shape") or hasattr(frames, "frame_indices"):
        frames = host(frames)
    return [read_barcode(host(frame), flipped=flipped) for frame in frames]


def rgb_error(got, reference) -> tuple[float, float]:
    """Mean and 99th percentile of the absolute difference between two uint8 images."""
    difference = np.abs(host(got).astype(np.int16) - np.asarray(reference).astype(np.int16))
    return float(difference.mean()), float(np.percentile(difference, 99))


def ffmpeg_rgb24(path, stream_index=None):
    """Every frame as FFmpeg's rgb24 with nearest chroma.

    That is FFmpeg's 8-bit conversion of even sizes whatever the scaler flags (checked here on the
    first frames), and its point-sampled one otherwise (10-bit, odd sizes), where the default flags
    blend neighbouring chroma samples (on h265_10bits.mp4: mean 4.2, p99 67 away from nearest).
    """
    with av.open(str(path)) as container:
        stream = container.streams.video[0] if stream_index is None else container.streams[stream_index]
        frames = list(container.decode(stream))
    nearest = [frame.to_ndarray(format="rgb24", interpolation="POINT") for frame in frames]
    context = stream.codec_context
    if context.format.name in ("yuv420p", "yuvj420p") and context.width % 2 == 0 and context.height % 2 == 0:
        assert all(np.array_equal(a, f.to_ndarray(format="rgb24")) for a, f in zip(nearest[:3], frames))
    return nearest


def worker_pids(main: str = "vclip._jobs.child_process") -> list[int]:
    """Running children of this process whose command line holds ``main`` (vclip's worker processes
    by default, or one kind of them: ``"vclip._loader.audio_processes:serve_helper"``), from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if parent == os.getpid() and main.encode() in command:
            found.append(int(entry.name))
    return found


def session_of(pid: int) -> int | None:
    """The session id of process ``pid`` (None when it is gone), from /proc."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3])
    except (OSError, IndexError, ValueError):
        return None


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent to reap it does not), from /proc."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def child_environment(**extra: str) -> dict[str, str]:
    """This process's environment for a child Python that imports this checkout's vclip: the
    checkout first on ``PYTHONPATH``, what was there kept (it may hold vclip's dependencies)."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **extra}


def frame_payload(index, frame) -> tuple[int, int]:
    """Byte range of a frame's packet in the file, past the first 8 bytes (NAL length and header):
    zeroing it damages that frame's picture but leaves the file readable."""
    packet = index.frame_packet[frame]
    position, size = int(index.packet_pos[packet]), int(index.packet_size[packet])
    return position + 8, position + size


def zero_second_half(source, target, frame: int) -> str:
    """A copy of ``source`` whose ``frame`` lost the second half of its packet's bytes (zeroed): on
    an H.264 keyframe FFmpeg decodes it without an error, conceals the lost slices and flags the
    picture corrupt; the frames decoded from it inherit the damage unflagged."""
    index = vclip_index(source)
    data = bytearray(Path(source).read_bytes())
    packet = int(index.frame_packet[frame])
    start, size = int(index.packet_pos[packet]), int(index.packet_size[packet])
    data[start + size // 2:start + size] = bytes(size - size // 2)
    Path(target).write_bytes(data)
    return str(target)


def vclip_index(path):
    import vclip

    return vclip.index_video(path)


def remux(source: str, target: str, *, degrees: int = 0, mirrored: bool = False, sample_aspect_ratio=None) -> str:
    """Copy the video stream of ``source`` into ``target`` with a display matrix and/or a pixel aspect."""
    with av.open(source) as reader, av.open(target, "w") as writer:
        stream = reader.streams.video[0]
        copy = writer.add_stream_from_template(stream)
        if degrees or mirrored:
            copy.set_display_rotation(degrees, hflip=mirrored)
        if sample_aspect_ratio is not None:
            copy.sample_aspect_ratio = sample_aspect_ratio
        for packet in reader.demux(stream):
            if packet.dts is not None:
                packet.stream = copy
                writer.mux(packet)
    return target


def host_kernel_library(harness: str, kernel: str, folder: Path) -> ctypes.CDLL:
    """``kernels/<kernel>`` built as plain C++ with ``tests/host_kernel/<harness>`` (which includes it
    after ``cuda_host_shim.h`` and runs its thread functions over the launch grid), loaded."""
    from vclip._engine import kernel_source_path

    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.fail("a C++ compiler (g++) is needed to check the CUDA kernel sources on the host")
    harness_folder = ROOT / "tests" / "host_kernel"
    library = folder / f"{Path(harness).stem}.so"
    command = [compiler, "-std=c++17", "-O1", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror",
               f"-I{harness_folder}", f'-DVCLIP_KERNEL_SOURCE="{kernel_source_path(kernel)}"',
               str(harness_folder / harness), "-o", str(library)]
    built = subprocess.run(command, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    return ctypes.CDLL(str(library))
