"""Synthetic test videos whose frames carry their own index as a barcode, and whose audio tells the time.

Each frame is a window panned across a fractal-noise texture twice the frame size, with three
coloured boxes moving on sine paths, and a 12-bit barcode of the frame index across the top band
(one cell per bit, most significant first, white for 1). :func:`read_barcode` reads the index back
from any decoded RGB frame, at any size, so tests can tell exactly which frame came out. An audio
track (``make_video(audio_codec=...)``) carries :func:`audio_signal`, a tone whose pitch steps
every 1/30 s, so tests can tell to the sample which audio came out.
"""

import warnings

from ._barcoded import AUDIO_STEP_SECONDS, BARCODE_BITS, audio_signal, make_video, read_barcode, render_frame
from ._scenes import (
    BOUNDARY_KINDS,
    SCENE_VIDEO_CLASSES,
    SceneEvent,
    SceneVideo,
    make_scene_video,
    make_shots_video,
)

__all__ = [
    "make_video", "read_barcode", "audio_signal", "AUDIO_STEP_SECONDS", "BARCODE_BITS",
    "make_scene_video", "SceneVideo", "SceneEvent",
    "BOUNDARY_KINDS", "SCENE_VIDEO_CLASSES", "make_shots_video",
]

for _function in (make_video, read_barcode, audio_signal, render_frame, make_scene_video, make_shots_video,
                  SceneVideo, SceneEvent):  # defined in private modules, public here
    _function.__module__ = __name__
del _function

_DEPRECATED = {"LabelledVideo": SceneVideo, "LabelledEvent": SceneEvent}  # old names: LabeledVideo is a dataset's row


def __getattr__(name: str):
    if name in _DEPRECATED:
        new = _DEPRECATED[name]
        warnings.warn(f"vclip.synthetic.{name} is deprecated; use vclip.synthetic.{new.__name__}",
                      DeprecationWarning, stacklevel=2)
        return new
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
