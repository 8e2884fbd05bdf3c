"""Two processes with torch.distributed (gloo, CPU): the loader takes rank and world size from the
process group; shards are disjoint, cover the dataset, and give every rank as many batches; an
epoch stopped on every rank resumes, loading from a dataset catalog, from each rank's state with
the batches the files themselves would have given."""

import json

import pytest
from helpers import require_extra

import vclip
from vclip.synthetic import make_video, read_barcode

torch = require_extra("torch")
dist = require_extra("torch.distributed")
mp = require_extra("torch.multiprocessing")

WORLD_SIZE = 2
NUM_VIDEOS = 7  # odd: the ranks' shards differ by one video


def _rank_main(rank: int, videos: list, catalog: str, rendezvous: str, results: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=WORLD_SIZE)
    try:
        report = {}
        for even_shards in ("pad", "drop"):
            loader = vclip.ClipLoader(
                videos,
                vclip.strided(4, 2, clips_per_video=2),
                batch_size=3,
                shuffle=True,
                seed=11,
                device="cpu",
                num_threads=1,
                even_shards=even_shards,
            )
            epochs = []
            for epoch in range(2):
                loader.set_epoch(epoch)
                batches = []
                for batch in loader:
                    for clip, frames in zip(batch.data.numpy(), batch.frame_indices.tolist()):
                        assert [read_barcode(frame) for frame in clip] == frames
                    batches.append(batch.video_ids.tolist())
                counts = torch.tensor([len(batches)])
                dist.all_reduce(counts, op=dist.ReduceOp.MAX)  # the ranks stay in step, as a training loop would
                epochs.append({"batches": batches, "length": len(loader), "max_batches": int(counts)})
            report[even_shards] = {"shard": [loader.shard_id, loader.num_shards], "epochs": epochs}
        report["resume"] = _stop_and_resume(videos, catalog)
        with open(f"{results}/rank{rank}.json", "w") as file:
            json.dump(report, file)
    finally:
        dist.destroy_process_group()


def _stop_and_resume(videos: list, catalog: str, stop: int = 2) -> dict:
    """Epoch 1 whole from the files, and epoch 1 from the catalog stopped after ``stop`` batches then
    resumed by a fresh loader from the JSON of its state; the batches after ``stop`` must be the same."""

    def make(source):
        return vclip.ClipLoader(
            source,
            vclip.jittered(4, 2, 1, clips_per_video=2),
            batch_size=3,
            shuffle=True,
            seed=5,
            device="cpu",
            num_threads=1,
            transform=vclip.TransformSpec(crop=48, crop_mode="random", flip_probability=0.5),
        )

    def batches(iterator):
        return [(b.video_ids.tolist(), b.frame_indices.tolist(), b.data.clone()) for b in iterator]

    whole = make(videos)
    whole.set_epoch(1)
    expected = batches(whole)
    stopped = make(catalog)
    stopped.set_epoch(1)
    iterator = iter(stopped)
    for _ in range(stop):
        next(iterator)
    state = json.loads(json.dumps(stopped.state_dict()))
    resumed = make(catalog)
    resumed.load_state_dict(state)
    rest = batches(resumed)
    dist.barrier()
    assert [b[:2] for b in rest] == [b[:2] for b in expected[stop:]]
    assert all(torch.equal(got[2], want[2]) for got, want in zip(rest, expected[stop:]))
    return {"state": state, "batches": len(expected), "resumed": [ids for ids, _, _ in rest]}


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> list[tuple[str, int]]:
    folder = tmp_path_factory.mktemp("distributed")
    return [
        (make_video(folder / f"v{i}.mp4", num_frames=24, width=96, height=64, keyframe_interval=8, seed=i), i % 2)
        for i in range(NUM_VIDEOS)
    ]


@pytest.fixture(scope="module")
def catalog(videos, tmp_path_factory) -> str:
    require_extra("pyarrow")  # in the test extra
    from vclip.catalog import build_catalog

    out = tmp_path_factory.mktemp("distributed_catalog") / "videos.parquet"
    return str(build_catalog(videos, out, workers=1, progress=False).path)


def test_two_ranks_get_disjoint_covering_equal_shards(videos, catalog, tmp_path):
    mp.spawn(
        _rank_main,
        args=(videos, catalog, str(tmp_path / "rendezvous"), str(tmp_path)),
        nprocs=WORLD_SIZE,
        join=True,
    )
    reports = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(WORLD_SIZE)]
    for even_shards, videos_per_rank in (("pad", 4), ("drop", 3)):
        runs = [report[even_shards] for report in reports]
        assert [run["shard"] for run in runs] == [[0, 2], [1, 2]]
        for epoch in range(2):
            per_rank = [run["epochs"][epoch] for run in runs]
            batches = [len(rank["batches"]) for rank in per_rank]
            clips = [[video for batch in rank["batches"] for video in batch] for rank in per_rank]
            # Every rank gets the same number of batches and clips, as len() says.
            assert batches[0] == batches[1] == per_rank[0]["length"] == per_rank[0]["max_batches"]
            assert len(clips[0]) == len(clips[1]) == 2 * videos_per_rank
            shards = [set(rank_clips) for rank_clips in clips]
            assert not shards[0] & shards[1]  # disjoint
            if even_shards == "pad":
                assert shards[0] | shards[1] == set(range(NUM_VIDEOS))  # covering
                assert sorted(len(shard) for shard in shards) == [3, 4]  # the short shard repeats its own videos
            else:  # the larger shard is cut to the smaller one's 6 clips
                assert sum(len(rank_clips) for rank_clips in clips) == 2 * NUM_VIDEOS - 2
        epoch_shards = [{v for batch in run["epochs"][e]["batches"] for v in batch} for run in runs for e in range(2)]
        assert epoch_shards[0] != epoch_shards[1]  # shuffling reshards every epoch
    resumes = [report["resume"] for report in reports]
    assert [resume["state"]["shard"] for resume in resumes] == [[0, 2], [1, 2]]  # from the process group
    assert all(resume["state"]["epoch"] == 1 and resume["state"]["batches_delivered"] == 2 for resume in resumes)
    assert all(len(resume["resumed"]) == resume["batches"] - 2 > 0 for resume in resumes)
    resumed_videos = [{v for batch in resume["resumed"] for v in batch} for resume in resumes]
    assert not resumed_videos[0] & resumed_videos[1]  # each rank resumed its own shard
