"""The scene method's rules: every number the shot-boundary decisions read, grouped by detector,
each checked when it is made. The defaults are the tuned method; ``docs/notes/scene-rules.md`` says
how each was chosen."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ArgumentError, check_integer, check_number, fail, is_integer
from .features import MAX_GAP

__all__ = ["CutRules", "DissolveRules", "FadeRules", "FlashRules", "SceneRules", "UsualChangeRules"]


def _set(rules: object, name: str, value: object) -> None:
    object.__setattr__(rules, name, value)  # frozen: the checked value replaces the given one


def _integer(rules: object, name: str, *, minimum: int, maximum: int | None = None) -> None:
    _set(rules, name, check_integer(f"{type(rules).__name__}.{name}", getattr(rules, name), minimum=minimum,
                                    maximum=maximum))


def _number(rules: object, name: str, *, minimum: float = 0, maximum: float | None = None,
            minimum_inclusive: bool = False) -> None:
    _set(rules, name, check_number(f"{type(rules).__name__}.{name}", getattr(rules, name), minimum=minimum,
                                   maximum=maximum, minimum_inclusive=minimum_inclusive))


@dataclass(frozen=True)
class FlashRules:
    """When a short run of frames is a flash (a few overexposed frames, a brief occlusion), left
    out of every test that follows. Distances here are in units of the least changes of
    :class:`UsualChangeRules` (the larger of the two features' ratios).

    Attributes:
        longest_frames: The most frames a flash lasts; a shot lasts longer: of cuts at most this many
            frames apart, only the one of most evidence is kept.
        run_differs: Some frame of the run is at least this far from both frames around the run.
        sides_closer: And the two frames around the run are this many times closer to each other.
        frame_differs: A frame of such a run is left out when at least this far from both frames around it,
        frame_over_sides: and this many times as far from them as they are from each other.
    """

    longest_frames: int = 4
    run_differs: float = 1.0
    sides_closer: float = 3.0
    frame_differs: float = 0.5
    frame_over_sides: float = 2.0

    def __post_init__(self):
        _integer(self, "longest_frames", minimum=1, maximum=MAX_GAP - 1)
        for name in ("run_differs", "sides_closer", "frame_differs", "frame_over_sides"):
            _number(self, name)


@dataclass(frozen=True)
class UsualChangeRules:
    """What a boundary's change is measured against: the usual change at the same frame gap around
    it, plus a noise floor, and the least change that can be a boundary at all. ``histogram`` is the
    colour feature (half the L1 distance of 4x4x4 RGB histograms, 0-1), ``blocks`` the layout
    feature (the median block's mean RGB change, 0-1).

    Attributes:
        pairs_each_side: Frame pairs just before and just after a place whose median distance is
            the usual change there.
        histogram_noise_floor: Added to the usual histogram change before dividing by it, so a still
            shot's near-zero change does not turn noise into a boundary.
        blocks_noise_floor: The same for the blocks.
        least_histogram_change: Histogram distances below this are never a boundary (and are the unit
            of the distances that find flashes).
        least_blocks_change: The same for the blocks.
    """

    pairs_each_side: int = 12
    histogram_noise_floor: float = 0.045
    blocks_noise_floor: float = 0.015
    least_histogram_change: float = 0.15
    least_blocks_change: float = 0.05

    def __post_init__(self):
        _integer(self, "pairs_each_side", minimum=1)
        for name in ("histogram_noise_floor", "blocks_noise_floor", "least_histogram_change", "least_blocks_change"):
            _number(self, name, maximum=1)

    @property
    def noise_floor(self) -> dict[str, float]:
        """The noise floors by feature name (``"H"``, ``"B"``)."""
        return {"H": self.histogram_noise_floor, "B": self.blocks_noise_floor}

    @property
    def least_change(self) -> dict[str, float]:
        """The least changes by feature name (``"H"``, ``"B"``)."""
        return {"H": self.least_histogram_change, "B": self.least_blocks_change}


@dataclass(frozen=True)
class CutRules:
    """When the change from one frame to the next is a cut, beyond standing out from the usual
    change (``scene_threshold``): made at once and for good, and not motion.

    Attributes:
        wider_frames: Frames each side of the pair over which the cut's wider change is measured.
        abrupt_share: The cut's change is at least this share of the wider change (else it is gradual).
        lasting_share: The wider change is at least this share of the cut's (else the picture came back).
        above_neighbours: The cut's change is this many times that of each frame pair beside it in the
            feature that finds it (fast motion changes every pair about alike).
        both_above_neighbours: Either feature's change is this many times that of each pair beside it
            (a whip pan sweeps new colours in while every block keeps changing alike).
        look_frames: Frames before the cut (and after it) that must not show the new (old) picture again.
        new_share: None of them comes within this share of the cut's change of its first (last) frame.
        new_share_with_flashes: Nor within this share, counting the frames left out as flashes.
    """

    wider_frames: int = 8
    abrupt_share: float = 0.5
    lasting_share: float = 0.6
    above_neighbours: float = 2.0
    both_above_neighbours: float = 1.15
    look_frames: int = 8
    new_share: float = 0.7
    new_share_with_flashes: float = 0.5

    def __post_init__(self):
        _integer(self, "wider_frames", minimum=1, maximum=(MAX_GAP - 1) // 2)
        _integer(self, "look_frames", minimum=2, maximum=MAX_GAP)
        for name in ("abrupt_share", "lasting_share", "above_neighbours", "both_above_neighbours", "new_share",
                     "new_share_with_flashes"):
            _number(self, name)


@dataclass(frozen=True)
class FadeRules:
    """When a run of black frames is a fade through black between two shots, and where the fade
    starts and ends. A pixel is dark below luma 24 (a feature of the frames, the same on both devices).

    Attributes:
        black_share: A frame is black when at least this share of its pixels is dark (not all: a logo
            or a caption may stay over the black).
        black_luma: The run's darkest frame has a mean luma of at most this (0-255),
        depth: and of at most this share of the brightest frame on either side.
        reach_frames: Frames each side of the run among which the brightest is looked for.
        settled: The fade ends at the first frame with this share of the brightest luma of the frames
            after it (and starts after the last frame with this share of those before it).
        settle_frames: Frames after (before) that are compared for it.
        margin_frames: Frames either side of a fade where no cut or dissolve is looked for.
    """

    black_share: float = 0.85
    black_luma: float = 24
    depth: float = 0.3
    reach_frames: int = 2 * MAX_GAP
    settled: float = 0.8
    settle_frames: int = 8
    margin_frames: int = 2

    def __post_init__(self):
        _number(self, "black_share", maximum=1)
        _number(self, "black_luma", maximum=255, minimum_inclusive=True)
        _number(self, "depth", maximum=1)
        _integer(self, "reach_frames", minimum=1)
        _number(self, "settled", maximum=1)
        _integer(self, "settle_frames", minimum=1)
        _integer(self, "margin_frames", minimum=0)


@dataclass(frozen=True)
class DissolveRules:
    """Where a gradual change is a dissolve: frames ``c - h - j`` against ``c + h + j`` for every
    half-width ``h`` and ``j = 0..pair_spread`` stand out from the usual change (``scene_threshold``),
    and the frames between are blends of the two shots, not a camera move.

    Attributes:
        half_widths: Half-lengths of the transitions looked for, ascending (frames).
        pair_spread: The change must hold for the pairs reaching this many frames further out.
        peak_radius: Frames around a peak of evidence where the transition's middle is looked for.
        max_betweenness: The middle frames are blends: ``d(a, m) + d(m, z)`` at most this many times
            ``d(a, z)`` (block distances; about 1 for a blend, 2 for unrelated pictures).
        max_path: The block changes of the frame pairs across the transition add up to at most this
            many times its whole change (a pan or a zoom sweeps through other pictures).
        span_edge: The transition starts after the last frame less than this share of the way to the
            new shot, and ends at the first frame more than ``1 - span_edge`` of the way.
        moved_block: Side, in thumbnail pixels, of the blocks matched to tell a camera move from a blend.
        moved_reach: Each block is matched with the best place of the other thumbnail within this many pixels.
        moved_share: The first new frame, matched so against the last old one, still differs by at least
            this share of its plain difference (else the old picture moved: a pan, a tilt, a zoom).
        moving_frames: Transitions of at least this many frames have their middle frames tested too:
        moving_share: at a quarter, half and three quarters of the way, each matched against the frame
            before it, the median share is at least this (a crash zoom's frames are moved copies).
    """

    half_widths: tuple[int, ...] = (2, 3, 4, 6, 8, 11, 14, 17)
    pair_spread: int = 3
    peak_radius: int = 8
    max_betweenness: float = 1.3
    max_path: float = 1.4
    span_edge: float = 0.25
    moved_block: int = 4
    moved_reach: int = 5
    moved_share: float = 0.4
    moving_frames: int = 3
    moving_share: float = 0.55

    def __post_init__(self):
        widths = self.half_widths
        if (not isinstance(widths, (tuple, list)) or not widths or not all(is_integer(w) and w >= 1 for w in widths)
                or list(widths) != sorted(set(widths))):
            raise fail("DissolveRules.half_widths", widths, "a tuple of ascending integers >= 1")
        widths = tuple(int(width) for width in widths)
        _set(self, "half_widths", widths)
        _integer(self, "pair_spread", minimum=0)
        if 2 * (widths[-1] + self.pair_spread) > MAX_GAP:
            raise ArgumentError(f"DissolveRules.half_widths ({widths[-1]} at most) and pair_spread "
                                f"({self.pair_spread}) reach frames {2 * (widths[-1] + self.pair_spread)} apart: "
                                f"2 x (largest half-width + pair_spread) must be at most {MAX_GAP}")
        _integer(self, "peak_radius", minimum=1)
        _number(self, "max_betweenness")
        _number(self, "max_path")
        _number(self, "span_edge", maximum=0.5)
        _integer(self, "moved_block", minimum=1)
        _integer(self, "moved_reach", minimum=0)
        _number(self, "moved_share", minimum_inclusive=True)
        _integer(self, "moving_frames", minimum=1)
        _number(self, "moving_share", minimum_inclusive=True)

    @property
    def compared_gaps(self) -> tuple[int, ...]:
        """The gaps at which the usual change is read: a cut's pair (1), and the pairs
        ``(c - h - j, c + h + j)`` of every gradual window."""
        return tuple(sorted({1} | {2 * (h + j) for h in self.half_widths for j in range(self.pair_spread + 1)}))


@dataclass(frozen=True)
class SceneRules:
    """Every rule of the scene method's shot-boundary decisions, grouped by detector, with the
    tuned values as defaults: pass one to :func:`find_shot_boundaries` (``rules=``) to change some.

    For example, to ask a cut to stand out more from the frame pairs beside it:

    ```python
    rules = SceneRules(cuts=CutRules(above_neighbours=3.0))
    boundaries = find_shot_boundaries("shots.mp4", rules=rules)
    ```

    The decisions follow the steps of the :mod:`vclip.keyframes` documentation, in order; the
    main threshold, how far a boundary must stand out from the usual change, is
    ``scene_threshold``, an argument of its own.

    Attributes:
        flashes: Short runs of frames left out as flashes (:class:`FlashRules`).
        usual_change: What a change is measured against (:class:`UsualChangeRules`).
        cuts: When a frame-to-frame change is a cut (:class:`CutRules`).
        fades: Fades through black (:class:`FadeRules`).
        dissolves: Dissolves and other gradual transitions (:class:`DissolveRules`).

    Raises:
        ArgumentError: A group that is not of its class (each group checks its own numbers when it
            is made, and raises ArgumentError naming the field).
    """

    flashes: FlashRules = field(default_factory=FlashRules)
    usual_change: UsualChangeRules = field(default_factory=UsualChangeRules)
    cuts: CutRules = field(default_factory=CutRules)
    fades: FadeRules = field(default_factory=FadeRules)
    dissolves: DissolveRules = field(default_factory=DissolveRules)

    def __post_init__(self):
        for name, kind in (("flashes", FlashRules), ("usual_change", UsualChangeRules), ("cuts", CutRules),
                           ("fades", FadeRules), ("dissolves", DissolveRules)):
            if not isinstance(getattr(self, name), kind):
                raise fail(f"SceneRules.{name}", getattr(self, name), f"a {kind.__name__}")


def check_rules(rules: object) -> SceneRules:
    """``rules`` if it is a :class:`SceneRules`; the default rules for None."""
    if rules is None:
        return SceneRules()
    if not isinstance(rules, SceneRules):
        raise fail("rules", rules, "a vclip.keyframes.SceneRules")
    return rules
