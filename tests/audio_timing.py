"""Reading the time back from the audio of synthetic videos (vclip.synthetic.audio_signal): the lag,
in samples, between decoded audio and the signal at a given time, shared by the audio tests."""

from __future__ import annotations

import numpy as np

from vclip.synthetic import audio_signal

RATE = 16000
"""The output rate of the alignment checks."""


def measured_lag(samples: np.ndarray, seconds: float, rate: int = RATE, search: int = 40,
                 where: np.ndarray | None = None) -> tuple[float, float]:
    """``(lag, correlation)``: the shift (in samples, to 0.05) that best matches ``samples`` (those
    ``where`` is True) to :func:`audio_signal` from ``seconds`` after the first frame (sample ``j``
    against the signal at ``seconds + (j + lag) / rate``), searched within ``search`` samples."""
    where = np.ones(samples.size, dtype=bool) if where is None else where
    times = (seconds + np.arange(samples.size) / rate)[where]
    samples = np.asarray(samples, dtype=np.float64)[where]

    def best(lags: np.ndarray) -> tuple[float, float]:
        references = audio_signal(times[None, :] + lags[:, None] / rate)
        scores = references @ samples / np.sqrt((references ** 2).sum(axis=1) * (samples ** 2).sum() + 1e-12)
        return float(lags[int(np.argmax(scores))]), float(scores.max())

    coarse, _ = best(np.arange(-search, search + 1, dtype=np.float64))
    return best(coarse + np.arange(-1.0, 1.001, 0.05))
