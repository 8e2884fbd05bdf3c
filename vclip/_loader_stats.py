"""What a ClipLoader measures while it runs, and its one-line summary of an epoch."""

from __future__ import annotations

from dataclasses import dataclass, field

from ._pipeline import DecodeStats
from .memory import format_bytes

__all__ = ["LoaderCounters", "epoch_summary"]


@dataclass
class LoaderCounters(DecodeStats):
    """The decode counters plus the loader's own; thread-safe ``add``.

    Seconds: ``index`` indexing videos, ``sample`` drawing clips and planning jobs, ``build``
    batch assembly from the wait for a free buffer to the last write (wall time per batch,
    summed), ``queue`` ready
    batches waiting for the consumer, ``consumer_wait`` the consumer blocked on the next batch,
    ``active`` wall time of the epochs.
    """

    batches: int = 0
    clips: int = 0
    skipped_clips: int = 0
    index_seconds: float = 0.0
    sample_seconds: float = 0.0
    build_seconds: float = 0.0
    queue_seconds: float = 0.0
    consumer_wait_seconds: float = 0.0
    active_seconds: float = 0.0
    memory_now: dict = field(default_factory=dict)
    memory_peak: dict = field(default_factory=dict)

    def snapshot(self) -> dict:
        """All counters at one instant (``as_dict`` with copies of the memory figures)."""
        with self._lock:
            values = self.as_dict()
            values["memory_now"], values["memory_peak"] = dict(self.memory_now), dict(self.memory_peak)
            return values

    def record_memory(self, sample: dict[str, int]) -> None:
        """Keep the latest memory figures and the peak of each."""
        with self._lock:
            self.memory_now = dict(sample)
            for name, value in sample.items():
                self.memory_peak[name] = max(value, self.memory_peak.get(name, 0))


def epoch_summary(epoch: int, start: dict, end: dict) -> str:
    """One line about an epoch from :meth:`ClipLoader.stats` taken at its start and its end."""
    seconds = end["seconds"]["active"] - start["seconds"]["active"]
    clips = end["clips"] - start["clips"]
    waited = end["seconds"]["consumer_wait"] - start["seconds"]["consumer_wait"]
    decoded = end["frames"]["decoded"] - start["frames"]["decoded"]
    delivered = end["frames"]["delivered"] - start["frames"]["delivered"]
    skipped = end["skipped"]["clips"] - start["skipped"]["clips"]
    memory = end["memory"]
    return (
        f"vclip loader epoch {epoch}: {end['batches'] - start['batches']} batches, {clips} clips in {seconds:.2f} s "
        f"({clips / max(seconds, 1e-9):.1f} clips/s); waited {waited:.2f} s for batches "
        f"({100 * waited / max(seconds, 1e-9):.0f}%); {decoded / max(delivered, 1):.2f} decoded frames per delivered "
        f"frame; {skipped} clips replaced ({len(end['skipped']['videos'])} bad videos); "
        f"memory peak {format_bytes(memory['peak_bytes'])}, estimate {format_bytes(memory['estimate_bytes'])}"
    )
