"""docs/own-data.md on the user's kind of data (issue 43, item 6): an item with one caption goes through the
page's caption-scoring script and its `caption-eval` line without `--on-missing drop`, one reference is scored
as coco-caption scores it, and the page shows CPU lines first with CUDA as the alternative."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers.in_process_cli import run_cli

PAGE = Path(__file__).resolve().parent.parent / "docs" / "own-data.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)


def test_one_caption_item_goes_through_the_pages_caption_lines(tmp_path, monkeypatch, capsys):
    from conftest import write_video

    monkeypatch.chdir(tmp_path)
    lines = []
    for i in range(12):
        write_video(tmp_path / "my_videos" / f"clip{i}.mp4", 4, size=16)
        caps = ["a red disc moves right"] if i == 0 else [f"a red disc number {i} moves", f"a disc {i} moves right",
                                                         f"the red disc {i} crosses the frame"]
        lines.append(json.dumps({"id": f"clip{i}", "video": f"my_videos/clip{i}.mp4", "captions": caps}))
    Path("my_data.jsonl").write_text("\n".join(lines) + "\n")
    script = next(b for b in _blocks("python") if "my_predictions.json" in b)
    exec(compile(script, str(PAGE), "exec"), {})
    assert "left out, no caption left as a reference: clip0" in capsys.readouterr().out
    line = next(b for b in _blocks("bash") if "caption-eval" in b).splitlines()[0]
    assert "--on-missing" not in line and "--device" not in line
    code, out, err = run_cli(monkeypatch, capsys, *line.split()[1:], "--bootstrap", "200")
    assert code == 0, err
    assert "N = 11" in out and "95% CI" in out
    assert "warning: small sample: N = 11 < 30" in out


def test_one_reference_is_scored_as_coco_caption_scores_it():
    pytest.importorskip("pycocoevalcap")
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge

    import vlgap

    words = "a red disc moves right across the black square frame slowly".split()
    pred = {str(i): " ".join(words[i % 5: i % 5 + 5]) for i in range(12)}
    refs = {str(i): [" ".join(words[(i + 2) % 6: (i + 2) % 6 + 6])] for i in range(12)}  # one reference each
    ours = vlgap.caption_eval(pred, refs, metrics="bleu,rouge,cider")
    res, gts = {k: [v] for k, v in pred.items()}, refs
    assert ours["BLEU-4"]["score"] == pytest.approx(Bleu(4).compute_score(gts, res, verbose=0)[0][3], abs=1e-9)
    assert ours["ROUGE-L"]["score"] == pytest.approx(Rouge().compute_score(gts, res)[0], abs=1e-9)
    assert ours["CIDEr"]["score"] == pytest.approx(Cider().compute_score(gts, res)[0], abs=1e-9)


def test_page_shows_cpu_first_and_cuda_as_the_alternative():
    bash = [ln for b in _blocks("bash") for ln in b.splitlines() if ln.startswith("vlgap caption-eval")]
    clip = [ln for ln in bash if "--clip" in ln]
    assert len(clip) == 2 and "--device" not in clip[0] and clip[1] == clip[0] + " --device cuda"
    text = PAGE.read_text(encoding="utf-8")
    assert "as many frames as the largest n_f and as many\ncaptions as the largest n_c" in text
    assert "`hf download openai/clip-vit-base-patch32`" in text
