"""ClipLoader on the CPU: inputs, exact frames, seeding, sharding, buffer reuse, bad videos,
memory budget and stats. (The 2-process sharding run is in test_distributed.py.)"""

import codecs
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from helpers import barcodes, require_extra, worker_pids

import vclip
from vclip._loader.epoch import epoch_clip_refs
from vclip.synthetic import make_video

torch = require_extra("torch")
DataLoader = require_extra("torch.utils.data").DataLoader

NUM_VIDEOS, NUM_FRAMES, WIDTH, HEIGHT = 6, 40, 128, 96
MEAN = np.array(vclip.IMAGENET_MEAN, np.float32)
STD = np.array(vclip.IMAGENET_STD, np.float32)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("loader")


@pytest.fixture(scope="module")
def dataset(folder) -> list[tuple[str, int]]:
    """Six 128x96 videos of 40 frames (keyframe every 16, 2 B-frames), labels 0, 1, 2, 0, 1, 2."""
    return [
        (
            make_video(
                folder / f"video_{i}.mp4",
                num_frames=NUM_FRAMES,
                width=WIDTH,
                height=HEIGHT,
                keyframe_interval=16,
                seed=i,
            ),
            i % 3,
        )
        for i in range(NUM_VIDEOS)
    ]


@pytest.fixture(scope="module")
def bad_files(folder, dataset) -> dict[str, str]:
    """Files that cannot be used, by kind; "garbled" indexes fine and fails only when decoded."""
    good = open(dataset[0][0], "rb").read()
    paths = {kind: str(folder / f"bad_{kind}.mp4") for kind in ("empty", "garbage", "truncated")}
    open(paths["empty"], "wb").close()
    open(paths["garbage"], "wb").write(np.random.default_rng(0).integers(0, 256, 20_000, np.uint8).tobytes())
    open(paths["truncated"], "wb").write(good[: len(good) // 2])
    garbled = make_video(
        folder / "bad_garbled.mkv", num_frames=NUM_FRAMES, width=WIDTH, height=HEIGHT, keyframe_interval=16, seed=9
    )
    index = vclip.index_video(garbled)
    data = bytearray(open(garbled, "rb").read())
    rng = np.random.default_rng(1)
    for packet in range(1, index.num_packets):  # keep the first keyframe, garble every other picture
        start, size = int(index.packet_pos[packet]), int(index.packet_size[packet])
        data[start + 4 : start + size] = rng.integers(0, 256, size - 4, np.uint8).tobytes()
    open(garbled, "wb").write(data)
    vclip.clear_index_cache()
    paths["garbled"] = garbled
    paths["missing"] = str(folder / "bad_missing.mp4")
    return paths


def make_loader(videos, sampler=None, **options) -> vclip.ClipLoader:
    options = {"device": "cpu", "batch_size": 4, "num_threads": 2} | options
    return vclip.ClipLoader(videos, sampler or vclip.strided(4, 2, clips_per_video=2), **options)


def epoch_of(loader) -> list[dict]:
    """Every batch of one pass, copied out of the pooled buffers."""
    return [
        {
            "data": b.data.clone(),
            "labels": b.labels.tolist(),
            "video_ids": b.video_ids.tolist(),
            "frame_indices": b.frame_indices.tolist(),
            "skipped": b.skipped_videos,
            "batch_number": b.batch_number,
        }
        for b in loader
    ]


# -- inputs -----------------------------------------------------------------------------------------
def test_inputs_pairs_file_lists_and_class_folders(folder, dataset):
    by_pairs = make_loader(dataset)
    assert [(v.path, v.label) for v in by_pairs.videos] == dataset
    assert by_pairs.class_names is None

    lines = ["# path label", ""] + [f"{p.split('/')[-1]} {label}" for p, label in dataset]
    (folder / "list.txt").write_text("\n".join(lines) + "\n")
    by_text = make_loader(str(folder / "list.txt"))
    assert [(v.path, v.label) for v in by_text.videos] == dataset  # relative to the list's folder

    (folder / "list.csv").write_text("path,label\n" + "".join(f"{p},{label}\n" for p, label in dataset))
    assert [(v.path, v.label) for v in make_loader(str(folder / "list.csv")).videos] == dataset

    root = folder / "classes"
    for path, label in dataset:
        (root / ["swim", "jump", "run"][label]).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, root / ["swim", "jump", "run"][label])
    (root / "run" / "notes.txt").write_text("not a video")
    by_folder = make_loader(str(root))
    assert by_folder.class_names == ("jump", "run", "swim")
    expected = {p.split("/")[-1]: {0: 2, 1: 0, 2: 1}[label] for p, label in dataset}
    assert {v.path.split("/")[-1]: v.label for v in by_folder.videos} == expected
    batch = next(iter(by_folder))
    names = [by_folder.class_names[label] for label in batch.labels.tolist()]
    assert names == [by_folder.videos[v].path.split("/")[-2] for v in batch.video_ids.tolist()]


def test_class_name_labels_are_numbered_in_sorted_order(folder, dataset):
    """Kinetics-style lists name the class: names are numbered in sorted order as torchvision's
    ImageFolder numbers its folders, ``loader.classes`` and ``class_to_idx`` say which is which, and
    the batches' labels follow; a name that looks like a file (a path with spaces, no label) is
    refused."""
    names = ["playing guitar", "abseiling", "zumba"]  # sorted: abseiling, playing guitar, zumba
    (folder / "named.csv").write_text("path,label\n" + "".join(f"{p},{names[label]}\n" for p, label in dataset))
    words = [name.replace(" ", "_") for name in names]  # a whitespace-separated list: the label is the last word
    (folder / "named.txt").write_text("".join(f"{p.split('/')[-1]} {words[label]}\n" for p, label in dataset))
    for listing, written in (("named.csv", names), ("named.txt", words)):
        loader = make_loader(str(folder / listing), vclip.indexed([0]), batch_size=6)
        assert loader.classes == loader.class_names == tuple(sorted(written))
        assert loader.class_to_idx == {name: number for number, name in enumerate(sorted(written))}
        expected = [loader.class_to_idx[written[label]] for _, label in dataset]
        assert [v.label for v in loader.videos] == expected
        batch = next(iter(loader))
        assert batch.labels.tolist() == [expected[v] for v in batch.video_ids.tolist()]
    pairs = make_loader([(p, ["playing guitar", "abseiling", "zumba"][label]) for p, label in dataset],
                        vclip.indexed([0]))
    assert pairs.classes == ("abseiling", "playing guitar", "zumba") and pairs.videos[1].label == 0
    assert make_loader(dataset).classes is None  # integer labels stay the user's own
    (folder / "spaces.txt").write_text(f"{dataset[0][0]} abseiling\nmy holiday.mp4\n")
    with pytest.raises(vclip.ArgumentError, match=r"spaces.txt, line 2: label \('holiday.mp4'\) is a video's file "
                                                  r"name, not a class name"):
        make_loader(str(folder / "spaces.txt"))


def test_a_samplers_own_seed_is_the_loaders_seed_or_refused(dataset):
    """The sampler's ``seed`` was silently ignored: it now seeds the loader when the loader is given
    none, and two different seeds are refused."""
    def frames(loader):
        return [batch.frame_indices.tolist() for batch in loader]

    honoured = make_loader(dataset, vclip.strided(4, 2, seed=5), shuffle=True)
    assert honoured.seed == 5
    assert frames(honoured) == frames(make_loader(dataset, vclip.strided(4, 2), seed=5, shuffle=True))
    assert frames(honoured) != frames(make_loader(dataset, vclip.strided(4, 2), shuffle=True))  # seed 0
    assert make_loader(dataset, vclip.strided(4, 2, seed=5), seed=5).seed == 5
    with pytest.raises(vclip.ArgumentError, match=r"seed \(3\) must be the sampler's own seed \(5\) or None"):
        make_loader(dataset, vclip.strided(4, 2, seed=5), seed=3)


@pytest.mark.parametrize(
    "videos, message",
    [
        ([("a.mp4", "")], r"videos\[0\]: the label is empty"),
        ([("a.mp4", "cat"), ("b.mp4", 1)], r"labels mix integers \(videos\[1\]: 1\) and class names \(videos\[0\]"),
        (["a.mp4"], r"must be a \(path, label\) pair"),
        ("/no/such/list.txt", "neither a folder nor a file list"),
        ([], "holds no videos"),
    ],
)
def test_inputs_are_checked(videos, message):
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        make_loader(videos)


def test_labels_beyond_int64_are_refused_naming_the_line(folder, dataset):
    """They passed construction and ended the epoch with an OverflowError (labels are int64)."""
    listing = folder / "huge_label.txt"
    listing.write_text(f"{dataset[0][0]} 1\n{dataset[1][0]} 9223372036854775808\n")
    with pytest.raises(vclip.ArgumentError, match=r"huge_label.txt, line 2: label \('9223372036854775808'\) must be "
                                                  r"an integer in \[-9223372036854775808, 9223372036854775807\] "
                                                  r"\(int64\)"):
        make_loader(str(listing))
    with pytest.raises(vclip.ArgumentError, match=r"videos\[0\]: label \(-9223372036854775809\) must be an integer in"):
        make_loader([(dataset[0][0], -(2**63) - 1)])
    with pytest.raises(vclip.ArgumentError, match=r"label \(18446744073709551616\) must be an integer in"):
        vclip.LabeledVideo(dataset[0][0], 2**64)
    assert make_loader([(dataset[0][0], 2**63 - 1)]).videos[0].label == 2**63 - 1


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_list_files_in_utf16_utf32_or_with_a_bom_are_read(folder, dataset, encoding):
    """A byte order mark hid the header (utf-8-sig); UTF-16 gave a bare UnicodeDecodeError."""
    listing = folder / f"list_{encoding}.csv"
    listing.write_bytes(("label,path\n" + "".join(f"{label},{path}\n" for path, label in dataset)).encode(encoding))
    assert [(v.path, v.label) for v in make_loader(str(listing)).videos] == dataset


def test_a_latin1_list_file_names_its_files_byte_for_byte(folder, dataset):
    """Bytes that are not UTF-8 stay the bytes of the file names (as the file system has them)."""
    name = b"caf\xe9 \xe0 la cr\xe8me.mp4"  # Latin-1
    shutil.copy(dataset[0][0], os.path.join(os.fsencode(folder), name))
    listing = folder / "latin1.txt"
    listing.write_bytes(name + b" 3\n")
    loader = make_loader(str(listing), batch_size=2)
    assert [(os.fsencode(v.path), v.label) for v in loader.videos] == [(os.fsencode(folder) + b"/" + name, 3)]
    batch = next(iter(loader))
    assert batch.labels.tolist() == [3, 3] and not batch.skipped_videos


def test_a_list_file_that_is_not_text_is_refused(folder):
    listing = folder / "binary.txt"
    listing.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4)
    with pytest.raises(vclip.ArgumentError, match=r"binary.txt: holds zero bytes but is not UTF-16"):
        make_loader(str(listing))
    listing.write_bytes(codecs.BOM_UTF16_LE + b"\x00\xd8a\x00")  # a lone surrogate
    with pytest.raises(vclip.ArgumentError, match=r"binary.txt: not valid UTF-16 text"):
        make_loader(str(listing))


def test_a_flat_folder_of_videos_is_unlabelled(folder, dataset):
    """As ``vclip index`` reads it: label -1, no class names."""
    flat = folder / "flat"
    flat.mkdir()
    for path, _ in dataset[:2]:
        shutil.copy(path, flat)
    loader = make_loader(str(flat), batch_size=2)
    assert [(v.path, v.label) for v in loader.videos] == [(str(flat / os.path.basename(p)), -1) for p, _ in dataset[:2]]
    assert loader.class_names is None and next(iter(loader)).labels.tolist() == [-1, -1]
    (folder / "nothing").mkdir()
    with pytest.raises(vclip.ArgumentError, match=r"is a folder without class subfolders or videos"):
        make_loader(str(folder / "nothing"))


@pytest.mark.parametrize(
    "options, error, message",
    [
        (dict(batch_size=0), ValueError, r"batch_size \(0\) must be an integer >= 1"),
        (dict(batch_size=2.0), TypeError, r"batch_size \(2.0\) must be an integer >= 1"),
        (dict(mixed_sizes="crop"), ValueError, r"mixed_sizes \('crop'\) must be one of 'error', 'skip'"),
        (dict(on_error="ignore"), ValueError, r"on_error \('ignore'\) must be one of 'skip', 'raise'"),
        (dict(even_shards="spread"), ValueError, r"even_shards \('spread'\) must be one of 'pad', 'drop'"),
        (dict(device="tpu"), ValueError, r"device \('tpu'\) must be"),
        (dict(shard_id=1), ValueError, r"shard_id \(1\) and num_shards \(None\) must be given together"),
        (dict(shard_id=2, num_shards=2), ValueError, r"shard_id \(2\) must be < num_shards \(2\)"),
        (dict(num_shards=7, shard_id=0), ValueError, r"num_shards \(7\) must be <= the number of videos \(6\)"),
        (dict(prefetch_queue_depth=0), ValueError, r"prefetch_queue_depth \(0\) must be \"auto\" or an integer >= 1"),
        (dict(seed=-1), ValueError, r"seed \(-1\) must be an integer >= 0"),
        (dict(memory_budget="lots"), ValueError, r"memory size \('lots'\)"),
        (dict(sampler=vclip.keyframe()), ValueError, "keyframe sampling without max_frames"),
        (
            dict(sampler=vclip.strided(4, 2, starts="step", step=8), clips_per_video=2),
            ValueError,
            r"clips_per_video \(2\) cannot be combined with starts='step'",
        ),
        (dict(sampler="strided"), TypeError, r"sampler \('strided'\) must be a ClipSampler"),
    ],
)
def test_options_are_checked(dataset, options, error, message):
    sampler = options.pop("sampler", None)
    with pytest.raises(error, match=message):
        make_loader(dataset, sampler, **options) if sampler != "strided" else vclip.ClipLoader(dataset, sampler)


def test_import_vclip_without_torch():
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import vclip\n"
        "assert 'ClipLoader' in vclip.__all__ and 'plan_loader_memory' in vclip.__all__\n"
        "try:\n    vclip.ClipLoader\nexcept ImportError:\n    print('loader needs torch')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "loader needs torch"


# -- exact frames -----------------------------------------------------------------------------------
MODES = {
    "contiguous": vclip.contiguous(5, clips_per_video=2),
    "strided": vclip.strided(4, 3, starts="even", clips_per_video=3),
    "jittered": vclip.jittered(5, 3, 1, clips_per_video=2),
    "keyframe": vclip.keyframe(max_frames=2),
    "indexed": vclip.indexed([39, 3, 3, 0, -2]),
    "downscaled": vclip.downscaled(vclip.strided(4, 2), 0.75),
}


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_delivers_exactly_the_sampled_frames(dataset, mode):
    sampler = MODES[mode]
    loader = make_loader(dataset, sampler, shuffle=True, seed=3)
    index = vclip.index_video(dataset[0][0])
    width, height = sampler.output_size(WIDTH, HEIGHT)
    length = loader.frames_per_clip
    seen = []
    for batch in loader:
        assert batch.data.shape[1:] == (length, height, width, 3) and batch.data.dtype == torch.uint8
        assert batch.labels.tolist() == [dataset[v][1] for v in batch.video_ids.tolist()]
        assert torch.allclose(batch.pts_seconds, torch.from_numpy(index.pts_seconds)[batch.frame_indices])
        for clip, frames in zip(batch.data.numpy(), batch.frame_indices.tolist()):
            assert barcodes(clip) == frames
            seen.append(frames)
    per_video = {"keyframe": 1, "indexed": 1, "downscaled": 1}.get(mode, sampler.clips_per_video)
    assert len(seen) == NUM_VIDEOS * per_video
    if mode == "indexed":
        assert all(frames == [39, 3, 3, 0, 38] for frames in seen)
    elif mode == "keyframe":
        assert all(frames == index.keyframe_indices[[0, -1]].tolist() for frames in seen)
    elif mode == "strided":
        assert sorted({frames[0] for frames in seen}) == [0, 15, 30] and all(np.diff(seen).ravel() == 3)
    elif mode == "jittered":
        assert all(np.all(np.diff(frames) >= 0) and 0 <= frames[0] and frames[-1] < NUM_FRAMES for frames in seen)
    else:
        assert all(np.all(np.diff(frames) == sampler.stride) for frames in seen)


def test_transform_resize_flip_normalize_layout(dataset):
    spec = vclip.TransformSpec.imagenet(112, resize_mode="squash", layout="TCHW", flip_probability=1.0)
    loader = make_loader(dataset, transform=spec)
    assert loader.clip_shape == (4, 3, 112, 112)
    for batch in loader:
        assert batch.data.shape == (len(batch), 4, 3, 112, 112) and batch.data.dtype == torch.float32
        for clip, frames in zip(batch.data.numpy(), batch.frame_indices.tolist()):
            rgb = clip.transpose(0, 2, 3, 1) * STD + MEAN
            assert barcodes(np.clip(rgb, 0, 1), flipped=True) == frames


def test_random_crops_and_flips_are_drawn_per_clip(dataset):
    spec = vclip.TransformSpec(resize=(96, 128), crop=(64, 64), crop_mode="random", flip_probability=0.5)
    loader = make_loader(dataset, vclip.indexed([0, 1]), transform=spec, clips_per_video=4, batch_size=24)
    (batch,) = list(loader)
    clips = batch.data.reshape(NUM_VIDEOS, 4, -1)
    # Same frames of one video, four different random crops/flips; the whole batch differs clip to clip.
    assert all(len({bytes(c.numpy()) for c in video_clips}) == 4 for video_clips in clips)


# -- seeding ----------------------------------------------------------------------------------------
def test_same_seed_and_epoch_give_the_same_batches(dataset):
    spec = vclip.TransformSpec(resize=(96, 128), crop=80, crop_mode="random", flip_probability=0.5)
    sampler = vclip.jittered(4, 3, 1, clips_per_video=2)
    first = make_loader(dataset, sampler, transform=spec, shuffle=True, seed=7, num_threads=1, prefetch_queue_depth=1)
    second = make_loader(dataset, sampler, transform=spec, shuffle=True, seed=7, num_threads=2, prefetch_queue_depth=3)
    first.set_epoch(2)
    second.set_epoch(2)
    a, b = epoch_of(first), epoch_of(second)
    assert [x["frame_indices"] for x in a] == [x["frame_indices"] for x in b]
    assert [x["video_ids"] for x in a] == [x["video_ids"] for x in b]
    assert all(torch.equal(x["data"], y["data"]) for x, y in zip(a, b))
    assert [x["frame_indices"] for x in epoch_of(first)] == [x["frame_indices"] for x in a]  # repeatable

    first.set_epoch(3)
    assert [x["frame_indices"] for x in epoch_of(first)] != [x["frame_indices"] for x in a]
    other_seed = make_loader(dataset, sampler, transform=spec, shuffle=True, seed=8)
    other_seed.set_epoch(2)
    assert [x["frame_indices"] for x in epoch_of(other_seed)] != [x["frame_indices"] for x in a]


def test_shuffle_and_set_epoch(dataset):
    ordered = make_loader(dataset, vclip.strided(4, 2, clips_per_video=2), shuffle=False)
    assert sum((x["video_ids"] for x in epoch_of(ordered)), []) == [v for v in range(NUM_VIDEOS) for _ in range(2)]

    shuffled = make_loader(dataset, vclip.strided(4, 2, starts="even", clips_per_video=2), shuffle=True)
    orders = []
    for epoch in range(3):
        shuffled.set_epoch(epoch)
        batches = epoch_of(shuffled)
        pairs = sorted((v, f[0]) for x in batches for v, f in zip(x["video_ids"], x["frame_indices"]))
        assert pairs == sorted((v, s) for v in range(NUM_VIDEOS) for s in (0, 33))  # every clip once per epoch
        orders.append(sum((x["video_ids"] for x in batches), []))
    assert len({tuple(order) for order in orders}) == 3
    assert shuffled.epoch == 2
    with pytest.raises(ValueError, match=r"epoch \(-1\) must be an integer >= 0"):
        shuffled.set_epoch(-1)


def test_drop_last(dataset):
    sampler = vclip.strided(4, 2)  # one clip per video: 6 clips
    keep = make_loader(dataset, sampler, batch_size=4)
    drop = make_loader(dataset, sampler, batch_size=4, drop_last=True)
    assert [len(b) for b in keep] == [4, 2] and len(keep) == 2
    assert [len(b) for b in drop] == [4] and len(drop) == 1


def test_starts_step_gives_every_clip_that_fits(dataset):
    sampler = vclip.strided(4, 2, starts="step", step=10)
    loader = make_loader(dataset, sampler, batch_size=5)
    starts = sorted((v, f[0]) for x in epoch_of(loader) for v, f in zip(x["video_ids"], x["frame_indices"]))
    assert starts == [(v, s) for v in range(NUM_VIDEOS) for s in (0, 10, 20, 30)]


# -- torch integration and buffers ------------------------------------------------------------------
def test_inside_a_torch_dataloader(dataset):
    loader = make_loader(dataset, shuffle=True, seed=1)
    direct = epoch_of(loader)
    wrapped = [b for b in DataLoader(loader, batch_size=None)]
    assert all(isinstance(b, vclip.ClipBatch) for b in wrapped)
    assert [b.video_ids.tolist() for b in wrapped] == [x["video_ids"] for x in direct]
    assert [b.frame_indices.tolist() for b in wrapped] == [x["frame_indices"] for x in direct]


def test_dataloader_workers_split_the_shard(dataset):
    loader = make_loader(dataset, vclip.strided(4, 2, clips_per_video=2), batch_size=2)
    assert len(list(loader)) == 6  # threads running here first: forked workers must start their own
    batches = list(DataLoader(loader, batch_size=None, num_workers=2, timeout=60))
    clips = sorted((v, c) for b in batches for v, c in zip(b.video_ids.tolist(), b.frame_indices[:, 0].tolist()))
    assert len(batches) == 6 and len(clips) == 12
    assert sorted(v for v, _ in clips) == [v for v in range(NUM_VIDEOS) for _ in range(2)]
    for batch in batches:
        for clip, frames in zip(batch.data.numpy(), batch.frame_indices.tolist()):
            assert barcodes(clip) == frames


def test_buffers_are_pooled_and_the_held_batch_stays_intact(dataset):
    depth = 2
    loader = make_loader(dataset, vclip.contiguous(3, clips_per_video=3), batch_size=2, prefetch_queue_depth=depth)
    pointers, drawn = set(), 0
    for epoch in range(2):
        loader.set_epoch(epoch)
        for batch in loader:
            pointers.add(batch.data.data_ptr())
            copy = batch.data.clone()
            time.sleep(0.03)  # the builders fill every buffer they may meanwhile
            assert torch.equal(batch.data, copy)
            for clip, frames in zip(batch.data.numpy(), batch.frame_indices.tolist()):
                assert barcodes(clip) == frames
            drawn += 1
    assert drawn == 18
    assert len(pointers) == depth + 3  # queued, being built, held, held last
    assert loader.stats().kept_batches == 0
    assert loader.stats().memory.peak_bytes == loader.memory_estimate.output_buffers


@pytest.mark.parametrize("num_threads", [1, 2])
def test_only_the_decode_workers_decode(dataset, monkeypatch, num_threads):
    """However many batches are built at once, at most num_threads threads decode (one decoder each on the GPU)."""
    from vclip._engine import CpuBackend

    threads, decode_video = set(), CpuBackend.decode_video
    monkeypatch.setattr(CpuBackend, "decode_video",
                        lambda *a: threads.add(threading.current_thread()) or decode_video(*a))
    loader = make_loader(dataset, batch_size=1, num_threads=num_threads, prefetch_queue_depth=3)
    assert len(list(loader)) == 12
    assert len(threads) <= num_threads and all(t.name.startswith("vclip-decode") for t in threads)


def test_one_pass_at_a_time(dataset):
    loader = make_loader(dataset, batch_size=2)
    first = iter(loader)
    next(first)
    second = list(loader)  # a new pass ends the old one
    assert len(second) == len(loader)
    with pytest.raises(RuntimeError, match="a newer pass"):
        next(first)


def test_break_and_restart(dataset):
    loader = make_loader(dataset, batch_size=2, shuffle=True)
    for held in loader:
        copy = held.data.clone()
        break
    time.sleep(0.03)
    assert torch.equal(held.data, copy)  # still held: the abandoned pass wrote other buffers
    restarted = epoch_of(loader)
    assert [x["frame_indices"] for x in restarted] == [x["frame_indices"] for x in epoch_of(loader)]
    for x in restarted:
        for clip, frames in zip(x["data"].numpy(), x["frame_indices"]):
            assert barcodes(clip) == frames


@pytest.mark.slow
def test_the_default_cpu_loader_decodes_in_processes_where_a_crash_costs_nothing(dataset):
    """``decode_processes="auto"`` on the CPU: worker processes (one per 2 of the default decode
    threads), so that a decoder's native crash (SIGSEGV, sent here) ends a worker, not the training
    run: what it was decoding goes to a new worker, and the epoch is the threads' epoch."""
    import signal

    from vclip._engine import auto_decode_processes

    expected = epoch_of(make_loader(dataset, seed=3, batch_size=2))  # 2 threads of this process
    # 6 batches: with 2 queued ahead, batches are still to be decoded when the workers are killed
    loader = vclip.ClipLoader(dataset, vclip.strided(4, 2, clips_per_video=2), device="cpu", batch_size=2, seed=3)
    try:
        assert loader.decode_processes == auto_decode_processes(gpu=False) >= 1 and loader.num_threads == 0
        batches = iter(loader)
        got = epoch_of([next(batches)])
        workers = worker_pids("vclip._engine.processes:serve_worker")  # other tests' loaders may keep theirs
        assert len(workers) >= loader.decode_processes
        for pid in workers:
            os.kill(pid, signal.SIGSEGV)
        got += epoch_of(batches)
        assert set(worker_pids("vclip._engine.processes:serve_worker")) - set(workers)  # replaced
    finally:
        loader.close()
    assert len(got) == len(expected)
    for batch, twin in zip(got, expected):
        assert batch.pop("data").equal(twin.pop("data")) and batch == twin


def test_a_runtime_that_fails_to_start_stops_its_decode_processes(dataset, monkeypatch):
    import vclip._loader.settings
    import vclip.loader

    real_make_backend = vclip._loader.settings.make_backend
    before, backends, started = set(worker_pids()), [], set()

    def make_backend(*args, **kwargs):
        backends.append(real_make_backend(*args, **kwargs))
        started.update(set(worker_pids()) - before)
        return backends[-1]

    def failing_runtime(*args, **kwargs):
        raise RuntimeError("no runtime")

    monkeypatch.setattr(vclip._loader.settings, "make_backend", make_backend)
    monkeypatch.setattr(vclip.loader, "LoaderRuntime", failing_runtime)
    try:
        with pytest.raises(RuntimeError, match="no runtime"):
            make_loader(dataset[:2], decode_processes=1, num_threads=1)
        assert len(backends) == 1 and len(started) == 1
        assert not set(worker_pids()) & started
    finally:
        for backend in backends:
            backend.close()


# -- bad videos -------------------------------------------------------------------------------------
def test_bad_videos_are_replaced_named_and_counted(dataset, bad_files, caplog):
    videos = list(dataset)
    for position, kind in zip((1, 3, 4, 6, 8), bad_files):
        videos.insert(position, (bad_files[kind], 0))
    bad_ids = {i for i, (path, _) in enumerate(videos) if path in bad_files.values()}
    sampler = vclip.strided(4, 2, clips_per_video=2)
    with caplog.at_level(logging.WARNING, logger="vclip"):
        loader = make_loader(videos, sampler, batch_size=2, shuffle=True, seed=5)
        runs = []
        for epoch in range(2):
            loader.set_epoch(epoch)
            runs.append(epoch_of(loader))
    for batches in runs:
        assert len(batches) == len(videos) == len(loader)  # the epoch keeps its length
        assert all(len(x["video_ids"]) == 2 for x in batches)
        assert not bad_ids & {v for x in batches for v in x["video_ids"]}
        assert {path for x in batches for path in x["skipped"]} == set(bad_files.values())
        for x in batches:
            for clip, frames in zip(x["data"].numpy(), x["frame_indices"]):
                assert barcodes(clip) == frames
    skipped = loader.stats().skipped
    assert set(skipped.videos) == set(bad_files.values())
    assert skipped.clips == 2 * len(bad_files) * 2
    assert "file is empty" in skipped.videos[bad_files["empty"]]
    assert "does not exist" in skipped.videos[bad_files["missing"]]
    assert "cannot be decoded" in skipped.videos[bad_files["garbled"]]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert sorted(m.split()[2].rstrip(":") for m in warned) == sorted(bad_files.values())  # once per video

    again = make_loader(videos, sampler, batch_size=2, shuffle=True, seed=5)
    again.set_epoch(1)
    replay = epoch_of(again)
    assert [x["video_ids"] for x in replay] == [x["video_ids"] for x in runs[1]]
    assert [x["frame_indices"] for x in replay] == [x["frame_indices"] for x in runs[1]]


def test_on_error_raise(dataset, bad_files):
    with pytest.raises(vclip.CorruptVideoError, match="file is empty"):
        make_loader(dataset + [(bad_files["empty"], 0)], on_error="raise")
    with pytest.raises(vclip.VideoNotFoundError):
        make_loader(dataset + [(bad_files["missing"], 0)], on_error="raise")
    loader = make_loader([(bad_files["garbled"], 0)] + dataset, on_error="raise")
    with pytest.raises(vclip.CorruptVideoError, match=r"bad_garbled.mkv: frame \d+ cannot be decoded"):
        list(loader)


@pytest.fixture(scope="module")
def unreadable(folder, dataset) -> dict[str, str]:
    """Real files that once failed in ways other than a VideoError deep down: an AVI whose first
    index entry claims 2 GiB (FFmpeg refuses to seek into its first frames with EPERM; now read
    from the start), a symlink loop (os.stat fails), a text file named .mp4 and a truncated copy
    of a good video."""
    avi = make_video(
        folder / "huge_index_entry.avi",
        num_frames=NUM_FRAMES,
        width=WIDTH,
        height=HEIGHT,
        codec="mpeg4",
        keyframe_interval=16,
        seed=11,
    )
    data = bytearray(open(avi, "rb").read())
    entry = data.find(b"idx1") + 8
    data[entry + 12 : entry + 16] = (0x7FFFFFFF).to_bytes(4, "little")
    open(avi, "wb").write(data)
    loop = str(folder / "loop.mp4")
    if not os.path.lexists(loop):
        os.symlink("loop.mp4", loop)
    text = folder / "notes.mp4"
    text.write_text("these are my notes, not a video\n" * 20)
    good = open(dataset[1][0], "rb").read()
    truncated = folder / "truncated_copy.mp4"
    truncated.write_bytes(good[: len(good) * 2 // 3])
    vclip.clear_index_cache()
    return {"avi": avi, "loop": loop, "text": str(text), "truncated": str(truncated)}


def test_on_error_skip_never_raises_for_one_video(dataset, unreadable, caplog):
    """Bad files found at construction and mid-epoch are reported and replaced; epochs keep their length."""
    videos = list(dataset)
    for position, path in zip((0, 2, 5, 7), unreadable.values()):
        videos.insert(position, (path, 1))
    bad_paths = {unreadable[name] for name in ("loop", "text", "truncated")}
    bad_ids = {i for i, (path, _) in enumerate(videos) if path in bad_paths}
    with caplog.at_level(logging.WARNING, logger="vclip"):
        loader = make_loader(videos, vclip.indexed([0, 20]), clips_per_video=2, batch_size=4, shuffle=True)
        batches = epoch_of(loader)
    assert len(batches) == len(loader) == 2 * len(videos) // 4 and all(len(x["video_ids"]) == 4 for x in batches)
    assert not bad_ids & {v for x in batches for v in x["video_ids"]}
    for x in batches:
        for clip, frames in zip(x["data"].numpy(), x["frame_indices"]):
            assert barcodes(clip) == frames == [0, 20]
    assert {path for x in batches for path in x["skipped"]} == bad_paths
    skipped = loader.stats().skipped
    assert set(skipped.videos) == bad_paths and skipped.clips == 2 * len(bad_paths)
    assert "symbolic links" in skipped.videos[unreadable["loop"]]  # found at construction
    avi = videos.index((unreadable["avi"], 1))
    assert sum(v == avi for x in batches for v in x["video_ids"]) == 2  # the AVI decodes, from the start of the file
    warned = sorted(r.getMessage().split()[2].rstrip(":") for r in caplog.records if r.levelno == logging.WARNING)
    assert warned == sorted(bad_paths)  # one warning per video


def test_on_error_raise_names_the_file_whatever_failed(dataset, unreadable):
    with pytest.raises(vclip.UnreadableVideoError, match=r"loop\.mp4: too many levels of symbolic links"):
        make_loader(dataset + [(unreadable["loop"], 0)], on_error="raise")
    with pytest.raises(vclip.VideoError, match=r"notes\.mp4: "):
        make_loader(dataset + [(unreadable["text"], 0)], on_error="raise")


def test_videos_that_cannot_give_a_clip(dataset, folder):
    short = make_video(folder / "short.mp4", num_frames=6, width=WIDTH, height=HEIGHT)
    loader = make_loader(dataset + [(short, 1)], vclip.strided(4, 3, end_policy="drop"))
    assert "no clip of 10 frames fits in its 6 frames" in loader.stats().skipped.videos[short]
    with pytest.raises(ValueError, match="none of the 1 videos can be used"):
        make_loader([(short, 0)], vclip.strided(4, 3, end_policy="drop"))


def test_mixed_sizes_are_refused_before_the_first_batch(dataset, folder):
    others = [
        make_video(folder / f"other_size_{i}.mp4", num_frames=NUM_FRAMES, width=160, height=120, seed=i)
        for i in range(2)
    ]
    videos = dataset + [(path, 2) for path in others]
    with pytest.raises(ValueError) as raised:
        make_loader(videos)
    message = str(raised.value)
    assert "2 sizes" in message
    assert f"128x96: 6 videos (e.g. {dataset[0][0]})" in message and f"160x120: 2 videos (e.g. {others[0]})" in message
    assert "vclip.TransformSpec(resize=(96, 128))" in message and "mixed_sizes='skip'" in message

    resized = make_loader(videos, transform=vclip.TransformSpec(resize=(96, 128)))  # the advice works
    assert not resized.stats().skipped.videos
    for batch in resized:
        for clip, frames in zip(batch.data.numpy(), batch.frame_indices.tolist()):
            assert barcodes(clip) == frames

    skipping = make_loader(videos, mixed_sizes="skip")  # opt-in: the most common shape wins
    assert sorted(skipping.stats().skipped.videos) == others
    assert "mixed_sizes='skip'" in skipping.stats().skipped.videos[others[0]]
    assert not {len(dataset), len(dataset) + 1} & {v for b in skipping for v in b.video_ids.tolist()}


# -- distributed sharding (pure) --------------------------------------------------------------------
@pytest.mark.parametrize("num_videos, num_shards", [(7, 2), (10, 3), (5, 5), (9, 4)])
@pytest.mark.parametrize("shuffle", [False, True])
def test_shards_are_disjoint_cover_and_equal(num_videos, num_shards, shuffle):
    counts = np.full(num_videos, 2)
    for even_shards in ("pad", "drop"):
        shards = [
            epoch_clip_refs(
                counts, seed=3, epoch=1, shuffle=shuffle, shard_id=r, num_shards=num_shards, even_shards=even_shards
            )
            for r in range(num_shards)
        ]
        videos = [{ref.video for ref in refs} for refs in shards]
        assert len({len(refs) for refs in shards}) == 1
        assert all(not a & b for i, a in enumerate(videos) for b in videos[i + 1 :])
        total = 2 * (-(-num_videos // num_shards) if even_shards == "pad" else num_videos // num_shards)
        assert len(shards[0]) == total
        if even_shards == "pad":
            assert set().union(*videos) == set(range(num_videos))


def test_loader_shards_given_explicitly(dataset):
    shards = [make_loader(dataset[:5], shard_id=r, num_shards=2, batch_size=3, shuffle=True) for r in range(2)]
    ids = [[v for x in epoch_of(loader) for v in x["video_ids"]] for loader in shards]
    assert len(shards[0]) == len(shards[1]) == 2 and len(ids[0]) == len(ids[1]) == 6
    assert not set(ids[0]) & set(ids[1]) and set(ids[0]) | set(ids[1]) == set(range(5))
    dropped = [make_loader(dataset[:5], shard_id=r, num_shards=2, even_shards="drop") for r in range(2)]
    assert [sum(len(b) for b in loader) for loader in dropped] == [4, 4]


# -- resuming ---------------------------------------------------------------------------------------
RESUME_SPEC = vclip.TransformSpec(resize=(96, 128), crop=80, crop_mode="random", flip_probability=0.5)


def resume_loader(videos, **options) -> vclip.ClipLoader:
    """Shuffled, jittered starts, random crops and flips: every seeded choice shows in the batches."""
    options = dict(transform=RESUME_SPEC, shuffle=True, seed=3, batch_size=3) | options
    return make_loader(videos, vclip.jittered(4, 3, 1, clips_per_video=2), **options)


def same_batches(resumed: list[dict], expected: list[dict]) -> None:
    assert [x["frame_indices"] for x in resumed] == [x["frame_indices"] for x in expected]
    assert [x["video_ids"] for x in resumed] == [x["video_ids"] for x in expected]
    assert [x["skipped"] for x in resumed] == [x["skipped"] for x in expected]
    assert all(torch.equal(x["data"], y["data"]) for x, y in zip(resumed, expected))


def stop_after(loader, batches: int) -> dict:
    """Take ``batches`` batches of the loader's epoch, then its state, through JSON."""
    iterator = iter(loader)
    for _ in range(batches):
        next(iterator)
    state = json.loads(json.dumps(loader.state_dict()))
    iterator.close()
    return state


@pytest.fixture(scope="module")
def resume_videos(dataset, bad_files, unreadable) -> list[tuple[str, int]]:
    """The dataset with a video found bad at construction, one whose every clip fails to decode,
    and one whose clips fail only when they touch its first 18 frames."""
    return (
        dataset[:3] + [(bad_files["garbled"], 1)] + dataset[3:] + [(bad_files["missing"], 2)] + [(unreadable["avi"], 0)]
    )


@pytest.mark.parametrize("stop", [0, 1, 4, 6])
def test_resumed_epoch_gives_the_batches_an_uninterrupted_one_would(resume_videos, stop):
    whole = resume_loader(resume_videos)
    expected = [epoch_of(whole)]
    whole.set_epoch(1)
    expected.append(epoch_of(whole))
    assert len(expected[1]) == 6 and sum(len(x["skipped"]) > 0 for x in expected[1]) >= 2  # replacements

    first = resume_loader(resume_videos, prefetch_queue_depth=3)
    assert len(epoch_of(first)) == 6  # epoch 0 finds the bad videos that epoch 1 leaves out
    first.set_epoch(1)
    state = stop_after(first, stop)
    assert state["epoch"] == 1 and state["batches_delivered"] == stop and state["seed"] == 3
    assert len(json.dumps(state)) < 1000

    fresh = resume_loader(resume_videos, num_threads=1)
    fresh.load_state_dict(state)
    assert fresh.epoch == 1 and fresh.state_dict() == state
    resumed = epoch_of(fresh)
    assert [x["batch_number"] for x in resumed] == list(range(stop, 6))
    same_batches(resumed, expected[1][stop:])
    assert fresh.state_dict()["batches_delivered"] == 6
    fresh.set_epoch(2)  # another epoch starts from its first batch
    assert len(epoch_of(fresh)) == 6


def test_resume_with_shards(resume_videos):
    for shard_id in range(2):
        options = dict(shard_id=shard_id, num_shards=2)
        expected = epoch_of(resume_loader(resume_videos, **options))
        state = stop_after(resume_loader(resume_videos, **options), 2)
        assert state["shard"] == [shard_id, 2]
        fresh = resume_loader(resume_videos, **options)
        fresh.load_state_dict(state)
        same_batches(epoch_of(fresh), expected[2:])
        other = resume_loader(resume_videos, shard_id=1 - shard_id, num_shards=2)
        with pytest.raises(ValueError, match=rf"shard {shard_id} of 2\) was saved by another loader"):
            other.load_state_dict(state)


def test_resume_in_a_fresh_process(resume_videos, tmp_path):
    expected = epoch_of(resume_loader(resume_videos))
    state_file, out = tmp_path / "state.json", tmp_path / "resumed.pt"
    state_file.write_text(json.dumps(stop_after(resume_loader(resume_videos), 2)))
    code = (
        "import json, sys, torch\n"
        "sys.path[:0] = [sys.argv[1], str(__import__('pathlib').Path(sys.argv[1]).parent)]  # the tests, the helpers\n"
        "from test_loader import epoch_of, resume_loader\n"
        "loader = resume_loader(json.loads(sys.argv[2]))\n"
        "loader.load_state_dict(json.loads(open(sys.argv[3]).read()))\n"
        "torch.save(epoch_of(loader), sys.argv[4])\n"
    )
    subprocess.run(
        [sys.executable, "-c", code, os.path.dirname(__file__), json.dumps(resume_videos), str(state_file), str(out)],
        check=True,
        timeout=120,
    )
    same_batches(torch.load(out), expected[2:])


def test_resume_through_torchdata_stateful_dataloader(resume_videos):
    StatefulDataLoader = require_extra("torchdata.stateful_dataloader").StatefulDataLoader  # in the test extra

    expected = epoch_of(resume_loader(resume_videos))
    running = StatefulDataLoader(resume_loader(resume_videos), batch_size=None)
    iterator = iter(running)
    for _ in range(3):
        next(iterator)
    state = running.state_dict()
    resumed = StatefulDataLoader(resume_loader(resume_videos), batch_size=None)
    resumed.load_state_dict(state)
    same_batches(epoch_of(resumed), expected[3:])


def test_state_from_another_run_is_refused(resume_videos, dataset):
    state = stop_after(resume_loader(resume_videos), 1)
    with pytest.raises(ValueError, match=r"saved by a loader with other videos \(their paths and order\) than this"):
        resume_loader(dataset).load_state_dict(state)
    with pytest.raises(ValueError, match=r"^state was saved by a loader with other batch_size than this one \(the "
                                         r"rest matches\); resume with the batch_size of the run that saved it$"):
        resume_loader(resume_videos, batch_size=2).load_state_dict(state)
    legacy = {name: value for name, value in state.items() if name != "parts"}  # saved before the parts were kept
    with pytest.raises(ValueError, match=r"another dataset or with other batch options"):
        resume_loader(resume_videos, batch_size=2).load_state_dict(legacy)
    resume_loader(resume_videos).load_state_dict(legacy)
    with pytest.raises(ValueError, match=r"seed=3.*this one \(seed=4"):
        resume_loader(resume_videos, seed=4).load_state_dict(state)
    with pytest.raises(ValueError, match=r"must be a dict made by ClipLoader.state_dict\(\)"):
        resume_loader(resume_videos).load_state_dict({"epoch": 1})
    with pytest.raises(ValueError, match=r"is damaged"):
        resume_loader(resume_videos).load_state_dict(state | {"batches_delivered": "many"})


def test_state_with_another_max_lead_frames_is_refused(dataset):
    state = stop_after(resume_loader(dataset), 1)
    with pytest.raises(ValueError, match=r"saved by a loader with other max_lead_frames than this one \(the rest "
                                         r"matches\)"):
        resume_loader(dataset, max_lead_frames=2).load_state_dict(state)
    bounded = stop_after(resume_loader(dataset, max_lead_frames=2), 1)
    resume_loader(dataset, max_lead_frames=2).load_state_dict(bounded)
    with pytest.raises(ValueError, match=r"with other max_lead_frames than this one"):
        resume_loader(dataset, max_lead_frames=3).load_state_dict(bounded)


@pytest.mark.parametrize("change, message", [
    ({"epoch": -1}, r"state\['epoch'\] \(-1\) must be an integer >= 0"),
    ({"batches_delivered": -2}, r"state\['batches_delivered'\] \(-2\) must be an integer >= 0"),
    ({"batches_delivered": float("inf")}, r"state\['batches_delivered'\] \(inf\) must be an integer >= 0"),
    ({"epoch": 1e300}, r"state\['epoch'\] \(1e\+300\) must be an integer >= 0"),
    ({"shard": [2, 2]}, r"state\['shard'\]\[0\] \(2\) must be an integer in \[0, 1\]"),
    ({"bad_videos": [[0, -5, "x"]]}, r"a bad video's epoch \(-5\) must be an integer >= -1"),
    ({"batches_delivered": 7}, r"state says 7 batches of epoch 1 were delivered, and this loader's epoch 1 has 6"),
])
def test_a_state_with_counts_out_of_range_is_refused_before_the_next_pass(resume_videos, change, message):
    """A negative epoch or batch count loaded, and the next pass died with a bare ValueError or
    IndexError; an infinite one raised OverflowError."""
    loader = resume_loader(resume_videos)
    loader.set_epoch(1)
    state = stop_after(loader, 1)
    with pytest.raises(vclip.ArgumentError, match=message):
        resume_loader(resume_videos).load_state_dict(state | change)


# -- memory -----------------------------------------------------------------------------------------
def test_loader_memory_estimate_parts():
    estimate = vclip.plan_loader_memory(  # 2 batches ahead: 5 buffers; 8 NVDEC decode threads
        width=224,
        height=224,
        batch_size=8,
        sequence_length=16,
        dtype="float32",
        prefetch_queue_depth=2,
        num_threads=8,
        device="cuda",
        video_width=1920,
        video_height=1080,
    )
    assert estimate.batch.bytes == 224 * 224 * 3 * 4 * 8 * 16
    assert estimate.output_buffers == 5 * estimate.batch.bytes
    surfaces = vclip.memory.NVDEC_DECODE_SURFACES + vclip.memory.NVDEC_OUTPUT_SURFACES
    assert estimate.decode_surfaces == 8 * surfaces * 1.5 * 1920 * 1080
    assert estimate.cuda_context == vclip.memory.CUDA_CONTEXT_BYTES
    parts = estimate.output_buffers + estimate.decode_surfaces + estimate.workspace + estimate.cuda_context
    assert estimate.total == parts
    fits = estimate.largest_batch_size(estimate.total)
    assert fits == 8 and estimate.largest_batch_size(estimate.total - 1) == 7
    assert estimate.largest_batch_size(estimate.fixed_bytes) == 0
    host = vclip.plan_loader_memory(width=224, height=224, batch_size=8, sequence_length=16, device="cpu")
    assert host.total == host.output_buffers and host.decoders == 0


def test_memory_budget_lowers_the_counts_left_to_the_loader(dataset):
    """A budget that holds batches of 8 with 1 batch queued (4 buffers) but not 2 (5 buffers): the
    loader runs with 1, says so, and keeps to its plan; a depth the user set is not lowered."""
    spec = vclip.TransformSpec(resize=(96, 128), dtype="float32")
    per_batch = 96 * 128 * 3 * 4 * 4 * 8  # 8 clips of 4 frames, float32
    assert make_loader(dataset, transform=spec, batch_size=8).memory_estimate.output_buffers == 5 * per_batch
    budget = 4 * per_batch + 100
    loader = make_loader(dataset, transform=spec, batch_size=8, memory_budget=budget)
    assert loader.prefetch_queue_depth == 1 and loader.memory_estimate.buffers == 4
    assert loader.memory_estimate.total == 4 * per_batch <= budget
    expected = epoch_of(make_loader(dataset, transform=spec, batch_size=8))
    got = epoch_of(loader)
    assert [b["frame_indices"] for b in got] == [b["frame_indices"] for b in expected]
    assert all(torch.equal(g["data"], e["data"]) for g, e in zip(got, expected))
    stats = loader.stats()
    assert stats.working["prefetch_queue_depth"] == 1
    assert stats.chosen["prefetch_queue_depth"].reason.endswith("at most 1 within memory_budget")
    assert stats.memory.peak_bytes <= loader.memory_estimate.total
    loader.close()
    with pytest.raises(ValueError, match=r"too small for batch_size=8.*5 output buffers.*the largest batch_size that "
                                         r"fits is 6"):
        make_loader(dataset, transform=spec, batch_size=8, memory_budget=budget, prefetch_queue_depth=2)


def test_memory_budget_refusal_names_the_largest_batch_that_fits(dataset):
    """Refused when even 1 batch queued does not fit: the largest batch is the one that fits with it."""
    spec = vclip.TransformSpec(resize=(96, 128), dtype="float32")
    per_clip = 96 * 128 * 3 * 4 * 4
    budget = 4 * 5 * per_clip + 100  # 4 buffers of batch_size=5
    with pytest.raises(ValueError, match=r"too small for batch_size=8.*4 output buffers.*the largest batch_size that "
                                         r"fits is 5"):
        make_loader(dataset, transform=spec, batch_size=8, memory_budget=budget)
    assert make_loader(dataset, transform=spec, batch_size=5, memory_budget=budget).memory_estimate.total <= budget
    with pytest.raises(ValueError, match="not even batch_size=1 fits"):
        make_loader(dataset, transform=spec, memory_budget="1KiB")


# -- monitoring -------------------------------------------------------------------------------------
def test_stats_and_epoch_summary(dataset, caplog, capsys):
    loader = make_loader(dataset, batch_size=4, verbose=True)
    with caplog.at_level(logging.INFO, logger="vclip"):
        batches = epoch_of(loader)
    stats = loader.stats()
    seconds = stats.to_dict()["seconds"]
    assert set(seconds) == {
        "index",
        "sample",
        "demux",
        "decode",
        "convert",
        "build",
        "queue",
        "consumer_wait",
        "active",
    }
    assert all(value >= 0 for value in seconds.values()) and stats.seconds.decode > 0
    assert stats.batches == len(batches) == 3 and stats.clips == 12
    assert stats.device == "cpu" and stats.epoch == 0
    assert stats.frames.delivered == 12 * 4 <= stats.frames.decoded
    assert stats.frames.decoded_per_delivered == stats.frames.decoded / stats.frames.delivered
    assert stats.decode_workers == 2 and stats.nvdec_decoders == 0 and 0 < stats.decode_workers_busy <= 1
    assert stats.memory.gpu == {}
    assert stats.memory.in_use_bytes == stats.memory.peak_bytes  # its buffers, allocated as batches needed them
    assert stats.memory.estimate_bytes == stats.memory.peak_bytes < loader.memory_estimate.total  # planned for those
    assert 3 * loader.memory_estimate.batch.bytes <= stats.memory.peak_bytes <= loader.memory_estimate.output_buffers
    assert stats.skipped.clips == 0 and stats.skipped.videos == {}

    as_json = json.loads(json.dumps(stats.to_dict()))
    assert as_json["frames"] == {
        "decoded": stats.frames.decoded,
        "delivered": 48,
        "decoded_per_delivered": stats.frames.decoded_per_delivered,
    }
    assert as_json["memory"]["peak_bytes"] == stats.memory.peak_bytes and as_json["batches"] == 3
    line = repr(stats)
    assert "\n" not in line and len(line) < 250
    assert line.startswith("LoaderStats(cpu, since the start (now epoch 0): 3 batches, 12 clips in ")
    assert "0 videos skipped" in line
    summary_lines = stats.summary().splitlines()
    assert len(summary_lines) == 9 and "2 decode workers (0 NVDEC)" in summary_lines[2]
    assert f"{stats.frames.decoded} decoded for 48 delivered" in summary_lines[3]
    # num_threads=2 is set: no processes, and the loader says why
    assert as_json["chosen"] == {
        "decode_processes": {"value": 0, "reason": "auto: num_threads=2 is set, and exactly those threads decode"},
        "cpu_decoders": {"value": 0, "reason": "auto: none on the CPU (the decode pool keeps every core busy)"},
        "prefetch_queue_depth": {"value": 2, "reason": "auto: 2"},
    }
    assert summary_lines[-3:] == [
        "  decode_processes 0: auto: num_threads=2 is set, and exactly those threads decode",
        "  cpu_decoders 0: auto: none on the CPU (the decode pool keeps every core busy)",
        "  prefetch_queue_depth 2: auto: 2",
    ]

    summary = [r.getMessage() for r in caplog.records if "epoch 0" in r.getMessage()]
    assert len(summary) == 1 and "3 batches, 12 clips" in summary[0]
    assert summary[0] in capsys.readouterr().err

    quiet = make_loader(dataset, batch_size=4)
    list(quiet)
    assert "vclip loader epoch" not in capsys.readouterr().err


def test_stats_say_what_the_loader_chose_and_why(dataset):
    """Left to the machine, the loader says what it chose and why; a count given is taken as it is."""
    from vclip._engine import auto_decode_processes
    from vclip._machine import usable_cores

    chosen = vclip.ClipLoader(dataset, vclip.strided(4, 2), device="cpu", batch_size=4).stats().chosen
    cores = usable_cores()
    assert chosen["decode_processes"].value == auto_decode_processes(gpu=False) == max(1, min(8, cores) // 2)
    assert chosen["decode_processes"].reason == (
        f"auto: one per 2 of the min(8, {cores} cores) decode threads, so that a decoder's crash costs only its video")
    given = make_loader(dataset, decode_processes=2, cpu_decoders=1).stats().chosen
    assert (given["decode_processes"].value, given["decode_processes"].reason) == (2, "set")
    assert (given["cpu_decoders"].value, given["cpu_decoders"].reason) == (1, "set")
    assert make_loader(dataset, prefetch_queue_depth=3).prefetch_queue_depth == 3


def test_a_pickled_loader_keeps_what_it_chose_and_why(dataset):
    """Spawned DataLoader workers and benchmark processes get the loader pickled: its chosen counts
    (ints with their reasons) come back whole."""
    import pickle

    loader = vclip.ClipLoader(dataset, vclip.strided(4, 2), device="cpu", batch_size=4)
    copy = pickle.loads(pickle.dumps(loader))
    assert copy.stats().chosen == loader.stats().chosen
    assert (copy.decode_processes, copy.decode_processes.reason) == (loader.decode_processes,
                                                                     loader.decode_processes.reason)
    assert [batch.labels.tolist() for batch in copy] == [batch.labels.tolist() for batch in loader]


def test_repr(dataset):
    loader = make_loader(dataset, transform=vclip.TransformSpec(resize=(64, 64), dtype="float16", layout="CTHW"))
    batch = next(iter(loader))
    assert repr(batch) == (
        "ClipBatch(data=[4, 3, 4, 64, 64] float16 cpu, labels=[4], frame_indices=[4, 4], "
        "epoch=0, batch_number=0, skipped_videos=0)"
    )
    assert "clip_shape=[3, 4, 64, 64]" in repr(loader) and "device='cpu'" in repr(loader)


# -- GPU --------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_batches_match_the_cpu(dataset):
    spec = vclip.TransformSpec(resize=(96, 128), crop=80, crop_mode="random", flip_probability=0.5, layout="THWC")
    options = dict(transform=spec, shuffle=True, seed=4, batch_size=4)
    cpu = epoch_of(make_loader(dataset, device="cpu", **options))
    loader = make_loader(dataset, device="cuda", num_threads=3, **options)
    batch = next(iter(loader))
    assert batch.data.is_cuda and batch.labels.device == batch.data.device
    gpu = epoch_of(loader)
    assert [x["frame_indices"] for x in gpu] == [x["frame_indices"] for x in cpu]
    assert [x["video_ids"] for x in gpu] == [x["video_ids"] for x in cpu]
    for x, y in zip(gpu, cpu):
        assert (x["data"].cpu().int() - y["data"].int()).abs().float().mean() <= 1.5
    memory = loader.stats().memory
    allocated = min(len(gpu), loader.memory_estimate.buffers) * loader.memory_estimate.batch.bytes
    assert memory.peak_bytes > 0 and memory.gpu["cupy_pool_total_bytes"] >= allocated


@pytest.mark.gpu
def test_gpu_epochs_built_ahead_match_the_cpu(dataset):
    """Epochs of one batch with 4 queued: from the second pass on, five epochs are in flight on the
    GPU at once, their buffers taken in turn; each epoch's clips are the CPU loader's."""
    spec = vclip.TransformSpec(resize=(96, 128), crop=80, crop_mode="random", flip_probability=0.5, layout="THWC")
    options = dict(transform=spec, shuffle=True, seed=4, batch_size=6, clips_per_video=1, prefetch_queue_depth=4)
    cpu, gpu = make_loader(dataset, device="cpu", **options), make_loader(dataset, device="cuda", **options)
    try:
        for epoch in range(8):
            cpu.set_epoch(epoch)
            gpu.set_epoch(epoch)
            expected, got = epoch_of(cpu), epoch_of(gpu)
            assert [x["frame_indices"] for x in got] == [x["frame_indices"] for x in expected]
            for x, y in zip(got, expected):
                assert x["data"].is_cuda
                assert (x["data"].cpu().int() - y["data"].int()).abs().float().mean() <= 1.5
        assert [run.epoch for run in gpu._runtime.ahead] == [8, 9, 10, 11, 12]
    finally:
        cpu.close()
        gpu.close()


@pytest.mark.gpu
def test_gpu_decode_processes_match_the_cpu(dataset):
    spec = vclip.TransformSpec(resize=(96, 128), crop=80, crop_mode="random", flip_probability=0.5, layout="THWC")
    options = dict(transform=spec, shuffle=True, seed=4, batch_size=4)
    cpu = epoch_of(make_loader(dataset, device="cpu", **options))
    loader = make_loader(dataset, device="cuda", decode_processes=2, num_threads=2, **options)
    try:
        assert loader.decode_workers == 4
        assert loader.memory_estimate.cuda_context == 3 * vclip.memory.CUDA_CONTEXT_BYTES
        for _ in range(2):  # the second epoch too
            gpu = epoch_of(loader)
            assert [x["frame_indices"] for x in gpu] == [x["frame_indices"] for x in cpu]
            for x, y in zip(gpu, cpu):
                assert x["data"].is_cuda
                assert (x["data"].cpu().int() - y["data"].int()).abs().float().mean() <= 1.5
        assert loader.stats().memory.peak_bytes <= loader.memory_estimate.total
    finally:
        loader.close()


@pytest.mark.parametrize("device", [pytest.param("cpu"), pytest.param("cuda", marks=pytest.mark.gpu)])
def test_videos_held_as_bytes_decode_beside_the_decode_processes(dataset, device):
    """No worker process can open bytes of this process: the backend decodes them here, in the
    same batches as the files the workers decode."""
    from vclip._bytes.sources import hold_video

    options = dict(transform=vclip.TransformSpec(layout="THWC"), seed=2, batch_size=4)
    held = [hold_video(open(path, "rb").read()) for path, _ in dataset[1::2]]  # as a Hugging Face dataset holds them
    mixed = [(held[number // 2][0] if number % 2 else path, label) for number, (path, label) in enumerate(dataset)]
    expected = epoch_of(make_loader(dataset, **options))  # files, threads, on the CPU
    loader = make_loader(mixed, device=device, decode_processes=1, num_threads=2, **options)
    try:
        got = epoch_of(loader)
    finally:
        loader.close()
    assert [x["frame_indices"] for x in got] == [x["frame_indices"] for x in expected]
    for x, y in zip(got, expected):
        assert [barcodes(clip) for clip in x["data"].cpu().numpy()] == x["frame_indices"]
        assert (x["data"].cpu().int() - y["data"].int()).abs().float().mean() <= (0 if device == "cpu" else 1.5)


@pytest.mark.gpu
def test_gpu_consumer_stream_lagging_behind_sees_whole_batches(dataset):
    """The consumer's stream runs far behind the host; buffers must not be refilled under it."""
    videos, spec = dataset * 4, vclip.TransformSpec(layout="THWC")
    expected = epoch_of(make_loader(videos, device="cpu", transform=spec, batch_size=4))
    loader = make_loader(videos, device="cuda", transform=spec, batch_size=4)
    stream = torch.cuda.Stream()
    copies = []
    with torch.cuda.stream(stream):
        for batch in loader:
            torch.cuda._sleep(20_000_000)  # about 10 ms of GPU time before the copy, queued, not waited for
            copies.append(batch.data.clone())
    stream.synchronize()
    assert len(copies) == len(expected) == 12
    for copy, reference in zip(copies, expected):
        assert (copy.cpu().int() - reference["data"].int()).abs().float().mean() <= 1.5


@pytest.mark.gpu
def test_gpu_resumed_epoch_matches_the_uninterrupted_one(resume_videos):
    """(NVDEC may conceal errors that the CPU reports, so the GPU is compared with itself.)"""
    expected = epoch_of(resume_loader(resume_videos, device="cuda"))
    state = stop_after(resume_loader(resume_videos, device="cuda"), 2)
    fresh = resume_loader(resume_videos, device="cuda")
    fresh.load_state_dict(state)
    resumed = epoch_of(fresh)
    assert all(x["data"].is_cuda for x in resumed)
    same_batches(resumed, expected[2:])


def test_an_unexpected_error_checking_a_video_keeps_its_type(videos, monkeypatch):
    """Only "no clip fits" (a ValueError) is told in its own words; anything else names its type."""
    from vclip._loader.clips import ClipDrawer

    def broken(self, index, segment=None):
        raise TypeError("not a number")

    monkeypatch.setattr(ClipDrawer, "inspect", broken)
    with pytest.raises(vclip.ArgumentError, match=r"checking its clips failed \(TypeError: not a number\)"):
        vclip.ClipLoader([(videos["h264"], 0)], vclip.strided(4, 2), device="cpu")


def test_batches_carry_the_padded_mask(folder):
    """As Frames.padded: True where the end policy filled a clip past the video's last frame."""
    short = make_video(folder / "five_frames.mp4", num_frames=5, width=WIDTH, height=HEIGHT, keyframe_interval=5)
    for policy, filled in (("repeat_last", [4, 4, 4]), ("wrap", [0, 1, 2])):
        loader = make_loader([(short, 0), (short, 1)], vclip.contiguous(8, end_policy=policy), batch_size=2)
        batch = next(iter(loader))
        assert batch.padded.dtype == torch.bool and batch.padded.shape == (2, 8)
        assert batch.padded.tolist() == [[False] * 5 + [True] * 3] * 2
        assert batch.frame_indices.tolist() == [[0, 1, 2, 3, 4, *filled]] * 2
        expected = vclip.VideoDecoder(short, device="cpu").get_clips(vclip.contiguous(8, end_policy=policy))
        assert batch.padded[0].numpy().tolist() == expected.padded[0].tolist()
    unpadded = next(iter(make_loader([(short, 0)], vclip.contiguous(4), batch_size=1)))
    assert not unpadded.padded.any()
