"""How busy a GPU has been lately, as NVML measures it: the share of the time in which a kernel of
any process ran on it, averaged over NVML's samples since the previous reading (NVML samples every
1/6 to 1 s, depending on the GPU). Read through ``pynvml`` (nvidia-ml-py); where it is missing, or
NVML cannot tell, every reading is None."""

from __future__ import annotations

__all__ = ["GpuBusy"]


class GpuBusy:
    """Readings of one CUDA device's busy share (see the module's text).

    Args:
        cuda_index: The device as CUDA numbers it in this process (after ``CUDA_VISIBLE_DEVICES``);
            found in NVML by its PCI bus id.
    """

    def __init__(self, cuda_index: int):
        self._nvml = self._handle = None
        self._since = 0  # NVML's timestamp of the last sample read (microseconds)
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
        """The busy share (0 to 1) since the previous reading (since NVML's oldest sample, the first
        time), or None where NVML cannot tell (or took no sample since)."""
        if self._nvml is None:
            return None
        try:
            _, samples = self._nvml.nvmlDeviceGetSamples(self._handle, self._nvml.NVML_GPU_UTILIZATION_SAMPLES,
                                                         self._since)
        except Exception:  # NVMLError, e.g. NOT_FOUND when no sample was taken since
            return None
        samples = [sample for sample in samples if sample.timeStamp > self._since]
        if not samples:
            return None
        self._since = max(sample.timeStamp for sample in samples)
        return sum(sample.sampleValue.uiVal for sample in samples) / len(samples) / 100
