"""A command killed outright (SIGKILL, as the OOM killer does) leaves nothing behind: every process it
started (the job's worker processes, the resource tracker) exits within seconds, and the semaphores it
had in /dev/shm are unlinked. The commands here are those that start worker processes on a machine
without a GPU; decode worker processes are tested in tests/engine/test_process_lifecycle.py."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import child_environment, require_extra, running, session_of

from vclip.synthetic import make_video

_START_SECONDS = 90  # the workers of a spawned pool import vclip first: slow on a busy 2-core machine
_GONE_SECONDS = 10  # a worker notices its parent is gone within a second
_REPEATS = 100  # each video given this often: 8 small videos alone were done before the test saw the workers


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> list[str]:
    folder = tmp_path_factory.mktemp("killed")
    return [make_video(folder / f"v{i}.mp4", num_frames=48, width=64, height=48, keyframe_interval=8, seed=i)
            for i in range(8)]


def session_processes(session: int) -> list[int]:
    """The running processes of a session: a command started in a session of its own and everything
    it started, also those re-parented to init once it died."""
    return [int(entry) for entry in os.listdir("/proc")
            if entry.isdigit() and session_of(int(entry)) == session and running(int(entry))]


def shm_entries(pids: list[int]) -> set[str]:
    """The /dev/shm entries (semaphores, shared memory) these processes have mapped and not unlinked."""
    found = set()
    for pid in pids:
        try:
            maps = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue
        found.update(line.split()[-1] for line in maps.splitlines()
                     if "/dev/shm/" in line and not line.endswith("(deleted)"))
    return found


def _decoding(pid: int) -> bool:
    """Whether ``pid`` has loaded FFmpeg (a worker that imported vclip, at work or about to be)."""
    try:
        return "libavcodec" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def command_lines(pids: list[int]) -> list[str]:
    lines = []
    for pid in pids:
        try:
            lines.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            pass
    return lines


def _commands(videos: list[str], out: Path) -> dict[str, list[str]]:
    videos = videos * _REPEATS
    return {
        "index": ["index", *videos, "--out", str(out / "catalog.parquet"), "--workers", "2"],
        "keyframes": ["keyframes", *videos, "--out", str(out / "frames"), "--workers", "2"],
        "check": ["check", *videos, "--workers", "2", "--device", "cpu"],
        "sample": ["sample", *videos, "--mode", "contiguous", "--out", str(out / "clips"), "--workers", "2",
                   "--device", "cpu"],
    }


@pytest.mark.slow
@pytest.mark.parametrize("command", ["index", "keyframes", "check", "sample"])
def test_a_killed_command_leaves_no_process_and_nothing_in_dev_shm(videos, tmp_path, command):
    if command == "index":
        require_extra("pyarrow")
    arguments = _commands(videos, tmp_path)[command]
    with open(tmp_path / "stderr.txt", "wb") as stderr:  # a file: orphans holding a pipe would block a reader
        process = subprocess.Popen([sys.executable, "-m", "vclip", *arguments], env=child_environment(),
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                   start_new_session=True)
    session = process.pid
    try:
        deadline = time.monotonic() + _START_SECONDS
        while True:  # mid-run: two worker processes loaded FFmpeg, the job queues' semaphores made
            tree = session_processes(session)
            workers = [pid for pid in tree if pid != session and _decoding(pid)]
            entries = shm_entries(tree)
            if len(workers) >= 2 and entries:
                break
            assert process.poll() is None, f"vclip {command} ended before its workers started"
            assert time.monotonic() < deadline, f"vclip {command}'s workers did not start: {command_lines(tree)}"
            time.sleep(0.05)
        process.kill()
        process.wait(timeout=10)
        deadline = time.monotonic() + _GONE_SECONDS
        while session_processes(session) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = session_processes(session)
        assert not left, f"left running after vclip {command} was killed: {command_lines(left)}"
        deadline = time.monotonic() + _GONE_SECONDS  # the resource tracker unlinks as it exits
        while any(os.path.exists(entry) for entry in entries) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [entry for entry in entries if os.path.exists(entry)]
    finally:
        for pid in session_processes(session):
            os.kill(pid, signal.SIGKILL)
