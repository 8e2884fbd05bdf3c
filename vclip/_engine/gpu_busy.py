"""How busy a GPU has been lately, as NVML measures it: the share of the time in which a kernel of
any process ran on it, averaged over NVML's samples of the last seconds (NVML samples every 1/6 to
1 s, depending on the GPU, and keeps the recent ones). Read through ``pynvml`` (nvidia-ml-py); where it
is missing, or NVML cannot tell, every reading is None."""

from __future__ import annotations

__all__ = ["GpuBusy"]


class GpuBusy:
    """Readings of one CUDA device's busy share (see the module's text).

    Args:
        cuda_index: The device as CUDA numbers it in this process (after ``CUDA_VISIBLE_DEVICES``);
            found in NVML by its PCI bus id.
        horizon_seconds: How far back from NVML's newest sample a reading averages. Readings taken
            between two batches a fraction of a second apart would otherwise rest on one sample or
            none (then nothing holds decode processes back).
    """

    def __init__(self, cuda_index: int, horizon_seconds: float = 2.0):
        self._nvml = self._handle = None
        self._horizon = int(horizon_seconds * 1e6)  # NVML's timestamps are in microseconds
        try:
            import cupy
            import pynvml

            pynvml.nvmlInit()
            bus_id = cupy.cuda.Device(cuda_index).pci_bus_id
            self._handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus_id.encode())
            self._nvml = pynvml
        except Exception:  # no nvidia-ml-py, no driver under it, or a device NVML does not list
            self._handle = None

    def __call__(self) -> float | None:
        """The busy share (0 to 1) over the samples of the horizon before NVML's newest, or None where
        NVML cannot tell."""
        if self._nvml is None:
            return None
        try:
            _, samples = self._nvml.nvmlDeviceGetSamples(self._handle, self._nvml.NVML_GPU_UTILIZATION_SAMPLES, 0)
        except Exception:  # NVMLError, e.g. NOT_FOUND before the first sample
            return None
        if not samples:
            return None
        newest = max(sample.timeStamp for sample in samples)
        recent = [sample.sampleValue.uiVal for sample in samples if sample.timeStamp >= newest - self._horizon]
        return sum(recent) / len(recent) / 100
