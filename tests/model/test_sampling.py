import numpy as np
import pytest

import vclip
from vclip.sampling import ClipSampler


def positions(clips):
    return [c.tolist() for c in clips]


def test_contiguous_and_strided_shapes():
    clips = vclip.contiguous(5, starts="step", step=10).sample(32)
    assert positions(clips) == [[0, 1, 2, 3, 4], [10, 11, 12, 13, 14], [20, 21, 22, 23, 24]]
    clips = vclip.strided(4, 3, starts="step", step=7).sample(30)
    assert positions(clips) == [[0, 3, 6, 9], [7, 10, 13, 16], [14, 17, 20, 23]]
    assert vclip.strided(4, 3).span == 10


def test_even_starts():
    assert positions(vclip.contiguous(4, starts="even", clips_per_video=3).sample(24)) == [
        [0, 1, 2, 3],
        [10, 11, 12, 13],
        [20, 21, 22, 23],
    ]
    assert positions(vclip.contiguous(4, starts="even").sample(24)) == [[10, 11, 12, 13]]


def test_random_starts_are_seeded_uniform_and_in_range():
    sampler = vclip.strided(8, 2, clips_per_video=500, seed=7)
    clips = sampler.sample(100)
    starts = np.array([c[0] for c in clips])
    assert starts.min() >= 0 and (starts + 14).max() <= 99
    assert len(set(starts.tolist())) > 50  # spread over the range
    assert positions(sampler.sample(100)) == positions(clips)  # same seed, same clips
    assert positions(sampler.sample(100, seed=8)) != positions(clips)
    assert all(np.array_equal(np.diff(c), np.full(7, 2)) for c in clips)


def test_jittered_offsets_are_bounded_ordered_and_seeded():
    sampler = vclip.jittered(8, 4, 2, clips_per_video=200, seed=3)
    clips = sampler.sample(60)
    for clip in clips:
        assert np.all(np.diff(clip) >= 0)
        assert clip.min() >= 0 and clip.max() <= 59
    offsets = set()
    for seed in range(50):
        clip = vclip.jittered(8, 4, 2, starts="step", step=100, seed=seed).sample(60)[0]
        grid = np.arange(8) * 4
        delta = clip - grid
        assert np.all(np.abs(delta[1:-1]) <= 2)  # interior positions move by at most the jitter
        offsets.update(delta[1:-1].tolist())
    assert offsets == {-2, -1, 0, 1, 2}
    assert positions(sampler.sample(60)) == positions(vclip.jittered(8, 4, 2, clips_per_video=200, seed=3).sample(60))


def test_jitter_stays_in_range_at_the_ends():
    for seed in range(30):
        clip = vclip.jittered(10, 2, 2, starts="step", step=1, seed=seed).sample(19)[0]
        assert clip.min() >= 0 and clip.max() <= 18 and np.all(np.diff(clip) >= 0)


def test_a_jitter_larger_than_the_stride_is_refused():
    """jittered(8, 2, 5) moved positions past their neighbours; sorted, the clip repeated frames."""
    with pytest.raises(vclip.ArgumentError, match=r"jitter \(5\) must be an integer in \[0, 2\] \(at most the "
                                                  r"stride: a larger one moves positions past their neighbours"):
        vclip.jittered(8, 2, 5)
    with pytest.raises(vclip.ArgumentError, match=r"jitter \(2\) must be an integer in \[0, 1\]"):
        vclip.jittered(8, 1, 2, fps=15)
    assert vclip.jittered(8, 2, 2).jitter == 2


@pytest.mark.parametrize(
    "policy, expected",
    [
        ("repeat_last", [[0, 2, 4, 4, 4]]),
        ("wrap", [[0, 2, 4, 1, 3]]),
        ("drop", []),
    ],
)
def test_end_policies_for_short_videos(policy, expected):
    assert positions(vclip.strided(5, 2, end_policy=policy).sample(5)) == expected


def test_end_policy_error_names_the_sizes():
    with pytest.raises(ValueError, match=r"a clip needs 9 frames \(sequence_length=5, stride=2\) but the video has 5"):
        vclip.strided(5, 2, end_policy="error").sample(5)


def test_indexed_keeps_order_and_duplicates():
    clip = vclip.indexed([7, 3, 3, -1, 0]).sample(10)
    assert positions(clip) == [[7, 3, 3, 9, 0]]
    with pytest.raises(IndexError, match=r"frame index 10 is out of range \[0, 9\]"):
        vclip.indexed([1, 10]).sample(10)


def test_keyframe_selection(videos):
    index = vclip.index_video(videos["h264"])  # keyframes 0, 30, 60, 90, 120
    assert positions(vclip.keyframe().sample(index)) == [[0, 30, 60, 90, 120]]
    assert positions(vclip.keyframe(2, selection="first").sample(index)) == [[0, 30]]
    assert positions(vclip.keyframe(3).sample(index)) == [[0, 60, 120]]
    with pytest.raises(ValueError, match="needs the video's VideoIndex"):
        vclip.keyframe().sample(100)


def test_downscaled_combines_with_any_mode():
    base = vclip.strided(4, 2, seed=1)
    small = vclip.downscaled(base, 0.5)
    assert small.scaling_factor == 0.5
    assert positions(small.sample(50)) == positions(base.sample(50))
    assert small.output_size(1920, 1080) == (960, 540)
    assert vclip.downscaled(vclip.keyframe(), 0.25).output_size(129, 97) == (32, 24)
    assert vclip.downscaled(vclip.indexed([1]), 1 / 3).output_size(100, 50) == (33, 17)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: vclip.strided(4, 0), r"stride \(0\) must be an integer >= 1"),
        (lambda: vclip.contiguous(0), r"sequence_length \(0\) must be an integer >= 1"),
        (lambda: vclip.jittered(4, 2, -1), r"jitter \(-1\) must be an integer >= 0"),
        (lambda: vclip.downscaled(vclip.contiguous(4), 0), r"scaling_factor \(0\) must be a number in \(0, 1\]"),
        (lambda: vclip.downscaled(vclip.contiguous(4), 1.5), r"scaling_factor \(1.5\) must be a number in \(0, 1\]"),
        (lambda: vclip.downscaled(vclip.contiguous(4), "half"), r"scaling_factor \('half'\) must be a number in"),
        (lambda: vclip.indexed([]), r"frame_indices \(\[\]\) must be a non-empty sequence of integers"),
        (lambda: vclip.indexed([1, 2.5]), r"frame_indices \(\[1, 2.5\]\) must be a non-empty sequence of integers"),
        (lambda: vclip.indexed(7), r"frame_indices \(7\) must be a non-empty sequence of integers"),
        (lambda: vclip.contiguous(4, clips_per_video=0), r"clips_per_video \(0\) must be an integer >= 1"),
        (
            lambda: vclip.contiguous(4, starts="step"),
            r"step \(None\) must be an integer >= 1 \(frames between clip starts",
        ),
        (lambda: vclip.contiguous(4, starts="often"), r"starts \('often'\) must be one of 'random', 'even', 'step'"),
        (lambda: vclip.contiguous(4, end_policy="loop"), r"end_policy \('loop'\) must be one of"),
        (lambda: vclip.contiguous(4, seed=-1), r"seed \(-1\) must be an integer >= 0"),
        (lambda: vclip.keyframe(0), r"max_frames \(0\) must be an integer >= 1"),
        (lambda: ClipSampler("slowmo"), r"mode \('slowmo'\) must be one of"),
        (lambda: ClipSampler("strided"), r"sequence_length \(None\) must be an integer >= 1"),
        (lambda: vclip.contiguous(4).sample(10, seed=1.5), r"seed \(1.5\) must be an integer >= 0"),
        (lambda: vclip.contiguous(4).sample("clip.mp4"), r"video \('clip.mp4'\) must be a VideoIndex or a frame count"),
    ],
)
def test_impossible_parameters(make, message):
    with pytest.raises(vclip.ArgumentError, match=message):
        make()


@pytest.mark.parametrize("value", [1.5, True, "2"])
def test_non_integer_parameters_are_refused_as_value_and_type_errors(value):
    for error in (TypeError, ValueError, vclip.ArgumentError):
        with pytest.raises(error, match=rf"stride \({value!r}\) must be an integer >= 1"):
            vclip.strided(4, value)


def test_numpy_integers_are_accepted_and_stored_as_ints():
    sampler = vclip.strided(np.int64(4), np.int32(2), clips_per_video=np.uint8(3), seed=np.int64(5))
    assert sampler == vclip.strided(4, 2, clips_per_video=3, seed=5)
    assert all(type(v) is int for v in (sampler.sequence_length, sampler.stride, sampler.clips_per_video, sampler.seed))
    plain = vclip.strided(4, 2, clips_per_video=3, seed=5)
    assert positions(sampler.sample(np.int64(40))) == positions(plain.sample(40))
    assert vclip.indexed(np.array([3, -1])).frame_indices == (3, -1)
    assert vclip.keyframe(np.int16(2)).max_frames == 2


# -- padding by the end policy ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "policy, frames, padded",
    [
        ("repeat_last", [0, 2, 4, 4, 4], [False, False, False, True, True]),
        ("wrap", [0, 2, 4, 1, 3], [False, False, False, True, True]),
    ],
)
def test_padded_positions_are_marked(policy, frames, padded):
    (clip,) = vclip.strided(5, 2, end_policy=policy).sample_with_padding(5)
    assert clip.frame_indices.tolist() == frames and clip.padded.tolist() == padded
    assert clip.padded.dtype == bool and clip.padded.shape == clip.frame_indices.shape


def test_clips_that_fit_are_not_marked_and_drop_leaves_none():
    clips = vclip.strided(4, 3, clips_per_video=20, seed=2).sample_with_padding(50)
    assert len(clips) == 20 and not any(clip.padded.any() for clip in clips)
    assert vclip.strided(5, 2, end_policy="drop").sample_with_padding(5) == []
    (clip,) = vclip.indexed([4, 4, 0]).sample_with_padding(5)
    assert clip.padded.tolist() == [False, False, False]


@pytest.mark.parametrize(
    "sampler",
    [
        vclip.strided(6, 3, clips_per_video=5, seed=11),
        vclip.jittered(6, 3, 2, clips_per_video=5, seed=11, end_policy="wrap"),
        vclip.contiguous(8, starts="even", clips_per_video=3, end_policy="repeat_last"),
    ],
)
@pytest.mark.parametrize("num_frames", [4, 12, 100])
def test_sample_with_padding_draws_exactly_the_clips_of_sample(sampler, num_frames):
    """The loader keeps calling sample(); the flags must not change a single draw."""
    marked = sampler.sample_with_padding(num_frames, seed=3)
    assert positions(sampler.sample(num_frames, seed=3)) == [clip.frame_indices.tolist() for clip in marked]
    generator_a, generator_b = np.random.default_rng(9), np.random.default_rng(9)
    assert positions(sampler.sample(num_frames, seed=generator_a)) == positions(
        [clip.frame_indices for clip in sampler.sample_with_padding(num_frames, seed=generator_b)]
    )
    assert generator_a.random() == generator_b.random()  # the same random numbers were used up
