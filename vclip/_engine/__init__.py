"""The decode engine (private): what turns clip requests into output buffers.

Layers, each importing only those above it:

    (below the engine: vclip._device, where decoding runs, ``Device``, ``resolve_device``; and
    vclip._index.packets, reading packets back from the file, which the audio of clips reads too)
    layout, reference, host_fast, kernel_args
                clip layouts; the NumPy twin of the CUDA kernel (its definition) and the CPU path's
                quicker forms of it; the kernel's arguments
    pipeline    what a request carries (``VideoRequest``, ``ClipTarget``, ``Conversion``, ``DecodeStats``)
    contract    the backend contract (``Backend``, ``PictureDecoder``, ``PictureConverter``) and the
                one loop that executes a decode plan (``execute_plan``, ``PlanBackend``)
    kernel      the fused CUDA kernel through CuPy (``KernelModule``, ``KernelConverter``)
    cuvid, nvdec_driver
                NVDEC's own API in the driver through ctypes, and its decoders (``VCLIP_NVDEC_API=driver``)
    cpu, nvdec  the PyAV and NVDEC backends
    shared_buffers  output buffers that worker processes write into (``BufferRegistry``)
    processes   decoding in worker processes (``ProcessBackend``, built from a backend factory)
    hybrid      CPU decoders whose pictures the CUDA kernel converts (``UploadBackend``; in packing
                processes that hold no CUDA context ``PackedUploadBackend``)
    scheduler   one queue of video requests for every decoder pool, with the workers of each pool
                allowed to work (``SharedQueueDispatcher``, ``PooledBackend``)
    dispatch    a batch's video requests on threads (``ThreadDispatcher``, ``DispatchResult``)
    backends    choosing a backend (``make_backend``, ``make_paced_backend``)
    gpu_busy    how busy the GPU has been, from NVML (``GpuBusy``), for the loader's pacing; it
                imports nothing of the engine

Tests and benchmarks reach the engine through the names below (``from vclip._engine import ...``),
imported on first use so that importing one part of the engine does not import the rest; only a
test that patches a module's own state imports that module.
"""

from __future__ import annotations

import importlib
from typing import Any

_SURFACE_BY_MODULE = {
    "layout": ("clip_shape", "frame_strides", "frame_view"),
    "reference": (
        "adjust_colors", "AxisWindow", "bfloat16_bits", "color_coefficients", "RESAMPLE_AREA", "window_taps",
        "yuv420_to_rgb_tensor",
    ),
    "kernel_args": (
        "BLOCK", "fill_job", "JOB_DTYPE", "kernel_instantiation", "KERNEL_NAMES", "kernel_source_path", "launch_grid",
        "needs_extended", "OUTPUT_KINDS", "PARAMS_DTYPE", "transform_params",
    ),
    "pipeline": ("ClipTarget", "Conversion", "DecodeStats", "needs_any", "resolve_transform", "VideoRequest"),
    "contract": ("Backend", "execute_plan", "PictureConverter", "PictureDecoder"),
    "kernel": ("KernelModule",),
    "cpu": ("CpuBackend", "yuv420_planes"),
    "cuvid": ("cuvid_unavailable_reason", "CuvidStructures"),
    "nvdec": ("capability_refusal", "DECODERS_PER_THREAD", "nvdec_api", "nvdec_unsupported_reason", "NvdecBackend"),
    "shared_buffers": ("BufferRegistry",),
    "processes": ("ProcessBackend", "RecentKeys"),
    "hybrid": ("pack_semi_planar", "packed_frames", "PackedUploadBackend", "PackingBackend", "semi_planar_shape",
               "UploadBackend"),
    "scheduler": (
        "auto_cpu_decoders", "auto_decode_processes", "NVDEC_FEEDER_CORES", "TRAINING_CORES",
        "DecoderKindStats", "DecoderPool",
        "PooledBackend", "resolve_cpu_decoders", "SharedQueueDispatcher",
    ),
    "dispatch": ("ThreadDispatcher",),
    "backends": ("close_shared_process_backends", "in_process_backend", "make_backend", "shared_process_backend"),
    "gpu_busy": ("GpuBusy",),
}
"""The internal surface, by module: what tests and benchmarks import from the engine (``from vclip._engine
import name``), so that moving a name between engine modules changes one line here, not the tests."""
_SURFACE = {name: module for module, names in _SURFACE_BY_MODULE.items() for name in names}

__all__ = sorted(_SURFACE)


def __getattr__(name: str) -> Any:
    module = _SURFACE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
