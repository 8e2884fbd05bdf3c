"""Shot boundaries on a labelled set made here: hard cuts, dissolves, fades through black, fast motion,
flashes and harder motion (vclip.synthetic.make_scene_video), scored per class as benchmarks/scenes.py scores them;
the dissolve of nasa_13013.mp4; the same boundaries on the GPU as on the CPU."""

from __future__ import annotations

import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from helpers import SHARED_VIDEOS

import vclip
from vclip._scenes import features as _features
from vclip._scenes import shots as _shots
from vclip._scenes import signals as scene_signals_module
from vclip.keyframes import DissolveRules, SceneRules, ShotBoundary, extract_keyframes, find_shot_boundaries
from vclip.synthetic import SCENE_VIDEO_CLASSES, make_scene_video, read_barcode

# Held out: the thresholds were set on seeds 0-11. Two videos of 6 shots per class.
SEEDS = (100, 101)

# What vclip must reach per class: precision and recall of the boundaries (cuts within 2 frames,
# gradual transitions within their span), at least what PySceneDetect 0.7.2's better default
# detector reached on each class of the held-out benchmark set (benchmarks/README.md): cuts
# 1.00 / 0.80, dissolves none found / 0.00, fades 1.00 / 1.00, motion 1.00 / 0.73 (0.84 / 0.90),
# flashes 0.55 / 0.93. vclip reached 1.00 / 1.00 on every class there. On hard_motion (whip pans,
# crash zooms, hand-held shake, large objects crossing fast) PySceneDetect's adaptive detector
# reports no false boundary but misses a quarter (1.00 / 0.75-0.77; vclip 1.00 / 0.98 over 102 such
# videos, 0.997 / 0.98 over 60 held out): vclip must keep its recall, and a precision well above
# the 0.45 it had before it looked for motion. x264 does not
# write the same bytes on every run (seen under load), and on these videos a whip pan then comes out
# as a boundary or more in some runs (0 to 3 false over these two videos in 13 runs: 1.00 to 0.77).
REQUIRED = {  # class: (precision, recall)
    "cuts": (1.0, 1.0),
    "dissolves": (0.9, 0.9),
    "fades": (1.0, 1.0),
    "motion": (1.0, 1.0),
    "flashes": (1.0, 1.0),
    "hard_motion": (0.7, 1.0),
}



@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scenes")
    return {
        kind: [make_scene_video(folder / f"{kind}_{seed}.mp4", kind, seed=seed) for seed in SEEDS]
        for kind in SCENE_VIDEO_CLASSES
    }


@pytest.fixture(scope="module")
def cpu_found(labelled):
    return {kind: [find_shot_boundaries(video.path, device="cpu") for video in group]
            for kind, group in labelled.items()}


def scores(group, found_per_video):
    counts = {"true": 0, "missed": 0, "false": 0}
    for video, found in zip(group, found_per_video):
        for key, value in video.score([b.frame for b in found]).items():
            counts[key] += value
    detected = counts["true"] + counts["false"]
    precision = counts["true"] / detected if detected else 1.0
    return precision, counts["true"] / (counts["true"] + counts["missed"]), counts


@pytest.mark.slow
@pytest.mark.parametrize("kind", SCENE_VIDEO_CLASSES)
def test_precision_and_recall_per_class(labelled, cpu_found, kind):
    precision, recall, counts = scores(labelled[kind], cpu_found[kind])
    wanted_precision, wanted_recall = REQUIRED[kind]
    detail = [[(b.kind, b.start, b.frame) for b in found] for found in cpu_found[kind]]
    assert precision >= wanted_precision and recall >= wanted_recall, (counts, detail)


@pytest.mark.slow
def test_kinds_and_spans_of_what_is_found(labelled, cpu_found):
    """Cuts are reported as cuts on the cut frame; dissolves and fades as such, inside their span."""
    for kind, expected in (("cuts", "cut"), ("dissolves", "dissolve"), ("fades", "fade")):
        for video, found in zip(labelled[kind], cpu_found[kind]):
            for boundary in video.boundaries:
                near = [b for b in found if boundary.start - 2 <= b.frame <= boundary.end + 2]
                assert len(near) == 1, (boundary, found)
                if expected == "cut":
                    assert near[0] == ShotBoundary(boundary.start, boundary.start, "cut")
                elif near[0].kind == expected:  # a fade that cuts to black may be found as that cut
                    assert boundary.start - 2 <= near[0].start < near[0].frame <= boundary.end


@pytest.mark.slow
def test_the_default_rules_find_the_labelled_boundaries_exactly(labelled, cpu_found):
    """SceneRules() is the tuned method: passed explicitly it finds what the defaults find on every
    labelled video, and on every class but hard_motion (whose x264 bytes vary) that is each labelled
    boundary once and nothing else, the cuts of the cuts class on their frame."""
    for kind in SCENE_VIDEO_CLASSES:
        for video, found in zip(labelled[kind], cpu_found[kind]):
            assert find_shot_boundaries(video.path, device="cpu", rules=SceneRules()) == found, video.path
            if kind != "hard_motion":
                everything = {"true": len(video.boundaries), "missed": 0, "false": 0}
                assert video.score([boundary.frame for boundary in found]) == everything, (video.path, found)
            if kind == "cuts":
                assert [boundary.frame for boundary in found] == [boundary.start for boundary in video.boundaries]


@pytest.mark.slow
def test_scene_keyframes_are_the_new_shots(labelled):
    video = labelled["cuts"][0]
    result = extract_keyframes(video.path, method="scene", device="cpu")
    cuts = [boundary.start for boundary in video.boundaries]
    assert result.frame_indices.tolist() == [0] + cuts
    assert [read_barcode(frame) for frame in result.frames] == [0] + cuts


@pytest.mark.slow
def test_labelled_videos_are_what_they_say(labelled):
    """Frame numbers are stamped in the frames; fades pass through black; flashes are bright."""
    fades = labelled["fades"][0]
    decoder = vclip.VideoDecoder(fades.path)
    assert decoder.index.num_frames == fades.num_frames
    frames = decoder.get_frames(np.arange(fades.num_frames)).data
    assert [read_barcode(frame) for frame in frames[::17]] == list(range(0, fades.num_frames, 17))
    band = frames.shape[1] // 8 + 1  # below the barcode
    for fade in fades.boundaries:
        darkest = frames[fade.start : fade.end, band:].mean(axis=(1, 2, 3)).min()
        assert darkest < 0.2 * frames[fade.end, band:].mean()
    flashes = labelled["flashes"][0]
    frames = vclip.VideoDecoder(flashes.path).get_frames(np.arange(flashes.num_frames)).data
    for flash in (e for e in flashes.events if e.kind == "flash"):
        assert frames[flash.start, band:].mean() > frames[flash.start - 1, band:].mean() + 40
    with pytest.raises(ValueError, match="kind \\('wipes'\\) must be one of"):
        make_scene_video(Path(fades.path).with_name("x.mp4"), "wipes")


@pytest.mark.slow
# Videos whose false boundaries were far from the new tests' borders (x264's bytes differ between
# runs: seed 206, whose two false dissolves added up to 1.49x against the 1.4x allowed, came back
# as one in a CI run).
@pytest.mark.parametrize("seed", [11, 104, 207, 323, 329])
def test_fast_camera_motion_is_neither_a_cut_nor_a_dissolve(tmp_path, seed):
    """Harder-motion videos where, before the scene method tested for them, a crash zoom or a whip
    pan was taken for a dissolve (the block changes of its frame pairs add up to far more than the
    change across it) or an object crossing the frame again and again for a cut (its passes were
    left out as flashes, and with them the frames that showed the picture coming back): every cut
    is found, and nothing else."""
    video = make_scene_video(tmp_path / f"hard_motion_{seed}.mp4", "hard_motion", seed=seed)
    found = find_shot_boundaries(video.path, device="cpu")
    assert video.score([b.frame for b in found]) == {"true": len(video.boundaries), "missed": 0, "false": 0}, found


@pytest.mark.slow
def test_score_counts_hits_misses_and_false_detections(labelled):
    video = labelled["dissolves"][0]
    first, second = video.boundaries[:2]
    found = [first.start, first.end, second.end + 1, 3]  # two in one span: one is false
    assert video.score(found) == {"true": 1, "missed": len(video.boundaries) - 1, "false": 3}
    cut = labelled["cuts"][0].boundaries[0].start
    assert labelled["cuts"][0].score([cut + 2])["true"] == 1 and labelled["cuts"][0].score([cut + 3])["true"] == 0


@pytest.mark.slow
def test_threads_find_the_same_and_leave_the_warning_filters_alone(labelled, cpu_found, monkeypatch):
    """``vclip keyframes --workers`` runs shot detection on several threads: it must not touch the
    process-wide warning filters (``warnings.catch_warnings`` is not thread-safe) and must find
    what one thread finds."""

    def refused(*args, **kwargs):
        raise AssertionError("shot detection changed the process's warning filters")

    monkeypatch.setattr(warnings, "catch_warnings", refused)
    filters = list(warnings.filters)
    videos = [video for kind in SCENE_VIDEO_CLASSES for video in labelled[kind]]
    with ThreadPoolExecutor(4) as pool:
        found = list(pool.map(lambda video: find_shot_boundaries(video.path, device="cpu"), videos))
    assert warnings.filters == filters
    assert found == [cpu_found[kind][number] for kind in SCENE_VIDEO_CLASSES for number in range(len(SEEDS))]


def test_median_of_numbers_is_numpys_nanmedian():
    """The windowed medians of the usual change: np.nanmedian's values (NaN for all-NaN windows),
    for odd and even counts of numbers."""
    from vclip._scenes.shots import median_of_numbers as _median_of_numbers

    rng = np.random.default_rng(0)
    values = rng.random((6, 50, 12)).astype(np.float32)
    values[rng.random(values.shape) < 0.4] = np.nan
    values[0, :3] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = np.nanmedian(values, axis=-1)
    result = _median_of_numbers(values)
    assert result.dtype == np.float32 and np.isnan(result[0, :3]).all()
    assert np.array_equal(result, expected, equal_nan=True)


def test_thumbnails_are_the_means_of_2x2_pixels():
    """Rounded means of 2x2 pixels, an odd last row and column left out."""
    frames = np.random.default_rng(1).integers(0, 256, (3, 7, 9, 3), dtype=np.uint8)
    small = _features.thumbnails(frames)
    assert small.shape == (3, 3, 4, 3) and small.dtype == np.uint8
    means = frames[:, :6, :8].astype(np.float64).reshape(3, 3, 2, 4, 2, 3).mean(axis=(2, 4))
    assert np.array_equal(small, np.floor(means + 0.5))


def _picture(seed: int, height: int = 18, width: int = 32) -> np.ndarray:
    """Random colours in 6x6-pixel cells: a picture whose blocks can be matched elsewhere."""
    cells = np.random.default_rng(seed).integers(0, 256, (height // 6 + 1, width // 6 + 1, 3), dtype=np.uint8)
    return np.kron(cells, np.ones((6, 6, 1), dtype=np.uint8))[:height, :width]


def test_a_picture_moved_is_a_mosaic_of_itself_and_a_blend_is_not():
    """The dissolve test of _shots._moved_share: the old picture moved 3 pixels rebuilds the new
    one; another picture, or a blend of the old one with another (a dissolve's frame), does not."""
    scene = _picture(2, 40, 64)
    old, moved = scene[5:23, 10:42], scene[8:26, 13:45]
    other = _picture(3)
    blend = ((old.astype(np.uint16) + other) // 2).astype(np.uint8)
    assert _shots._moved_share(old, moved) < 0.05
    assert _shots._moved_share(old, other) > DissolveRules().moved_share
    assert _shots._moved_share(old, blend) > DissolveRules().moved_share
    assert _shots._moved_share(old[:3, :3], moved[:3, :3]) == 1.0  # smaller than one block: no test


@pytest.mark.slow
def test_a_dissolve_to_the_old_picture_moved_is_refused(labelled):
    """A dissolve found stays found with the video's own thumbnails; once the first new frame's
    thumbnail is the last old frame's moved 2 pixels (what a camera move gives), it is refused."""
    video = labelled["dissolves"][0]
    signals = scene_signals_module.scene_signals(vclip.VideoDecoder(video.path, device="cpu"), 64)
    dissolve = next(b for b in _shots.shot_boundaries(signals, 2.0) if b.kind == "dissolve")
    signals.thumbnails[dissolve.frame] = np.roll(signals.thumbnails[dissolve.start - 1], 2, axis=1)
    assert dissolve not in _shots.shot_boundaries(signals, 2.0)


@pytest.mark.slow
def test_the_middle_frames_of_a_dissolve_moved_copies_of_those_before_are_refused(labelled):
    """A dissolve found stays found with the video's own thumbnails; once its middle frames (a
    quarter, half and three quarters of the way) are each the frame before moved 2 pixels, as in a
    crash zoom, it is refused."""
    video = labelled["dissolves"][0]
    signals = scene_signals_module.scene_signals(vclip.VideoDecoder(video.path, device="cpu"), 64)
    dissolve = next(b for b in _shots.shot_boundaries(signals, 2.0) if b.kind == "dissolve")
    start, end = dissolve.start, dissolve.frame
    assert not _shots._middle_frames_moved(signals.thumbnails, start, end)
    for k in _shots._transition_middles(start, end):
        signals.thumbnails[k] = np.roll(signals.thumbnails[k - 1], 2, axis=1)
    assert _shots._middle_frames_moved(signals.thumbnails, start, end)
    assert dissolve not in _shots.shot_boundaries(signals, 2.0)


@pytest.mark.slow
@pytest.mark.parametrize("feature", ["H", "B"])
def test_a_cut_changes_both_features_more_than_the_pairs_beside_it(labelled, feature):
    """Each cut of a labelled video is found on its own features; once one feature (colours or
    blocks) changes at the frame pairs beside the cut as much as at the cut (a whip pan, an object
    crossing the frame), the cut is refused, whatever the other feature says."""
    video = labelled["cuts"][0]
    signals = scene_signals_module.scene_signals(vclip.VideoDecoder(video.path, device="cpu"), 64)
    cuts = [b for b in _shots.shot_boundaries(signals, 2.0) if b.kind == "cut"]
    assert len(cuts) == len(video.boundaries)
    for cut in cuts:
        table = signals.distances[feature]
        saved = table[1, cut.frame - 1:cut.frame + 2].copy()
        table[1, cut.frame - 1] = table[1, cut.frame + 1] = table[1, cut.frame]
        assert cut not in _shots.shot_boundaries(signals, 2.0), cut
        table[1, cut.frame - 1:cut.frame + 2] = saved


def _panning(seed: int, frames: int) -> np.ndarray:
    """A picture of 6x6-pixel cells panning 1 pixel a frame: RGB uint8 [frames, 36, 64, 3]."""
    scene = _picture(seed, 36, 64 + frames)
    return np.stack([scene[:, k:k + 64] for k in range(frames)])


def test_of_two_cuts_closer_than_a_shot_the_stronger_is_kept():
    """Three shots, the middle one 3 frames long: one boundary, not two (a shot lasts at least
    FlashRules.longest_frames + 1 frames); with the middle one 6 frames long, both cuts are found."""
    for middle, expected in ((3, [20]), (6, [20, 26])):
        frames = np.concatenate([_panning(4, 20), _panning(5, middle), _panning(6, 20)])
        features = _features.frame_features(frames)
        signals = _features.SceneSignals(distances=_features.gap_distances(features, None),
                                         luma_mean=features["mean"], dark_share=features["dark"],
                                         thumbnails=_features.thumbnails(frames))
        found = _shots.shot_boundaries(signals, 2.0)
        assert [b.frame for b in found] == expected and {b.kind for b in found} == {"cut"}, found


def test_a_still_video_and_a_very_short_one_have_no_boundary(videos):
    assert find_shot_boundaries(videos["h264"], device="cpu") == []  # one panning shot
    assert find_shot_boundaries(videos["odd"], device="cpu") == []
    assert find_shot_boundaries(videos["h264_10bit"], device="cpu") == []


@pytest.mark.parametrize(
    "options, message",
    [
        ({"scene_threshold": 1.0}, r"scene_threshold \(1.0\) must be a number > 1"),
        ({"analysis_width": 0}, r"analysis_width \(0\) must be an integer >= 1"),
    ],
)
def test_bad_options(videos, options, message):
    with pytest.raises(ValueError, match=message):
        find_shot_boundaries(videos["h264"], **options)


def test_the_nasa_dissolve():
    """nasa_13013.mp4 stream 0 dissolves from the first shot to the second over frames 127-147 (a
    contact sheet shows it plainly; the old shot stays faintly visible until about frame 150), then
    cuts at frame 202. Set VCLIP_SHARED_VIDEOS to the folder of the shared test videos (default
    ../shared/videos) to run this."""
    path = SHARED_VIDEOS / "nasa_13013.mp4"
    if not path.exists():
        pytest.skip(f"{path} not found: set VCLIP_SHARED_VIDEOS to the folder holding nasa_13013.mp4")
    dissolve, cut = find_shot_boundaries(path, stream_index=0, device="cpu")
    assert dissolve.kind == "dissolve" and 127 <= dissolve.start < dissolve.frame <= 150
    assert cut == ShotBoundary(202, 202, "cut")


@pytest.mark.gpu
def test_gpu_finds_the_same_boundaries(labelled, cpu_found):
    """NVDEC decodes and the transform kernel downscales; kernels/shot_features.cu computes the
    features and distances the CPU's NumPy code computes (tests/engine/test_shot_kernel.py), and
    the decision is the same code: the same boundaries, of the same kinds, on every video."""
    for kind, group in labelled.items():
        for video, cpu in zip(group, cpu_found[kind]):
            decoder = vclip.VideoDecoder(video.path, device="cuda")
            assert decoder.device.startswith("cuda")
            assert find_shot_boundaries(video.path, device="cuda") == cpu, video.path
