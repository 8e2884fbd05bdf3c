"""What a training run relies on, on the CPU: kept batches keep their pixels, epochs follow each other
without a stall and with the batches a fresh pass would give, repeated augmentation, a torch
DataLoader with workers and the loader's defaults, and what stats() says it chose."""

from __future__ import annotations

import pytest
from helpers import barcodes, require_extra

import vclip
from vclip.synthetic import make_video

torch = require_extra("torch")
DataLoader = require_extra("torch.utils.data").DataLoader


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> list[tuple[str, int]]:
    folder = tmp_path_factory.mktemp("training_run")
    return [(make_video(folder / f"video_{i}.mp4", num_frames=40, width=128, height=96, keyframe_interval=16, seed=i),
             i % 3) for i in range(6)]


def loader_of(videos, **options) -> vclip.ClipLoader:
    options = {"device": "cpu", "batch_size": 2, "num_threads": 2, "seed": 1} | options
    return vclip.ClipLoader(videos, vclip.strided(4, 2, clips_per_video=2), **options)


def assert_true_frames(batch) -> None:
    for clip, frames in zip(batch.data.numpy(), batch.frame_indices.tolist()):
        assert barcodes(clip) == frames


def test_kept_batches_keep_their_pixels(videos):
    """``list(loader)`` and a batch kept for logging hold the frames they name, as with a torch
    DataLoader: the loader gives a kept batch's buffer up and allocates another."""
    loader = loader_of(videos, prefetch_queue_depth=1)
    batches = list(loader)
    assert len(batches) == 6
    for batch in batches:
        assert_true_frames(batch)
    assert loader.stats().kept_batches >= 1
    kept = None
    for number, batch in enumerate(loader):  # one batch kept while the loop goes on
        if number == 1:
            kept = batch
    assert kept is not None and kept.batch_number == 1
    assert_true_frames(kept)


def test_batches_not_kept_reuse_the_pool(videos):
    loader = loader_of(videos, prefetch_queue_depth=1)
    pointers = set()
    for epoch in range(3):
        loader.set_epoch(epoch)
        for batch in loader:
            pointers.add(batch.data.data_ptr())
            assert_true_frames(batch)
    assert len(pointers) == 1 + 3 and loader.stats().kept_batches == 0


def test_the_next_epoch_built_ahead_gives_the_batches_of_a_fresh_pass(videos):
    """From the second pass on, the first batches of the next epoch are built while this one drains;
    they are the batches a fresh loader gives for that epoch, and a pass over another epoch than the
    one expected drops them."""
    loader = loader_of(videos, shuffle=True, clips_per_video=1, batch_size=2)  # epochs of 3 batches
    for epoch in (0, 1, 2, 3, 7):
        loader.set_epoch(epoch)
        got = [(b.video_ids.tolist(), b.frame_indices.tolist(), b.data.clone()) for b in loader]
        fresh = loader_of(videos, shuffle=True, clips_per_video=1, batch_size=2)
        fresh.set_epoch(epoch)
        expected = [(b.video_ids.tolist(), b.frame_indices.tolist(), b.data.clone()) for b in fresh]
        fresh.close()
        assert [g[:2] for g in got] == [e[:2] for e in expected]
        assert all(torch.equal(g[2], e[2]) for g, e in zip(got, expected))
    assert loader._runtime.passes == 5
    loader.close()


def _epoch_batches(loader, epoch: int) -> list[tuple]:
    loader.set_epoch(epoch)
    return [(b.video_ids.tolist(), b.frame_indices.tolist(), b.data.clone()) for b in loader]


def _assert_same_batches(got: list[tuple], expected: list[tuple]) -> None:
    assert [g[:2] for g in got] == [e[:2] for e in expected]
    assert all(torch.equal(g[2], e[2]) for g, e in zip(got, expected))


def test_epochs_shorter_than_the_depth_are_built_several_ahead(videos):
    """Epochs of one batch with 4 batches queued: while the loop holds an epoch's batch, the next
    five epochs are being built (the batches in flight stay at the depth + 1), and each is the
    epoch a fresh loader gives."""
    loader = loader_of(videos, shuffle=True, clips_per_video=1, batch_size=6, prefetch_queue_depth=4)
    fresh = loader_of(videos, shuffle=True, clips_per_video=1, batch_size=6, prefetch_queue_depth=4)
    ahead = {}
    for epoch in range(8):
        loader.set_epoch(epoch)
        got = []
        for batch in loader:
            runtime = loader._runtime
            ahead[epoch] = [run.epoch for run in runtime.ahead]
            assert sum(len(run.pending) for run in (runtime.active, *runtime.ahead)) <= 5
            got.append((batch.video_ids.tolist(), batch.frame_indices.tolist(), batch.data.clone()))
        _assert_same_batches(got, _epoch_batches(fresh, epoch))
    assert ahead[0] == []  # a loader read once builds nothing ahead
    assert ahead[3] == [4, 5, 6, 7, 8]
    fresh.close()
    loader.close()


def test_a_loop_over_one_epoch_again_gets_it_built_ahead(videos):
    loader = loader_of(videos, shuffle=True, clips_per_video=1, batch_size=2)  # epochs of 3 batches
    expected = _epoch_batches(loader, 0)
    for _ in range(3):
        _assert_same_batches(_epoch_batches(loader, 0), expected)
        assert [run.epoch for run in loader._runtime.ahead] == [0]
    loader.close()


def test_batches_built_ahead_leave_out_a_video_found_bad_meanwhile(videos):
    """A video found bad in epoch 1 after epoch 2's batches were built ahead: those of its batches
    are built again, and epoch 2 is what a loader resumed with that video known bad gives."""
    loader = loader_of(videos, shuffle=True, clips_per_video=1, batch_size=2)
    for epoch in (0, 1):
        _epoch_batches(loader, epoch)
    assert loader._runtime.ahead[0].epoch == 2 and loader._runtime.ahead[0].submitted == 3
    bad = loader._plan.batches(2, 0, 1)[1][0].video
    loader._bad.add(bad, "unreadable", 1)  # as a failed decode of epoch 1 records it
    state = loader.state_dict()
    got = _epoch_batches(loader, 2)
    assert bad not in {video for ids, _, _ in got for video in ids}
    resumed = loader_of(videos, shuffle=True, clips_per_video=1, batch_size=2)
    resumed.load_state_dict(state)
    _assert_same_batches(got, _epoch_batches(resumed, 2))
    resumed.close()
    loader.close()


def test_repeated_augmentation_gives_k_samples_of_each_decoded_clip(videos):
    spec = vclip.TransformSpec(resize=64, crop=48, crop_mode="random", flip_probability=0.5)
    loader = loader_of(videos, transform=spec, repeated_augmentation=2, batch_size=3)
    batches = list(loader)
    assert len(batches) == 4 and batches[0].data.shape[:2] == (6, 4)
    boxes = []
    for batch in batches:
        ids = batch.video_ids.tolist()
        assert ids[0::2] == ids[1::2] and batch.clip_ids.tolist()[0::2] == batch.clip_ids.tolist()[1::2]
        assert torch.equal(batch.frame_indices[0::2], batch.frame_indices[1::2])
        assert batch.view_ids.tolist() == [0] * 6
        boxes += [batch.augmentations.crop_boxes[i].tolist() for i in range(6)]
    assert any(boxes[i] != boxes[i + 1] for i in range(0, len(boxes), 2))  # independent draws
    # the same draws again, and with k=1 the first sample of each pair is not what k=2 gave (its own stream)
    again = list(loader_of(videos, transform=spec, repeated_augmentation=2, batch_size=3))
    assert all(torch.equal(a.data, b.data) for a, b in zip(batches, again))
    assert loader.stats().frames.delivered == 24 * 4  # each clip decoded once for its two samples


def test_repeated_augmentation_is_checked(videos):
    with pytest.raises(vclip.ArgumentError, match=r"repeated_augmentation \(0\) must be an integer >= 1"):
        loader_of(videos, repeated_augmentation=0)
    with pytest.raises(vclip.ArgumentError, match=r"repeated_augmentation \(2\) .*evaluation"):
        vclip.ClipLoader(videos, vclip.strided(4, 2, starts="even"), device="cpu", evaluation=True,
                         repeated_augmentation=2)


def test_a_dataloader_with_workers_runs_the_defaults(videos):
    """The training guide's DataLoader path with workers and every default: a worker may start no
    process, so its decode processes resolve to none there."""
    loader = vclip.ClipLoader(videos, vclip.strided(4, 2, clips_per_video=2), device="cpu", batch_size=2)
    assert loader.decode_processes >= 1  # in this process: crash-isolated decoders
    batches = list(DataLoader(loader, batch_size=None, num_workers=2, timeout=120))
    assert len(batches) == 6
    for batch in batches:
        assert_true_frames(batch)
    assert sorted(v for b in batches for v in b.video_ids.tolist()) == [v for v in range(6) for _ in range(2)]


def test_stats_say_what_the_loader_chose_and_works_with(videos):
    loader = loader_of(videos)
    list(loader)
    stats = loader.stats()
    assert stats.working == {"decode_threads": 2, "decode_processes": 0, "cpu_decoders": 0, "prefetch_queue_depth": 2}
    assert set(stats.chosen) == {"decode_processes", "cpu_decoders", "prefetch_queue_depth"}
    assert stats.pacing == []  # on the CPU every count is fixed
    assert "since the start" in repr(stats)


def test_a_loop_that_stops_mid_epoch_leaves_no_error_at_exit(videos, tmp_path):
    """The checkpoint-then-break loop: an iterator abandoned mid-epoch and the interpreter leaving
    print no 'Exception ignored' traceback."""
    import subprocess
    import sys

    from helpers import ROOT

    script = tmp_path / "stop.py"
    script.write_text(
        "import vclip\n"
        f"loader = vclip.ClipLoader({videos!r}, vclip.strided(4, 2, clips_per_video=2), device='cpu', batch_size=2)\n"
        "batches = iter(loader)  # held, as a DataLoader's iterator holds it\n"
        "batch = next(batches)\n"
        "state = loader.state_dict()  # a checkpoint, then the script ends\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_local_videos_are_indexed_by_a_few_threads(videos, monkeypatch):
    """Indexing is Python work under one interpreter lock: a dataset of local files is indexed by
    at most LOCAL_INDEX_THREADS threads, however many decode workers the loader has."""
    import threading
    import time

    from vclip._loader import source

    names = set()
    inspect = source._inspect

    def recorded(*arguments):
        names.add(threading.current_thread().name)
        time.sleep(0.05)  # long enough that every thread of the pool takes a video
        return inspect(*arguments)

    monkeypatch.setattr(source, "_inspect", recorded)
    loader = loader_of(videos * 3, num_threads=8)
    assert loader.decode_workers == 8 and len(names) == source.LOCAL_INDEX_THREADS == 3


def test_a_video_at_a_url_is_told_from_a_local_one_shard_slices_included():
    from vclip._loader.source import remote_url

    assert remote_url("https://example.com/videos/a.mp4") and remote_url("s3://bucket/shard-0.tar#a.mp4@1536+9000")
    assert not remote_url("/data/a.mp4") and not remote_url("/data/shard-0.tar#a.mp4@1536+9000")
