"""Test videos of labelled shots: cuts, fades and dissolves between shots, and the motion and flashes
that must not count as boundaries."""


from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import av
import numpy as np

from ..errors import ArgumentError, fail
from ._barcoded import _draw_barcode, _texture, render_frame

BOUNDARY_KINDS = ("cut", "dissolve", "fade")
SCENE_VIDEO_CLASSES = ("cuts", "dissolves", "fades", "motion", "flashes", "hard_motion")
_CRASH_ZOOM = 3.5  # how far a crash zoom of a "hard_motion" shot goes in


@dataclass(frozen=True)
class SceneEvent:
    """Something that happens in a scene video, frames ``start`` to ``end`` inclusive.

    Shot boundaries (``kind`` in :data:`BOUNDARY_KINDS`): ``end`` is the first frame that shows
    the new shot alone and ``start`` the first frame that is not the old shot alone, so a cut has
    ``start == end``, a dissolve's ``start..end-1`` are blends, and a fade's ``start..end-1``
    are the frames dimmed towards, at, and back from black. Events that are not boundaries:
    ``"flash"`` (a few overexposed frames) and ``"motion"`` (a fast pan, shake, zoom or large
    object crossing the frame, with motion blur; in ``"hard_motion"`` videos a whip pan, a crash
    zoom, hand-held shake or a large object crossing the frame fast).
    """

    kind: str
    start: int
    end: int

    @property
    def is_boundary(self) -> bool:
        return self.kind in BOUNDARY_KINDS


@dataclass(frozen=True)
class SceneVideo:
    """A synthetic scene video (:func:`make_scene_video`) and the ground truth of what happens in it."""

    path: str
    num_frames: int
    fps: int
    events: tuple[SceneEvent, ...]

    @property
    def boundaries(self) -> tuple[SceneEvent, ...]:
        """The shot boundaries (frame 0, the start of the first shot, is not one of them)."""
        return tuple(event for event in self.events if event.is_boundary)

    def score(self, found: Sequence[int], *, cut_tolerance: int = 2) -> dict[str, int]:
        """Count detections (frame numbers of new shots) against the labels.

        A cut is found by a detection within ``cut_tolerance`` frames of it; a dissolve or fade by
        one within its span (``start`` to ``end``). Each detection finds one boundary at most (the
        one whose new-shot frame it is nearest); the detections left over are false.

        Returns:
            ``true`` (boundaries found), ``missed`` (boundaries not found), ``false`` (detections
            that are no boundary).
        """
        unused = sorted({int(frame) for frame in found})
        hits = 0
        for boundary in self.boundaries:
            margin = cut_tolerance if boundary.kind == "cut" else 0
            inside = [frame for frame in unused if boundary.start - margin <= frame <= boundary.end + margin]
            if inside:
                unused.remove(min(inside, key=lambda frame: abs(frame - boundary.end)))
                hits += 1
        return {"true": hits, "missed": len(self.boundaries) - hits, "false": len(unused)}


def _tinted_texture(width: int, height: int, rng: np.random.Generator) -> np.ndarray:
    """:func:`_texture` with a palette of its own: its colours mixed by a random matrix, a random
    contrast, a random mean colour and a colour ramp across it (uint8 RGB)."""
    texture = _texture(width, height, rng).astype(np.float32) - 128.0
    mix = rng.uniform(-0.6, 0.6, size=(3, 3)) + np.eye(3) * rng.uniform(0.3, 1.2)
    base = rng.uniform(50, 200, size=3)
    ramp = rng.uniform(-60, 60, size=3)
    angle = rng.uniform(0, 2 * math.pi)
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float32)
    along = (np.cos(angle) * xs / width + np.sin(angle) * ys / height)[..., None]
    look = (texture @ mix.T.astype(np.float32)) * rng.uniform(0.6, 1.3) + base + ramp * (along - 0.5)
    return np.clip(look, 0, 255).astype(np.uint8)


class _Shot:
    """One synthetic shot: a camera moving over a tinted noise texture with coloured boxes moving
    across it, rendered as float32 RGB (0-255) for any shot-local time, fractions included."""

    def __init__(self, rng: np.random.Generator, width: int, height: int, *, motion: str = "slow",
                 look: np.ndarray | None = None):
        self.width, self.height = width, height
        if look is None:  # a new place: texture, palette, brightness and contrast of its own
            look = _tinted_texture(3 * width, 3 * height, rng).astype(np.float32)
        self.look = look
        th, tw = look.shape[:2]
        self.x0, self.y0 = rng.uniform(0, tw), rng.uniform(0, th)
        self.zoom0 = rng.uniform(0.9, 1.4)
        self.motion = motion
        slow = rng.uniform(0.2, 1.5) * width / 160
        direction = rng.uniform(0, 2 * math.pi)
        self.vx, self.vy, self.zoom_rate = slow * math.cos(direction), slow * math.sin(direction), 0.0
        self.shake = 0.0
        self.big_box = None
        self.whip = None  # (time of the fastest frame, its pixels per frame, frames of the swing, direction)
        self.crash = None  # shot time of a crash zoom's middle
        if motion == "pan":
            fast = rng.uniform(0.06, 0.15) * width
            self.vx, self.vy = fast * math.cos(direction), 0.3 * fast * math.sin(direction)
        elif motion == "shake":
            self.shake = rng.uniform(0.04, 0.08) * width
        elif motion == "zoom":
            self.zoom_rate = rng.uniform(0.1, 0.15)  # zooming in and out: up to 2x either way
        elif motion == "object":
            self.big_box = (rng.uniform(0, 255, size=3), rng.uniform(0.07, 0.12) * width)
        elif motion == "whip":  # the camera swings several frame widths away in a few frames
            self.whip = (rng.uniform(10, 30), rng.uniform(0.35, 0.6) * width, rng.uniform(1.5, 3.0), direction)
        elif motion == "crash":  # a zoom of _CRASH_ZOOM x in a few frames
            self.crash = rng.uniform(10, 30)
        elif motion == "handheld":
            self.shake = rng.uniform(0.12, 0.2) * width
        elif motion == "crossing":  # a large object crossing the frame in 3 to 5 frames, back and forth
            self.big_box = (rng.uniform(0, 255, size=3), rng.uniform(0.2, 0.35) * width)
        self.seed = int(rng.integers(1 << 30))
        self.boxes = [(rng.uniform(0, 255, size=3), rng.uniform(0.1, 0.25), rng.uniform(0, 6)) for _ in range(2)]

    def render(self, t: float) -> np.ndarray:
        width, height = self.width, self.height
        th, tw = self.look.shape[:2]
        zoom = self.zoom0 * math.exp(math.log(2) * math.sin(self.zoom_rate * t))
        if self.crash is not None:
            zoom *= math.exp(math.log(_CRASH_ZOOM) / (1 + math.exp(-(t - self.crash) / 1.5)))
        swing_x = swing_y = 0.0
        if self.whip is not None:  # the distance covered by a bell-shaped speed over the swing
            middle, speed, frames, direction = self.whip
            moved = speed * frames * math.sqrt(math.pi / 2) * (1 + math.erf((t - middle) / (frames * math.sqrt(2))))
            swing_x, swing_y = moved * math.cos(direction), 0.3 * moved * math.sin(direction)
        jitter_x = jitter_y = 0.0
        if self.shake:
            whole = math.floor(t)
            here, after = (np.random.default_rng([self.seed, whole + k + 1000]).normal(size=2) for k in (0, 1))
            jitter_x, jitter_y = (here + (after - here) * (t - whole)) * self.shake
        cx = self.x0 + self.vx * t + jitter_x + swing_x
        cy = self.y0 + self.vy * t + jitter_y + swing_y
        rows = np.floor(cy + (np.arange(height) - height / 2) / zoom).astype(np.int64) % th
        columns = np.floor(cx + (np.arange(width) - width / 2) / zoom).astype(np.int64) % tw
        frame = self.look[rows][:, columns]
        box_w, box_h = max(2, width // 8), max(2, height // 6)
        for color, speed, phase in self.boxes:
            bx = int((width - box_w) * (0.5 + 0.5 * math.sin(speed * t + phase)))
            by = int((height - box_h) * (0.5 + 0.5 * math.cos(0.7 * speed * t + 2 * phase)))
            frame[by:by + box_h, bx:bx + box_w] = color
        if self.big_box is not None:  # a large object crossing the frame fast, back and forth
            color, speed = self.big_box
            size_w, size_h = width // 2, (2 * height) // 3
            span = width + size_w
            bx = int((speed * t) % (2 * span)) - size_w
            bx = bx if bx < width else 2 * width - bx
            left, right = max(0, bx), min(width, bx + size_w)
            if right > left:
                frame[height // 6:height // 6 + size_h, left:right] = color
        return frame

    def frame(self, t: float, *, blur: bool) -> np.ndarray:
        """The picture at shot time ``t``; ``blur``: averaged over the frame interval (motion blur)."""
        if not blur:
            return self.render(t)
        return np.mean([self.render(t - s) for s in (0.0, 0.25, 0.5, 0.75)], axis=0)


def _encode_rgb(path: str, frames: Iterable[np.ndarray], *, fps: int, keyframe_interval: int, crf: int = 20) -> str:
    """libx264 at a fixed keyframe interval, x264's own scene-cut keyframes off."""
    with av.open(path, "w") as container:
        stream = None
        for image in frames:
            if stream is None:
                stream = container.add_stream("libx264", rate=fps)
                stream.width, stream.height, stream.pix_fmt = image.shape[1], image.shape[0], "yuv420p"
                stream.options = {"preset": "veryfast", "crf": str(crf), "g": str(keyframe_interval),
                                  "keyint_min": str(keyframe_interval), "sc_threshold": "0"}
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        if stream is None:
            raise ArgumentError("no frames to encode")
        container.mux(stream.encode(None))
    return path


def make_scene_video(
    path: str | os.PathLike,
    kind: str,
    *,
    num_shots: int = 6,
    width: int = 192,
    height: int = 108,
    fps: int = 25,
    keyframe_interval: int = 250,
    seed: int = 0,
) -> SceneVideo:
    """A video of ``num_shots`` synthetic shots with labelled shot boundaries of one class.

    ``kind``:

    - ``"cuts"``: hard cuts; shots of 8 to 60 frames; one in three new shots is the same place as
      the shot before (same texture and palette, another camera position), so only the picture's
      structure changes, not its colours.
    - ``"dissolves"``: cross-dissolves of 10 to 30 frames, both shots moving through them.
    - ``"fades"``: fade to black (6-20 frames), 0-8 black frames, fade from black (6-20 frames);
      one in three leaves out the fade-out (a cut to black) or the fade-in (a cut from black).
    - ``"motion"``: hard cuts between shots in fast motion (fast pans, shaky camera, fast zooms, a
      large object crossing the frame), all with motion blur; each shot's motion is an event.
    - ``"flashes"``: hard cuts between shots lit by 1-3 flashes each, 1-3 overexposed frames.
    - ``"hard_motion"``: as ``"motion"``, with the camera moves that fool detectors most: a whip
      pan (the camera swings several frame widths in a few frames, 0.35-0.6 of the width per frame
      at its fastest), a crash zoom (3.5x in about 6 frames), hand-held shake (12-20% of the width
      from frame to frame) and a large object crossing the frame in 3 to 5 frames, back and forth.

    Every frame carries its index as a barcode (:func:`read_barcode`). The shots pan slowly and
    their boxes move, so no two consecutive frames are identical.

    Returns:
        The path, frame count, frame rate and every event (boundaries and, for ``"motion"`` and
        ``"flashes"``, what is not a boundary).
    """
    if kind not in SCENE_VIDEO_CLASSES:
        raise fail("kind", kind, "one of " + ", ".join(map(repr, SCENE_VIDEO_CLASSES)))
    path = os.fspath(path)
    rng = np.random.default_rng([seed, SCENE_VIDEO_CLASSES.index(kind)])
    motions = {"motion": ("pan", "shake", "zoom", "object"), "hard_motion": ("whip", "handheld", "crash", "crossing")}
    shots: list[_Shot] = []
    for number in range(num_shots):
        moves = motions.get(kind)
        motion = moves[(number + seed) % len(moves)] if moves else "slow"
        same_place = kind == "cuts" and number > 0 and number % 3 == 2
        shots.append(_Shot(rng, width, height, motion=motion, look=shots[-1].look if same_place else None))
    frames: list[np.ndarray] = []
    events: list[SceneEvent] = []
    blur = kind in motions
    origin = 0  # frame number of the current shot's time 0
    for number, shot in enumerate(shots):
        length = int(rng.integers(8, 61)) if kind == "cuts" else int(rng.integers(40, 71))
        lead_in = 0  # frames of this shot already shown by the transition into it
        if number > 0 and (kind in ("cuts", "flashes") or kind in motions):
            events.append(SceneEvent("cut", len(frames), len(frames)))
        elif number > 0 and kind == "dissolves":
            lead_in = int(rng.integers(10, 31))
            start = len(frames) - lead_in  # the last frames of the shot before become the blends
            previous = shots[number - 1]
            for i in range(lead_in):
                alpha = (i + 1) / (lead_in + 1)
                old = previous.frame(start + i - origin, blur=blur)
                frames[start + i] = (1 - alpha) * old + alpha * shot.frame(i, blur=blur)
            events.append(SceneEvent("dissolve", start, len(frames)))
        elif number > 0:  # fades
            variant = number % 3
            fade_out = 0 if variant == 2 else int(rng.integers(6, 21))
            lead_in = 0 if variant == 1 else int(rng.integers(6, 21))
            black = int(rng.integers(0, 9)) if fade_out and lead_in else int(rng.integers(2, 9))
            start = len(frames) - fade_out
            for i in range(fade_out):
                frames[start + i] = frames[start + i] * (1 - (i + 1) / (fade_out + 1))
            frames.extend(np.zeros((height, width, 3), np.float32) for _ in range(black))
            frames.extend(shot.frame(i, blur=blur) * ((i + 1) / (lead_in + 1)) for i in range(lead_in))
            events.append(SceneEvent("fade", start, len(frames)))
        origin = len(frames) - lead_in
        body = [shot.frame(lead_in + i, blur=blur) for i in range(length)]
        first = len(frames)
        if kind in motions:
            events.append(SceneEvent("motion", first, first + length - 1))
        if kind == "flashes":
            count = int(rng.integers(1, 4)) if length >= 30 else 1
            spots = np.arange(3, length - 8, 8)  # flashes at least 8 frames apart, not at the shot's ends
            places = rng.choice(spots, size=min(count, spots.size), replace=False)
            for place in sorted(places.tolist()):
                duration = int(rng.integers(1, 4))
                strength = rng.uniform(0.55, 0.9)
                for i in range(duration):
                    level = strength * 0.75 ** i
                    body[place + i] = body[place + i] * (1 - level) + 255.0 * level
                events.append(SceneEvent("flash", first + place, first + place + duration - 1))
        frames.extend(body)
    images = []
    for index, frame in enumerate(frames):
        image = np.clip(frame, 0, 255).astype(np.uint8)
        _draw_barcode(image, index)
        images.append(image)
    _encode_rgb(path, images, fps=fps, keyframe_interval=keyframe_interval)
    return SceneVideo(path, len(images), fps, tuple(sorted(events, key=lambda e: (e.start, e.end))))


def make_shots_video(
    path: str | os.PathLike,
    *,
    shot_lengths: Sequence[int] = (45, 52, 68, 35),
    dissolves: Sequence[int] | None = None,
    width: int = 320,
    height: int = 240,
    fps: int = 30,
    keyframe_interval: int = 60,
    seed: int = 1,
) -> str:
    """A synthetic video of several shots with cuts or dissolves between them (libx264, a keyframe
    every ``keyframe_interval`` frames wherever the shots change).

    Each shot pans a texture of its own colours (seeds ``seed``, ``seed + 1``...); every frame carries its
    index as a barcode (:func:`read_barcode`), counted across shots, so shot ``k``
    is shown alone from frame ``sum(shot_lengths[:k])``. ``dissolves[k - 1]`` frames before that
    (0: a cut) are blends of shot ``k - 1`` into shot ``k``, taken from the end of shot ``k - 1``.
    """
    total = sum(shot_lengths)
    dissolves = list(dissolves) if dissolves is not None else [0] * (len(shot_lengths) - 1)
    if len(dissolves) != len(shot_lengths) - 1:
        raise ArgumentError(f"dissolves has {len(dissolves)} values for {len(shot_lengths) - 1} boundaries")
    textures = [_tinted_texture(2 * width, 2 * height, np.random.default_rng(seed + shot))
                for shot in range(len(shot_lengths))]
    frames: list[np.ndarray] = []
    for shot, length in enumerate(shot_lengths):
        first = len(frames)
        frames.extend(render_frame(i, textures[shot], width, height, total) for i in range(first, first + length))
        blends = dissolves[shot - 1] if shot > 0 else 0
        for k in range(blends):  # the last frames of the shot before fade into this one
            i = first - blends + k
            alpha = (k + 1) / (blends + 1)
            incoming = render_frame(i, textures[shot], width, height, total).astype(np.float32)
            frames[i] = np.clip((1 - alpha) * frames[i] + alpha * incoming + 0.5, 0, 255).astype(np.uint8)
            _draw_barcode(frames[i], i)
    return _encode_rgb(os.fspath(path), frames, fps=fps, keyframe_interval=keyframe_interval)
