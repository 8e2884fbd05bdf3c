"""The scene method's rules as data (vclip.keyframes.SceneRules): each group moves its decisions the
way its fields say, on frames made here; the rules reach every public entry point, worker processes
included; bad values are refused with the field's name."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import vclip
from vclip._scenes import features as _features
from vclip._scenes import shots as _shots
from vclip.keyframes import (
    CutRules,
    DissolveRules,
    FadeRules,
    FlashRules,
    SceneRules,
    UsualChangeRules,
    extract_keyframes,
    extract_keyframes_many,
    find_shot_boundaries,
    find_shot_boundaries_many,
)
from vclip.synthetic import make_scene_video

# No change can reach these (a histogram distance of 1 means no colour in common): no cut passes.
NO_CUTS = SceneRules(usual_change=UsualChangeRules(least_histogram_change=1.0, least_blocks_change=1.0))


def _picture(seed: int, height: int = 36, width: int = 64) -> np.ndarray:
    """Random colours in 6x6-pixel cells."""
    cells = np.random.default_rng(seed).integers(0, 256, (height // 6 + 1, width // 6 + 1, 3), dtype=np.uint8)
    return np.kron(cells, np.ones((6, 6, 1), dtype=np.uint8))[:height, :width]


def _panning(seed: int, frames: int) -> np.ndarray:
    """A picture of 6x6-pixel cells panning 1 pixel a frame: RGB uint8 [frames, 36, 64, 3]."""
    scene = _picture(seed, 36, 64 + frames)
    return np.stack([scene[:, k:k + 64] for k in range(frames)])


def _still(seed: int, frames: int) -> np.ndarray:
    """One picture with a little noise in each frame: float64 [frames, 36, 64, 3]."""
    noise = np.random.default_rng(seed + 1000).normal(0.0, 2.0, (frames, 36, 64, 3))
    return _picture(seed).astype(np.float64) + noise


def _signals(frames: np.ndarray) -> _features.SceneSignals:
    frames = np.clip(frames, 0, 255).astype(np.uint8)
    features = _features.frame_features(frames)
    return _features.SceneSignals(distances=_features.gap_distances(features, None), luma_mean=features["mean"],
                                  dark_share=features["dark"], thumbnails=_features.thumbnails(frames))


def _found(signals: _features.SceneSignals, rules: SceneRules | None = None) -> list[tuple[int, str]]:
    boundaries = _shots.shot_boundaries(signals, 2.0, rules if rules is not None else SceneRules())
    return [(boundary.frame, boundary.kind) for boundary in boundaries]


@pytest.fixture(scope="module")
def weak_and_strong_cuts() -> _features.SceneSignals:
    """A pan whose colours jump at frame 40 while its picture goes on (a weak cut), then a cut to
    another picture at frame 80 (a strong one)."""
    going_on = _panning(4, 80).astype(np.int16)
    going_on[40:, ..., 0] += 60
    return _signals(np.concatenate([going_on, _panning(6, 40)]))


def test_the_default_rules_are_the_tuned_method(weak_and_strong_cuts):
    assert _found(weak_and_strong_cuts) == [(40, "cut"), (80, "cut")]
    assert _shots.shot_boundaries(weak_and_strong_cuts, 2.0) == _shots.shot_boundaries(
        weak_and_strong_cuts, 2.0, SceneRules(cuts=CutRules(), dissolves=DissolveRules()))


def test_a_larger_least_change_drops_the_weak_cut(weak_and_strong_cuts):
    """Raised between the two cuts' histogram changes, the least change keeps the strong cut only."""
    weak, strong = weak_and_strong_cuts.distances["H"][1, [40, 80]]
    assert weak < strong
    rules = SceneRules(usual_change=UsualChangeRules(least_histogram_change=float(weak + strong) / 2))
    assert _found(weak_and_strong_cuts, rules) == [(80, "cut")]
    assert _found(weak_and_strong_cuts, NO_CUTS) == []


def test_a_higher_noise_floor_drops_the_weak_cut(weak_and_strong_cuts):
    """With a histogram noise floor between half of each cut's change (the usual change beside
    them is a small fraction of it), the weak cut no longer stands out twice from the usual change
    plus the floor: the strong one still does."""
    weak, strong = weak_and_strong_cuts.distances["H"][1, [40, 80]]
    rules = SceneRules(usual_change=UsualChangeRules(histogram_noise_floor=float(weak + strong) / 4))
    assert _found(weak_and_strong_cuts, rules) == [(80, "cut")]


def test_a_cut_that_must_stand_further_above_its_neighbours_is_motion():
    """A cut between two panning pictures changes its blocks less than 8 times as much as the pan
    changes them beside it: asked for 8 times in both features' test, it is taken for motion."""
    signals = _signals(np.concatenate([_panning(4, 40), _panning(5, 40)]))
    assert _found(signals) == [(40, "cut")]
    blocks = signals.distances["B"][1]
    assert blocks[40] < 8 * max(blocks[39], blocks[41])
    assert _found(signals, SceneRules(cuts=CutRules(both_above_neighbours=8.0))) == []


def test_a_shorter_flash_keeps_two_close_cuts():
    """Cuts 3 frames apart: within the longest flash (4 frames) only the stronger is kept; with
    flashes of at most 2 frames, the 3-frame shot between them is a shot."""
    signals = _signals(np.concatenate([_panning(4, 20), _panning(5, 3), _panning(6, 20)]))
    assert _found(signals) == [(20, "cut")]
    assert _found(signals, SceneRules(flashes=FlashRules(longest_frames=2))) == [(20, "cut"), (23, "cut")]


def test_a_stricter_black_drops_a_fade_through_dark_grey():
    """A fade through frames of luma 10: a fade by default (black is darker than luma 24), none
    where the darkest frame must be darker than luma 5."""
    old, new = _still(8, 40), _still(9, 40)
    dimming = [old[30 + k] * (1 - (k + 1) / 9) for k in range(8)]
    brightening = [new[k] * ((k + 1) / 9) for k in range(8)]
    frames = np.concatenate([old[:30], dimming, np.full((4, 36, 64, 3), 10.0), brightening, new[8:]])
    signals = _signals(frames)
    (fade,) = _shots.shot_boundaries(signals, 2.0)
    assert fade.kind == "fade" and fade.start <= 31 and fade.frame >= 42
    assert all(kind != "fade" for _, kind in _found(signals, SceneRules(fades=FadeRules(black_luma=5))))


def test_a_dissolve_must_go_straighter_than_a_blend_can():
    """A blend of two still pictures over 16 frames is a dissolve; its frame pairs' block changes
    add up to at least its whole change, so asked to add up to 0.9 of it, it is refused; and asked
    for more of a difference than a thumbnail matched against itself can leave, too."""
    old, new = _still(10, 60), _still(11, 60)
    weights = (np.arange(16) + 1.0)[:, None, None, None] / 17
    frames = np.concatenate([old[:30], (1 - weights) * old[30:46] + weights * new[:16], new[16:]])
    signals = _signals(frames)
    (dissolve,) = _shots.shot_boundaries(signals, 2.0)
    assert dissolve.kind == "dissolve" and 30 <= dissolve.start < dissolve.frame <= 46
    assert _shots._path_length(signals.distances["B"], dissolve.start - 1, dissolve.frame) >= 0.9
    assert _found(signals, SceneRules(dissolves=DissolveRules(max_path=0.9))) == []
    assert _found(signals, SceneRules(dissolves=DissolveRules(moved_share=1.01))) == []


@pytest.fixture(scope="module")
def cuts_video(tmp_path_factory):
    return make_scene_video(tmp_path_factory.mktemp("rules") / "cuts.mp4", "cuts", num_shots=3, seed=1)


def test_every_entry_point_takes_the_rules(cuts_video):
    """find_shot_boundaries, its many-video form in worker processes, and the scene keyframes (of
    one video, of many, as Ray rows) follow the rules given: the labelled cuts by default, none
    where no change can pass."""
    cuts = [boundary.start for boundary in cuts_video.boundaries]
    assert [boundary.frame for boundary in find_shot_boundaries(cuts_video.path, device="cpu")] == cuts
    assert find_shot_boundaries(cuts_video.path, device="cpu", rules=NO_CUTS) == []
    paths = [cuts_video.path, cuts_video.path]
    assert list(find_shot_boundaries_many(paths, device="cpu", workers=2, rules=NO_CUTS)) == [[], []]
    assert extract_keyframes(cuts_video.path, method="scene", device="cpu").frame_indices.tolist() == [0] + cuts
    assert extract_keyframes(cuts_video.path, method="scene", device="cpu", rules=NO_CUTS).frame_indices.tolist() == [0]
    (found,) = extract_keyframes_many([cuts_video.path], method="scene", device="cpu", workers=1, rules=NO_CUTS)
    assert found.frame_indices.tolist() == [0]
    vray = pytest.importorskip("vclip.ray")  # needs the ray extra: the actors' class, without a cluster
    rows = vray.ExtractKeyframes(method="scene", rules=NO_CUTS, device="cpu")({"path": [cuts_video.path]})
    assert list(rows["frame_index"]) == [0]


def test_rules_are_values():
    """Frozen, equal by value, hashable and picklable (they travel to worker processes), shown by
    their public names."""
    rules = SceneRules(cuts=CutRules(above_neighbours=3))
    assert rules == SceneRules(cuts=CutRules(above_neighbours=3.0)) != SceneRules()
    assert pickle.loads(pickle.dumps(rules)) == rules and hash(rules) == hash(pickle.loads(pickle.dumps(rules)))
    assert rules.cuts.above_neighbours == 3.0 and isinstance(rules.cuts.above_neighbours, float)
    assert repr(rules).startswith("SceneRules(flashes=FlashRules(longest_frames=4,")
    assert SceneRules.__module__ == CutRules.__module__ == "vclip.keyframes"
    with pytest.raises(AttributeError):
        rules.cuts.above_neighbours = 4.0  # type: ignore[misc]


@pytest.mark.parametrize("make, message", [
    (lambda: CutRules(above_neighbours=0), r"CutRules.above_neighbours \(0\) must be a number > 0"),
    (lambda: CutRules(wider_frames=20), r"CutRules.wider_frames \(20\) must be an integer in \[1, 19\]"),
    (lambda: CutRules(look_frames=1.5), r"CutRules.look_frames \(1.5\) must be an integer in \[2, 40\]"),
    (lambda: FlashRules(longest_frames=0), r"FlashRules.longest_frames \(0\) must be an integer in \[1, 39\]"),
    (lambda: FlashRules(run_differs="1"), r"FlashRules.run_differs \('1'\) must be a number > 0"),
    (lambda: UsualChangeRules(blocks_noise_floor=float("nan")), r"UsualChangeRules.blocks_noise_floor \(nan\)"),
    (lambda: FadeRules(black_share=1.5), r"FadeRules.black_share \(1.5\) must be a number in \(0, 1\]"),
    (lambda: DissolveRules(half_widths=(3, 2)), r"DissolveRules.half_widths \(\(3, 2\)\) must be a tuple of ascending"),
    (lambda: DissolveRules(half_widths=()), r"DissolveRules.half_widths \(\(\)\) must be a tuple of ascending"),
    (lambda: DissolveRules(half_widths=4), r"DissolveRules.half_widths \(4\) must be a tuple of ascending"),
    (lambda: DissolveRules(half_widths=(2, 18)), r"reach frames 42 apart: 2 x \(largest half-width \+ pair_spread\) "
                                                 r"must be at most 40"),
    (lambda: DissolveRules(span_edge=0.6), r"DissolveRules.span_edge \(0.6\) must be a number in \(0, 0.5\]"),
    (lambda: SceneRules(cuts=FadeRules()), r"SceneRules.cuts \(FadeRules\(.*\)\) must be a CutRules"),
])
def test_bad_rules_are_refused_by_name(make, message):
    with pytest.raises(vclip.ArgumentError, match=message):
        make()


def test_the_entry_points_refuse_what_is_not_rules_before_any_video():
    message = r"rules \('strict'\) must be a vclip.keyframes.SceneRules"
    with pytest.raises(vclip.ArgumentError, match=message):
        find_shot_boundaries("missing.mp4", rules="strict")
    with pytest.raises(vclip.ArgumentError, match=message):
        find_shot_boundaries_many(["missing.mp4"], rules="strict")
    with pytest.raises(vclip.ArgumentError, match=message):
        extract_keyframes("missing.mp4", method="scene", rules="strict")
    with pytest.raises(vclip.ArgumentError, match=message):
        extract_keyframes_many(["missing.mp4"], method="scene", rules="strict")
