"""The decode engine (private): what turns clip requests into output buffers.

Layers, each importing only those above it:

    device      where decoding runs (``Device``, ``resolve_device``)
    layout, reference, kernel_args, packets
                clip layouts; the NumPy twin of the CUDA kernel; the kernel's arguments;
                reading packets back from the file (in the form NVDEC reads: vclip._bitstream)
    pipeline    what a request carries (``VideoJob``, ``ClipTarget``, ``Conversion``, ``DecodeStats``)
    contract    the backend contract (``Backend``, ``PictureDecoder``, ``PictureConverter``) and the
                one loop that executes a decode plan (``execute_plan``, ``PlanBackend``)
    kernel      the fused CUDA kernel through CuPy (``KernelModule``, ``KernelConverter``)
    cpu, nvdec  the PyAV and NVDEC backends
    shared_buffers  output buffers that worker processes write into (``BufferRegistry``)
    processes   decoding in worker processes (``ProcessBackend``, built from a backend factory)
    hybrid      CPU decoders whose pictures the CUDA kernel converts (``UploadBackend``)
    scheduler   one job queue for every decoder pool (``SharedQueueRunner``, ``PooledBackend``)
    runner      running a batch's jobs on threads (``JobRunner``, ``JobsResult``)
    backends    choosing a backend (``make_backend``)

The names below are the internal surface that tests and benchmarks use; they are imported on
first use, so that importing one part of the engine does not import the rest.
"""

from __future__ import annotations

import importlib
from typing import Any

_SURFACE = {
    "Device": "device", "CPU": "device", "ResolvedDevice": "device", "resolve_device": "device",
    "gpu_unavailable_reason": "device",
    "clip_shape": "layout", "frame_strides": "layout", "frame_view": "layout",
    "yuv420_to_rgb_tensor": "reference", "color_coefficients": "reference",
    "BLOCK": "kernel_args", "JOB_DTYPE": "kernel_args", "fill_job": "kernel_args", "launch_grid": "kernel_args",
    "transform_params": "kernel_args", "kernel_source_path": "kernel_args",
    "read_packets": "packets",
    "ClipTarget": "pipeline", "Conversion": "pipeline", "DecodeStats": "pipeline", "VideoJob": "pipeline",
    "resolve_transform": "pipeline",
    "Backend": "contract", "PictureConverter": "contract", "PictureDecoder": "contract", "execute_plan": "contract",
    "CpuBackend": "cpu", "NvdecBackend": "nvdec", "KernelModule": "kernel",
    "nvdec_unsupported_reason": "nvdec", "capability_refusal": "nvdec",
    "ProcessBackend": "processes", "BufferRegistry": "shared_buffers",
    "JobRunner": "runner", "in_process_backend": "backends", "make_backend": "backends",
    "DecoderKindStats": "scheduler", "DecoderPool": "scheduler", "PooledBackend": "scheduler",
    "SharedQueueRunner": "scheduler", "auto_cpu_decoders": "scheduler", "resolve_cpu_decoders": "scheduler",
    "AUTO_MIN_IN_FLIGHT": "scheduler",
    "UploadBackend": "hybrid", "pack_semi_planar": "hybrid", "semi_planar_shape": "hybrid",
}

__all__ = sorted(_SURFACE)


def __getattr__(name: str) -> Any:
    module = _SURFACE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
