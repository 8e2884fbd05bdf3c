"""The charts of docs/performance.md, drawn from the result files in benchmarks/results/.

Each chart shows the figures of one table of that page, from the same file, so that a new result
file and its table come with a redrawn chart: run this script after replacing a result file and
commit the SVG files it writes. It needs matplotlib only (not vclip, not a GPU).

- ``train.svg``: the train workload, vclip's defaults against SPDL, clips/s per video set
  (``train.json``);
- ``train_all_tools.svg``: the train workload with every tool of one run (``train_all_tools.json``);
- ``e2e.svg``: r3d_18 at 112x112 trained with each loader feeding it, samples/s against the model's
  own rate (``e2e.json``);
- ``scenes_cpu.svg``: shot boundaries on the CPU, frames/s against PySceneDetect at three picture
  sizes, one video at a time and a process per core (``scenes_cpu.json``, ``scenes_cpu_480x270.json``,
  ``scenes_cpu_854x480.json``).

    python benchmarks/charts.py [--results benchmarks/results] [--out docs/images]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
VCLIP_COLOUR, OTHER_COLOUR, THIRD_COLOUR = "#3f51b5", "#9e9e9e", "#cfcfcf"
STYLE = {
    "svg.fonttype": "none",  # text stays text: small files that take the page's font
    "svg.hashsalt": "vclip",  # the same ids on every run: a redrawn chart differs only where its figures do
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
SET_NAMES = {
    "360p": "640x360", "1080p": "1920x1080",
    "720p-h264-gop250": "720p H.264\nkeyframe every 250", "720p-hevc-gop250": "720p HEVC\nkeyframe every 250",
}


def _load(results: Path, name: str) -> dict:
    return json.loads((results / name).read_text())


def _save(figure, out: Path, name: str) -> Path:
    path = out / name
    figure.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    plt.close(figure)
    return path


def _label_bars(axes, bars, digits: int = 0) -> None:
    for bar in bars:
        axes.annotate(f"{bar.get_height():,.{digits}f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                      ha="center", va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points")


def train_chart(results: Path, out: Path) -> Path:
    """vclip's defaults against SPDL, one panel per video set (each its own scale)."""
    train = _load(results, "train.json")
    sets = train["sets"]
    names = [name for name in SET_NAMES if name in sets]
    figure, panels = plt.subplots(1, len(names), figsize=(2.0 * len(names), 2.6))
    for axes, name in zip(panels, names):
        tools = sets[name]["tools"]
        rates = [tools["vclip-default"]["clips_per_second"], tools["spdl"]["clips_per_second"]]
        bars = axes.bar(["vclip", "SPDL"], rates, color=[VCLIP_COLOUR, OTHER_COLOUR], width=0.6)
        _label_bars(axes, bars)
        axes.set_title(SET_NAMES[name], fontsize=9)
        axes.set_ylim(0, max(rates) * 1.18)
        axes.tick_params(axis="y", labelsize=7)
    panels[0].set_ylabel("clips/s")
    gpu = train["environment"]["gpu"].split(",")[0].removeprefix("NVIDIA ")
    figure.suptitle(f"The train workload: vclip's defaults against SPDL 0.8 (one {gpu})", fontsize=10)
    figure.tight_layout()
    return _save(figure, out, "train.svg")


def train_all_tools_chart(results: Path, out: Path) -> Path:
    """Every tool of one run, one panel per video set, fastest first."""
    names = {"vclip[processes=4,workers=4,in_flight=4]": "vclip, 4 decode processes",
             "vclip[workers=12,in_flight=4]": "vclip, 12 threads", "spdl": "SPDL 0.8",
             "pynvc": "PyNvVideoCodec", "pyav": "PyAV + OpenCV", "decord": "decord + OpenCV"}
    sets = _load(results, "train_all_tools.json")["sets"]
    figure, panels = plt.subplots(1, 2, figsize=(8.0, 2.6))
    for axes, name in zip(panels, ("360p", "1080p")):
        tools = sets[name]["tools"]
        rows = sorted(((tools[key]["clips_per_second"], label) for key, label in names.items()), reverse=True)
        labels = [label for _, label in rows][::-1]
        rates = [rate for rate, _ in rows][::-1]
        colours = [VCLIP_COLOUR if label.startswith("vclip") else OTHER_COLOUR for label in labels]
        bars = axes.barh(labels, rates, color=colours, height=0.6)
        for bar in bars:
            axes.annotate(f"{bar.get_width():,.1f}", (bar.get_width(), bar.get_y() + bar.get_height() / 2),
                          va="center", fontsize=8, xytext=(3, 0), textcoords="offset points")
        axes.set_xlim(0, max(rates) * 1.2)
        axes.set_xlabel("clips/s")
        axes.set_title(SET_NAMES[name], fontsize=9)
    figure.tight_layout()
    return _save(figure, out, "train_all_tools.svg")


def scenes_cpu_chart(results: Path, out: Path) -> Path:
    """The scene method on the CPU against PySceneDetect, grouped by picture size."""
    files = {"480x270": "scenes_cpu_480x270.json", "640x360": "scenes_cpu.json", "854x480": "scenes_cpu_854x480.json"}
    runs = {size: _load(results, name) for size, name in files.items()}
    detectors = (("vclip", "vclip_cpu", VCLIP_COLOUR),
                 ("PySceneDetect adaptive", "pyscenedetect_adaptive", OTHER_COLOUR),
                 ("PySceneDetect content", "pyscenedetect_content", THIRD_COLOUR))
    figure, panels = plt.subplots(1, 2, figsize=(8.0, 2.8), sharey=True)
    for axes, (title, part, suffix) in zip(panels, (("one video at a time", "one_video_at_a_time", ""),
                                                   ("a process per core (2)", "folder", " x2 processes"))):
        width = 0.26
        for number, (label, key, colour) in enumerate(detectors):
            rates = [runs[size][part][key + suffix]["frames_per_second"] for size in files]
            positions = [column + (number - 1) * width for column in range(len(files))]
            axes.bar(positions, rates, width=width, color=colour, label=label)
        axes.set_xticks(range(len(files)), list(files))
        axes.set_title(title, fontsize=9)
        axes.grid(axis="y", color="#e0e0e0", linewidth=0.6)
        axes.set_axisbelow(True)
    panels[0].set_ylabel("frames/s")
    handles, labels = panels[0].get_legend_handles_labels()
    figure.suptitle("Shot boundaries on a 2-core CPU: vclip against PySceneDetect 0.7.2", fontsize=10)
    figure.tight_layout(rect=(0, 0.08, 1, 1))
    figure.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    return _save(figure, out, "scenes_cpu.svg")


E2E_LABELS = {
    "model_alone": "the model alone", "vclip-default": "vclip defaults", "vclip-baseline": "vclip aa01f66 defaults",
    "vclip-short-epochs": "vclip, epochs of 2 batches", "vclip-one-clip-long-epochs": "vclip, same clips, long epochs",
    "vclip-repeated-2": "vclip, repeated augmentation 2",
    "spdl": "SPDL 0.8", "decord-dataloader": "decord DataLoader",
}


def e2e_chart(results: Path, out: Path) -> Path:
    run = _load(results, "e2e.json")["runs"]["r3d_18@112"]["tools"]
    tools = [tool for tool in E2E_LABELS if "samples_per_second" in run.get(tool, {})]
    figure, axes = plt.subplots(figsize=(6.4, 2.8))
    rates = [run[tool]["samples_per_second"] for tool in tools]
    colours = [OTHER_COLOUR if tool == "model_alone" else VCLIP_COLOUR if tool.startswith("vclip") else THIRD_COLOUR
               for tool in tools]
    bars = axes.barh([E2E_LABELS[tool] for tool in tools], rates, color=colours)
    axes.invert_yaxis()
    axes.set_xlabel("samples/s, r3d_18 at 112x112, batch 32 (bf16, one H100)")
    for bar in bars:
        axes.annotate(f"{bar.get_width():,.0f}", (bar.get_width(), bar.get_y() + bar.get_height() / 2),
                      ha="left", va="center", fontsize=8, xytext=(2, 0), textcoords="offset points")
    figure.tight_layout()
    return _save(figure, out, "e2e.svg")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    arguments = parser.parse_args()
    arguments.out.mkdir(parents=True, exist_ok=True)
    with plt.rc_context(STYLE):
        for draw in (train_chart, train_all_tools_chart, e2e_chart, scenes_cpu_chart):
            print(draw(arguments.results, arguments.out))


if __name__ == "__main__":
    main()
