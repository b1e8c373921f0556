"""A report carries its provenance (version, date, command or API call, machine), shows no absolute path
of the machine, draws scores on axes within the metric's range and keeps legends off the data; a slow
check lays the page out in headless Chromium and finds every figure at a readable size."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from vlgap import __version__
from vlgap.io_utils import atomic_write_json
from vlgap.platform_info import cpu_extensions, machine_summary
from vlgap.probe.figures import figure_legend, legend_outside, paired_difference_figure, pyplot, within_range
from vlgap.probe.report import scaling_figure, write_report
from vlgap.provenance import api_call, command, display_path, record, set_command


def _rows(ci_half: float = 0.02) -> list[dict]:
    rows = []
    for nf in (1, 2, 4, 8):
        for nc in (1, 2, 4, 8):
            s = 0.97 - 0.05 / nf - 0.05 / nc
            rows.append({"vision": "v", "text": "t", "n_f": nf, "n_c": nc, "score": s, "ci_lo": s - ci_half,
                         "ci_hi": s + ci_half, "p_value": 0.01, "null_mean": 0.1, "x_layer": 1, "y_layer": 2,
                         "x_layer_name": "", "y_layer_name": "", "n": 64, "k": 5, "chance": 5 / 63,
                         "metric": "mutual_knn"})
    return rows


def test_record_names_version_date_command_and_machine(monkeypatch):
    import contextvars

    def inside():
        assert command() is None
        rec = record("vlgap.sweep")
        assert rec["api"] == "vlgap.sweep" and "command" not in rec
        set_command(["sweep", "my data/man.jsonl", "--out", "runs/a"])
        rec = record("vlgap.sweep")
        assert rec["command"] == "vlgap sweep 'my data/man.jsonl' --out runs/a" and "api" not in rec
        return rec

    rec = contextvars.copy_context().run(inside)
    assert rec["vlgap"] == __version__
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", rec["date"])
    m = rec["machine"]
    assert m == machine_summary() and m["summary"].startswith(m["cpu"])
    assert m["cores"] == os.cpu_count()
    assert all(e in m["summary"] for e in m["extensions"])


def test_outermost_api_call_names_the_run():
    @api_call("vlgap.demo")
    def outer():
        return inner()

    @api_call("vlgap.sweep")
    def inner():
        return record("vlgap.sweep")["api"]

    assert outer() == "vlgap.demo" and inner() == "vlgap.sweep"


def test_cpu_extensions_follow_torchs_probe(monkeypatch):
    import vlgap.platform_info as pi

    monkeypatch.setattr(pi, "cpu_capabilities", lambda: {"avx2": True, "fma3": True, "avx512_f": False,
                                                         "amx_bf16": True})
    assert pi.cpu_extensions() == ["AVX2", "FMA", "AMX-BF16"]
    assert isinstance(cpu_extensions(), list)


def test_display_path_never_shows_the_machines_layout(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("VLGAP_CACHE", str(cache))
    run = tmp_path / "work" / "runs" / "demo"
    assert display_path(cache / "data" / "m.jsonl", run) == "<vlgap cache>/data/m.jsonl"
    assert display_path(tmp_path / "work" / "data" / "m.jsonl", run) == "../../data/m.jsonl"
    assert display_path(run / "sub" / "x.json", run) == "sub/x.json"
    far = display_path("/" + "/".join(f"d{i}" for i in range(6)) + "/m.jsonl", run)
    assert far in (".../m.jsonl",) or far.startswith("~/")
    assert str(tmp_path) not in display_path(cache / "x", run)


def test_report_header_has_provenance_and_no_absolute_paths(tmp_path, monkeypatch):
    import contextvars

    from vlgap.probe.sweep import fit_pairs

    run = tmp_path / "run"
    rows = _rows()
    rec = contextvars.copy_context().run(lambda: (set_command(["sweep", "man.jsonl", "--out", "run"]),
                                                  record("vlgap.sweep"))[1])
    atomic_write_json(run / "sweep.json", {"rows": rows, "description": "manifest ../man.jsonl",
                                           "config": {"n_bootstrap": 10, "n_permutations": 10},
                                           "provenance": rec})
    atomic_write_json(run / "scaling.json", fit_pairs(rows))
    page = write_report(run).read_text()
    header = page[:page.index("<h2>")]
    assert f"run: vlgap</td><td>{__version__}" in header
    assert "run: command</td><td>vlgap sweep man.jsonl --out run" in header
    assert "run: machine</td><td>" + machine_summary()["summary"] in header.replace("&#x27;", "'")
    assert re.search(r"run: date</td><td>\d{4}-\d\d-\d\d \d\d:\d\d UTC", header)
    assert f"written by vlgap {__version__}, " in header
    assert str(tmp_path) not in page
    # a folder written before provenance was recorded says so instead of inventing it
    doc = json.loads((run / "sweep.json").read_text())
    del doc["provenance"]
    atomic_write_json(run / "sweep.json", doc)
    assert "provenance not recorded" in write_report(run).read_text()


def _overlaps(fig, legend, ax) -> bool:
    renderer = fig.canvas.get_renderer()
    a, b = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
    return a.overlaps(b)


def test_scaling_figure_axis_stays_in_range_and_legend_off_the_data():
    rows = _rows(ci_half=0.3)  # intervals that run past 1 (and the points near it)
    for axis in ("n_f", "n_c"):
        fig = scaling_figure(rows, axis, None, "v × t")
        ax = fig.axes[0]
        lo, hi = ax.get_ylim()
        assert 0.0 <= lo and hi <= 1.0
        fig.canvas.draw()
        assert ax.get_legend() is not None and not _overlaps(fig, ax.get_legend(), ax)
    # a metric with no upper bound keeps its padding above the largest value
    fig = scaling_figure([dict(r, metric="lcs_knn", score=3 * r["score"], ci_lo=None, ci_hi=None) for r in rows],
                         "n_f", None, "lcs")
    assert fig.axes[0].get_ylim()[1] > max(3 * r["score"] for r in rows)


def test_within_range_pads_inside_the_bounds():
    plt = pyplot()
    fig, ax = plt.subplots()
    within_range(ax, [0.2, 0.5, np.nan, 1.4], (0.0, 1.0))
    assert ax.get_ylim() == pytest.approx((0.2 - 0.06, 1.0))
    within_range(ax, [0.5, 0.5], (None, None))  # one value: a span around it
    lo, hi = ax.get_ylim()
    assert lo < 0.5 < hi
    plt.close(fig)


def test_paired_and_panel_legends_sit_below_the_axis_labels():
    rows = [{"score_a": 0.4, "ci_a": [0.3, 0.5], "score_b": 0.35, "ci_b": [0.3, 0.45], "name_a": "a",
             "name_b": "b", "chance": 0.1, "difference": 0.05, "ci": [0.0, 0.1]}]
    fig = paired_difference_figure(rows, ["v × t"], "title", "difference")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    leg = fig.axes[0].get_legend()
    label = fig.axes[0].xaxis.label.get_window_extent(renderer)
    assert leg.get_window_extent(renderer).y1 <= label.y0 + 1  # under the axis label, not over it
    assert not _overlaps(fig, leg, fig.axes[0]) and not _overlaps(fig, leg, fig.axes[1])
    plt = pyplot()
    plt.close(fig)
    fig, axes = plt.subplots(1, 2)
    for ax in axes:
        ax.plot([0, 1], [0, 1], label="same")
    leg = figure_legend(fig, axes)
    fig.canvas.draw()
    assert len(leg.get_texts()) == 1 and not any(_overlaps(fig, leg, ax) for ax in axes)
    assert legend_outside(plt.subplots()[1]) is None  # nothing labelled, no legend
    plt.close("all")


@pytest.mark.slow
def test_report_lays_out_readably_in_chromium(tmp_path):
    """Headless Chromium lays the page out; every figure is drawn at 80 % of its size or more (a wide
    figure is not shrunk to half) and nothing runs past the page's width."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("no Chromium on this machine (Debian: apt-get install chromium)")
    from vlgap.probe.sweep import fit_pairs
    from vlgap.probe.test_of_time import write_test_of_time_section  # noqa: F401 - a wide figure's module

    run = tmp_path / "run"
    rows = _rows()
    atomic_write_json(run / "sweep.json", {"rows": rows, "description": "manifest m.jsonl",
                                           "config": {"n_bootstrap": 10, "n_permutations": 10},
                                           "provenance": record("test")})
    atomic_write_json(run / "scaling.json", fit_pairs(rows))
    plt = pyplot()
    from vlgap.probe.report import save_figure, write_section

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))  # as wide as the temporal sections' figures
    for ax in axes:
        ax.plot([1, 2], [0.2, 0.4], label="a")
    figure_legend(fig, axes)
    write_section(run, "wide", "A wide figure", "<p>two panels</p>", [save_figure(fig, run, "figures/wide.png")])
    page = write_report(run)
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text().replace("</body>", """<script>
window.addEventListener('load', () => {
  const out = [...document.images].map(i => [i.naturalWidth, i.getBoundingClientRect().width]);
  const pre = document.createElement('pre'); pre.id = 'layout';
  pre.textContent = JSON.stringify({imgs: out, scroll: document.documentElement.scrollWidth,
                                    width: window.innerWidth});
  document.body.appendChild(pre);
});</script></body>"""))
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
           "--window-size=1280,900", "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()]
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    found = re.search(r'<pre id="layout">(.*?)</pre>', dom, re.S)
    assert found, "the page's layout script did not run"
    layout = json.loads(found.group(1).replace("&quot;", '"'))
    assert len(layout["imgs"]) == 3  # n_f and n_c figures (no score matrices here) and the wide one
    for natural, shown in layout["imgs"]:
        assert shown >= 0.8 * min(natural, layout["width"] - 40), (natural, shown)
    assert layout["scroll"] <= layout["width"]
