"""A loader's audio decoded in helper processes, off the interpreter lock of the loader's process.

The loader's process feeds NVDEC from many threads under one interpreter lock, and PyAV takes and
releases that lock several times per audio packet: beside busy decode threads one clip's audio
took 6-17 ms instead of 2 ms, and the audio bounded the loader at a third of its speed. Each
helper is an interpreter of its own that never touches CUDA, started by
:mod:`vclip._jobs.child_process` rather than through :mod:`multiprocessing`: it imports no module of
the user's, so a script needs no main guard for audio.

A helper answers one request at a time: the audio of one clip (its video, spans and spec), with
the samples, the warnings it raised and what it read from URLs. A helper that dies (a native crash
in a decoder) is replaced and the clip sent to the new one; a clip whose helper dies again is
reported as its video's error. Helpers ignore Ctrl-C (the parent shuts them down), exit when their
pipe closes, and watch their parent's pid, so none outlives its loader.
"""

from __future__ import annotations

import queue
import signal
import threading
import warnings
from dataclasses import dataclass, field

import numpy as np

from .._audio.spans import ClipSpans
from .._bytes.remote import add_remote_reads, take_remote_reads
from .._jobs.child_process import ChildProcess, RaisedWarnings, child_pipes, watch_parent
from ..audio import AudioSpec, audio_index_for, clips_audio, empty_audio
from ..errors import CorruptVideoError, VideoError
from .source import as_video_error

__all__ = ["AudioRequest", "AudioHelpers", "decode_clip_audio", "HELPER_DEATHS_PER_CLIP"]

HELPER_DEATHS_PER_CLIP = 2
"""Helpers that may die decoding one clip's audio before the clip is reported instead of sent again."""

_CLOSE_SECONDS = 5.0  # a helper still running this long after its pipe closed is killed


@dataclass(frozen=True)
class AudioRequest:
    """The audio of one clip: ``path``'s ``spans``, ``samples`` per span, as ``spec`` says."""

    path: str
    spans: ClipSpans
    spec: AudioSpec
    positions: int
    samples: int
    cache_dir: str | None


@dataclass
class _Reply:
    data: np.ndarray | None = None  # [1, ...] as empty_audio makes it
    lengths: np.ndarray | None = None
    has_audio: bool = False
    error: VideoError | None = None
    warnings: list[tuple[str, str]] = field(default_factory=list)
    remote_reads: dict = field(default_factory=dict)


def decode_clip_audio(request: AudioRequest, output: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, bool]:
    """``(data, lengths, has_audio)`` of the clip ``request`` names, written into ``output`` when
    given (``[1, ...]``, as :func:`~vclip.audio.empty_audio` makes it).

    Raises:
        VideoError: The audio cannot be read (whatever failed, naming the file).
    """
    spec = request.spec
    if output is None:
        output = empty_audio(spec, 1, request.positions, request.samples)
    try:
        index = audio_index_for(request.path, spec, request.cache_dir)
        _, lengths, _ = clips_audio(index, [request.spans], spec, positions=request.positions, output=output)
    except Exception as error:  # one video's problem, whatever it is
        raise as_video_error(request.path, error, "decoding its audio") from error
    return output, lengths[0], index is not None


# -- the helper's side --------------------------------------------------------------------------
def serve_helper() -> None:
    """Main function of a helper: answer requests until the parent closes the pipe or goes away."""
    requests, replies, parent_pid = child_pipes()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the parent decides
    watch_parent(parent_pid)
    while True:
        try:
            request = requests.recv()
        except (EOFError, OSError):
            return
        reply = _Reply()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # the parent decides what is shown once
            try:
                reply.data, reply.lengths, reply.has_audio = decode_clip_audio(request)
            except VideoError as error:
                reply.error = error
        reply.warnings = [(type(w.message).__name__, str(w.message)) for w in caught]
        reply.remote_reads = take_remote_reads()
        try:
            replies.send(reply)
        except OSError:  # the parent is gone
            return


# -- the parent's side --------------------------------------------------------------------------
class _Helper:
    """One helper process seen from the parent."""

    def __init__(self):
        self.process = ChildProcess(f"{__name__}:serve_helper")

    def ask(self, request: AudioRequest) -> _Reply:
        reply = self.process.ask(request)
        assert isinstance(reply, _Reply)
        return reply

    def close(self) -> None:
        self.process.stop(_CLOSE_SECONDS)


class AudioHelpers:
    """``count`` helper processes, started when first asked; :meth:`decode` is called from as many
    threads at once (each takes a helper and waits for its answer without the interpreter lock)."""

    def __init__(self, count: int):
        self.count = count
        self._idle: queue.SimpleQueue[_Helper] | None = None
        self._lock = threading.Lock()
        self._warnings = RaisedWarnings()

    def decode(self, request: AudioRequest, output: np.ndarray) -> tuple[np.ndarray, bool]:
        """Decode the clip's audio into ``output`` (``[1, ...]``); ``(lengths, has_audio)``.

        Raises:
            VideoError: The audio cannot be read, or it killed :data:`HELPER_DEATHS_PER_CLIP` helpers.
        """
        idle = self._start()
        exit_codes: list[int] = []
        helper = idle.get()
        try:
            while True:
                try:
                    reply = helper.ask(request)
                    break
                except ChildProcess.Died as died:
                    exit_codes.append(died.args[0])
                    helper.close()
                    helper = _Helper()
                    if len(exit_codes) == HELPER_DEATHS_PER_CLIP:
                        raise CorruptVideoError(request.path, "decoding its audio killed the audio process "
                                                f"{len(exit_codes)} times (exit status {exit_codes})") from None
        finally:
            idle.put(helper)
        self._warnings.show(reply.warnings, stacklevel=2)
        add_remote_reads(reply.remote_reads)
        if reply.error is not None:
            raise reply.error
        assert reply.data is not None and reply.lengths is not None
        output[...] = reply.data
        return reply.lengths, reply.has_audio

    def _start(self) -> queue.SimpleQueue[_Helper]:
        with self._lock:
            if self._idle is None:
                self._idle = queue.SimpleQueue()
                for _ in range(self.count):
                    self._idle.put(_Helper())
            return self._idle

    def close(self) -> None:
        """Stop the helpers (none may be decoding). Idempotent."""
        with self._lock:
            idle, self._idle = self._idle, None
        while idle is not None and not idle.empty():
            idle.get().close()

