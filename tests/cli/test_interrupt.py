"""Ctrl-C stops any command with exit status 130 and one line on stderr: no traceback of its own, none
from its worker processes. The signal goes to the command's whole process group, as a terminal sends
it, once the command is at work (a process of it holds one of its input or output files open)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import child_environment, require_extra, session_of

from vclip.cli import EXIT_INTERRUPTED
from vclip.synthetic import make_video

_START_SECONDS = 90  # importing vclip in each worker is slow on a busy 2-core machine
_STOP_SECONDS = 60
_REPEATS = 100  # each video given this often: info described 16 small videos in 0.05 s, and Ctrl-C came after


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> list[str]:
    folder = tmp_path_factory.mktemp("interrupted")
    return [make_video(folder / f"v{i}.mp4", num_frames=90, width=96, height=64, keyframe_interval=6, seed=i)
            for i in range(16)]


def _commands(videos: list[str], out: Path) -> dict[str, list[str]]:
    videos = videos * _REPEATS
    return {
        "info": ["info", *videos],
        "sample": ["sample", *videos, "--mode", "contiguous", "--out", str(out / "clips"), "--device", "cpu"],
        "keyframes": ["keyframes", *videos, "--out", str(out / "frames"), "--workers", "2"],
        "index": ["index", *videos, "--out", str(out / "catalog.parquet"), "--workers", "2"],
        "check": ["check", *videos, "--workers", "2", "--device", "cpu"],
        "demo": ["demo", "--out", str(out / "demo"), "--device", "cpu"],
    }


def _starting_workers(session: int) -> bool:
    """Whether a worker process of the session (not its resource tracker) is there, importing or at work."""
    for entry in os.listdir("/proc"):
        if entry.isdigit() and session_of(int(entry)) == session:
            try:
                if b"spawn_main" in Path(f"/proc/{entry}/cmdline").read_bytes():
                    return True
            except OSError:
                pass
    return False


def _open_files(session: int) -> set[str]:
    """The files the processes of a session hold open."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or session_of(int(entry)) != session:
            continue
        try:
            descriptors = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue
        for descriptor in descriptors:
            try:
                found.add(os.readlink(f"/proc/{entry}/fd/{descriptor}"))
            except OSError:
                pass
    return found


@pytest.mark.slow
@pytest.mark.parametrize(("command", "when"), [
    *((command, "at work") for command in ("info", "sample", "keyframes", "index", "check", "demo")),
    *((command, "while its workers start") for command in ("keyframes", "index", "check")),
])
def test_ctrl_c_stops_a_command_with_status_130_and_one_line(videos, tmp_path, command, when):
    """``when``: once a process of the command holds one of its files open, or as soon as a worker
    process exists (it still imports its modules: Ctrl-C stopped it there with a traceback)."""
    if command == "index":
        require_extra("pyarrow")
    folders = (os.path.dirname(videos[0]), str(tmp_path))
    process = subprocess.Popen([sys.executable, "-m", "vclip", *_commands(videos, tmp_path)[command]],
                               env=child_environment(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)

    def ready() -> bool:
        if when == "at work":
            return any(path.startswith(folders) for path in _open_files(process.pid))
        return _starting_workers(process.pid)

    try:
        deadline = time.monotonic() + _START_SECONDS
        while not ready():
            assert process.poll() is None, f"vclip {command} ended before it was interrupted"
            assert time.monotonic() < deadline, f"vclip {command} opened none of its files"
            time.sleep(0.002)
        os.killpg(process.pid, signal.SIGINT)
        _, err = process.communicate(timeout=_STOP_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == EXIT_INTERRUPTED, err
    assert err.splitlines() == [f"vclip {command}: interrupted"], err
