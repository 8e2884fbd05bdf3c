"""The fused CUDA kernel from Python: ``kernels/nv12_transform.cu`` compiled through CuPy, and the
converter that launches it on NV12/P016 pictures in device memory, straight into their slots of
the output batch. The NVDEC backend hands it NVDEC's surfaces; the CPU decoders of the hybrid
backend hand it pictures they uploaded."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .contract import Completion, PictureConverter
from .kernel_args import (
    BLOCK,
    GRAY_SUM_DTYPE,
    FrameLaunch,
    frame_launch,
    gray_sum_kernel_name,
    kernel_instantiation,
    kernel_name,
    kernel_source_path,
)
from .layout import frame_strides
from .pipeline import Conversion, VideoRequest

__all__ = ["KernelModule", "KernelConverter", "Surface", "compiling_once_per_machine"]


@dataclass(frozen=True)
class Surface:
    """An NV12/P016 picture in device memory: the luma plane at ``luma``, the chroma plane at
    ``chroma``, both ``pitch`` bytes a row."""

    luma: int
    chroma: int
    pitch: int


def _cupy_cache_folder() -> Path:
    """CuPy's on-disk kernel cache (``CUPY_CACHE_DIR``, default ``~/.cupy/kernel_cache``)."""
    return Path(os.environ.get("CUPY_CACHE_DIR") or Path.home() / ".cupy" / "kernel_cache")


@contextmanager
def compiling_once_per_machine() -> Iterator[None]:
    """Hold a lock on CuPy's kernel cache folder while compiling: of the processes that start at once
    on a cold cache (decode processes, DataLoader workers, several jobs), one compiles and writes the
    cache while the others wait, then load what it wrote instead of compiling the same kernels again.
    Where the folder cannot be locked (not writable, no ``fcntl``) compiling goes on unlocked."""
    try:
        import fcntl

        folder = _cupy_cache_folder()
        folder.mkdir(parents=True, exist_ok=True)
        lock = open(folder / "vclip-compile.lock", "a")  # held across the yield
    except (ImportError, OSError):
        yield
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class KernelModule:
    """The kernels of ``nv12_transform.cu`` on one device of a process (NVRTC through CuPy), each
    compiled on its own when first asked for: a fresh machine builds only the kernels it runs, and,
    through CuPy's on-disk cache, builds each once while the source is unchanged."""

    _modules: dict[int, KernelModule] = {}
    _lock = threading.Lock()

    def __init__(self, device_id: int):
        self._device_id = device_id
        self._source = kernel_source_path().read_text()
        self._functions: dict[str, Any] = {}
        self._compiling = threading.Lock()

    @classmethod
    def for_device(cls, device_id: int) -> KernelModule:
        with cls._lock:
            if device_id not in cls._modules:
                cls._modules[device_id] = cls(device_id)
            return cls._modules[device_id]

    def _kernel(self, name: str):
        function = self._functions.get(name)
        if function is not None:
            return function
        import cupy

        with self._compiling:
            if name not in self._functions:
                code = f"{self._source}\n{kernel_instantiation(name)}\n"
                with cupy.cuda.Device(self._device_id), compiling_once_per_machine():
                    module = cupy.RawModule(code=code, options=("--std=c++17", "-DVCLIP_SELECTED_KERNELS"))
                    self._functions[name] = module.get_function(name)
            return self._functions[name]

    def function(self, input_bytes: int, dtype: str, extended: bool = False):
        """The transform kernel for NV12 (1) or P016 (2) input, ``dtype`` output, with the training
        extensions (colour adjustments, triangle filter) when ``extended``."""
        return self._kernel(kernel_name(input_bytes, dtype, extended))

    def gray_sum_function(self, input_bytes: int):
        """The kernel of a frame's grayscale sum, before its contrast change."""
        return self._kernel(gray_sum_kernel_name(input_bytes))


class KernelConverter(PictureConverter):
    """NVDEC surfaces into the output with the fused kernel, on the worker's CUDA stream: per
    destination one launch (two with a contrast change: the frame's grayscale sum first)."""

    def __init__(self, kernels: KernelModule, stream, job: VideoRequest, conversion: Conversion, output):
        index = job.index
        targets = job.targets
        geometry = targets[0].geometry
        self._index, self._targets, self._spec = index, targets, conversion.spec
        self._surface_rows = index.height + (index.height & 1)  # NV12/P016 luma rows: even
        self._stored_bits = 8 if index.bit_depth == 8 else 16
        self._sample_bytes = self._stored_bits // 8  # of the surface: 1 (NV12) or 2 (P016)
        self._minimum_pitch = index.width * self._sample_bytes
        self._stream = stream
        self._frames = targets[0].frames.size
        frame_stride, self._strides = frame_strides(
            conversion.layout, self._frames, geometry.output_height, geometry.output_width
        )
        item = output.dtype.itemsize
        self._frame_bytes = frame_stride * item
        clip_bytes = int(np.prod(output.shape[1:])) * item
        self._clip_addresses = [output.data.ptr + target.slot * clip_bytes for target in targets]
        self._launches: dict[tuple[int, int], FrameLaunch] = {}  # by (target, position or -1 for the whole clip)
        self._gray_sums: Any = None  # a grayscale sum per destination, made when a contrast change needs one
        self._module, self._output_dtype = kernels, conversion.dtype
        self._kernels: dict[bool, Any] = {}  # by `extended`: each compiled when a frame first needs it
        self._gray_sum_kernel: Any = None

    def _launch(self, target: int, position: int) -> FrameLaunch:
        clip = self._targets[target]
        key = (target, -1 if clip.frame_draws is None else position)
        launch = self._launches.get(key)
        if launch is None:
            geometry, color = clip.draw_at(position)
            index = self._index
            launch = self._launches[key] = frame_launch(
                self._spec, geometry, color, self._strides, bit_depth=index.bit_depth, stored_bits=self._stored_bits,
                matrix=index.color_matrix, color_range=index.color_range,
            )
        return launch

    def convert(self, picture, destinations: list[tuple[int, int]]) -> None:
        if isinstance(picture, Surface):  # mapped through the driver's API: its layout is known
            self.launch(picture.luma, picture.chroma, picture.pitch, destinations)
            return
        luma, chroma = picture.GetPtrToPlane(0), picture.GetPtrToPlane(1)
        # PyNvVideoCodec's surfaces hold the UV plane right after the Y plane; its array
        # interface reports strides in samples, not bytes, so take the pitch from the planes.
        pitch = (chroma - luma) // self._surface_rows
        if pitch < self._minimum_pitch or (chroma - luma) % self._surface_rows:
            raise RuntimeError(f"unexpected NVDEC surface layout (planes {chroma - luma} bytes apart for "
                               f"{self._surface_rows} rows of at least {self._minimum_pitch} bytes)")
        self.launch(luma, chroma, pitch, destinations)

    def launch(self, luma: int, chroma: int, pitch: int, destinations: list[tuple[int, int]]) -> None:
        """Convert the NV12/P016 picture at device addresses ``luma``/``chroma`` (``pitch`` bytes per
        row) into each destination, on the current CUDA stream."""
        for target, position in destinations:
            launch = self._launch(target, position)
            frame_job = launch.job
            frame_job["luma"], frame_job["chroma"] = luma, chroma
            frame_job["luma_pitch"] = frame_job["chroma_pitch"] = pitch
            frame_job["output"] = self._clip_addresses[target] + position * self._frame_bytes
            if launch.needs_mean:
                if self._gray_sums is None:
                    import cupy

                    self._gray_sums = cupy.zeros(len(self._targets) * self._frames, GRAY_SUM_DTYPE)
                slot = target * self._frames + position
                frame_job["gray_sum"] = self._gray_sums.data.ptr + slot * GRAY_SUM_DTYPE.itemsize
                if self._gray_sum_kernel is None:
                    self._gray_sum_kernel = self._module.gray_sum_function(self._sample_bytes)
                self._gray_sum_kernel(launch.gray_grid, BLOCK, (launch.params, frame_job[()]))
            kernel = self._kernels.get(launch.extended)
            if kernel is None:
                kernel = self._kernels[launch.extended] = self._module.function(
                    self._sample_bytes, self._output_dtype, launch.extended)
            kernel(launch.grid, BLOCK, (launch.params, frame_job[()]))

    def finish(self) -> Completion:
        import cupy

        event = cupy.cuda.Event(disable_timing=True)
        event.record(self._stream)
        return event
