"""Decode worker processes need no main guard and never outlive or hang their parent: a script that never calls close()
exits promptly and quietly, also when it breaks out of the loop early; Ctrl-C mid-epoch stops it
without worker tracebacks; a parent killed outright leaves no workers behind; shared memory is
gone after exit."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from helpers import child_environment, running

from vclip.synthetic import make_video

SCRIPT = """
import json, os, sys, time
import vclip

def segments(pid):  # the shared memory segments process pid has mapped
    with open(f"/proc/{pid}/maps") as maps:
        return {os.path.basename(line.split()[-1]) for line in maps if "/dev/shm/psm_" in line}

def children():  # this process's children that run vclip's worker entry point
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as command:
                is_worker = b"vclip._jobs.child_process" in command.read()
        except (OSError, ValueError):
            continue
        if parent == os.getpid() and is_worker:
            found.append(int(entry))
    return found

if __name__ == "__main__":
    videos = [(path, 0) for path in json.loads(sys.argv[1])]
    loader = vclip.ClipLoader(videos, vclip.contiguous(4), transform=vclip.TransformSpec(resize=(48, 64)),
                              batch_size=2, device="cpu", decode_processes=2, num_threads=1)
    for epoch in range(1000 if sys.argv[2] == "forever" else 1):
        for number, batch in enumerate(loader):
            if epoch == 0 and number == 0:
                workers = children()
                mapped = set().union(segments(os.getpid()), *(segments(pid) for pid in workers))
                print(json.dumps({"workers": workers, "segments": sorted(mapped)}), flush=True)
            if sys.argv[2] == "break" and number == 1:
                break
    if sys.argv[2] == "sleep":
        time.sleep(600)
"""


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> list[str]:
    folder = tmp_path_factory.mktemp("lifecycle")
    return [make_video(folder / f"v{i}.mp4", num_frames=24, width=64, height=48, seed=i) for i in range(3)]


def start(videos, mode: str) -> tuple[subprocess.Popen, list[int], set[str]]:
    """The script in a fresh interpreter; returns it, its decode workers' pids and the shared memory
    segments they had mapped at the first batch."""
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, json.dumps(videos), mode],
        env=child_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started = json.loads(process.stdout.readline())
    assert len(started["workers"]) >= 2 and started["segments"], started
    return process, started["workers"], set(started["segments"])


def wait_gone(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(running(pid) for pid in pids):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("mode", ["end", "break"])
def test_a_script_without_close_exits_quietly(videos, mode):
    process, workers, segments = start(videos, mode)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "Traceback" not in err and "EOFError" not in err, err
    assert wait_gone(workers, 5)
    assert not [name for name in segments if os.path.exists(f"/dev/shm/{name}")]  # unlinked at exit


def test_ctrl_c_mid_epoch_stops_the_script_and_its_workers(videos):
    process, workers, _ = start(videos, "forever")
    time.sleep(0.5)  # mid-epoch
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode != 0 and "KeyboardInterrupt" in err
    assert err.count("Traceback") == 1, err  # the script's own, none from the workers
    assert wait_gone(workers, 5)


def test_a_killed_parent_leaves_no_workers(videos):
    process, workers, _ = start(videos, "sleep")
    process.kill()
    process.wait(timeout=10)
    assert wait_gone(workers, 10)  # they notice their parent is gone and exit


def test_a_script_without_a_main_guard_runs_with_decode_processes(videos, tmp_path):
    script = tmp_path / "train.py"  # a file: multiprocessing's spawn would import it again in every worker
    script.write_text(
        "import json, sys\nimport vclip\n"
        "loader = vclip.ClipLoader([(path, 0) for path in json.loads(sys.argv[1])], vclip.contiguous(4),\n"
        "                          transform=vclip.TransformSpec(resize=(48, 64)), batch_size=2, device='cpu',\n"
        "                          decode_processes=2, num_threads=1)\n"
        "print(sum(int(batch.data.shape[0]) for batch in loader), 'clips')\n"
    )
    done = subprocess.run([sys.executable, str(script), json.dumps(videos)], env=child_environment(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "3 clips" and "Traceback" not in done.stderr
