"""Picture naming rules of `--images DIR` / `--image-pattern` (vlgap.captions.pictures): COCO 2014 and
2017 names, <id>.<ext>, explicit patterns, and one-line errors that name the item and the names tried."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from in_process_cli import refused
from tiny_clip import make_tiny_clip, write_images

from vlgap.captions.pictures import PictureFolder, check_pattern
from vlgap.errors import BadItemError, VlgapError


def _touch(folder: Path, *names: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"x")
    return folder


def test_default_rules_find_plain_coco2017_and_coco2014_names(tmp_path):
    folder = _touch(tmp_path / "val2014", "img3.png", "42.JPG", "000000000007.jpg",
                    "COCO_val2014_000000391895.jpg", "COCO_train2014_000000000009.png", "notes.txt",
                    "COCO_val2014_123.jpg")
    pics = PictureFolder(folder)
    assert pics.path("img3").name == "img3.png"
    assert pics.path(42).name == "42.JPG"
    assert pics.path("7").name == "000000000007.jpg"                  # COCO 2017: 12-digit name
    assert pics.path(391895).name == "COCO_val2014_000000391895.jpg"  # COCO 2014: any split
    assert pics.path("000391895").name == "COCO_val2014_000000391895.jpg"
    assert pics.path("9").name == "COCO_train2014_000000000009.png"
    with pytest.raises(BadItemError) as err:
        pics.path(123)  # "COCO_val2014_123.jpg" is not a COCO name (12 digits)
    message = str(err.value)
    assert "\n" not in message and message.startswith("item '123': no picture in ")
    assert ("tried 123.<jpg|jpeg|png|webp>, 000000000123.<jpg|jpeg|png|webp>, "
            "COCO_<split>_000000000123.<jpg|jpeg|png|webp>") in message and "--image-pattern" in message
    with pytest.raises(BadItemError, match=r"item 'cat': no picture in .*\(tried cat\.<jpg\|jpeg\|png\|webp>\);"):
        pics.path("cat")  # not a number: only the first rule applies


def test_first_rule_wins_and_two_splits_are_ambiguous(tmp_path):
    folder = _touch(tmp_path / "both", "5.jpg", "COCO_val2014_000000000005.jpg",
                    "COCO_val2014_000000000006.jpg", "COCO_test2015_000000000006.jpg")
    pics = PictureFolder(folder)
    assert pics.path(5).name == "5.jpg"
    with pytest.raises(BadItemError, match=r"item '6': several pictures .*COCO_test2015_000000000006.jpg, "
                                           r"COCO_val2014_000000000006.jpg.*--image-pattern"):
        pics.path(6)
    assert PictureFolder(folder, "COCO_val2014_{id:012d}.jpg").path(6).name == "COCO_val2014_000000000006.jpg"


def test_explicit_patterns(tmp_path):
    folder = _touch(tmp_path / "p", "000000391895.jpg", "COCO_val2014_000000391895.jpg", "frames/v1/0001.png",
                    "a-b.jpeg", "00ff.png")
    assert PictureFolder(folder, "{id:012d}.jpg").path("391895").name == "000000391895.jpg"
    assert PictureFolder(folder, "COCO_val2014_{id:012d}.jpg").path(391895).name == "COCO_val2014_000000391895.jpg"
    assert PictureFolder(folder, "frames/{id}/0001.png").path("v1") == folder / "frames" / "v1" / "0001.png"
    assert PictureFolder(folder, "{id}.jpeg").path("a-b").name == "a-b.jpeg"
    assert PictureFolder(folder, "{id:04x}.png").path(255).name == "00ff.png"
    pics = PictureFolder(folder, "{id:012d}.jpg")
    with pytest.raises(BadItemError, match=r"^item '5': no picture 000000000005\.jpg in .* \(--image-pattern "
                                           r"'\{id:012d\}\.jpg'\)$"):
        pics.path(5)
    with pytest.raises(BadItemError, match="item 'cat': --image-pattern .* formats the id as a number"):
        pics.path("cat")


@pytest.mark.parametrize("pattern, message", [
    ("photo.jpg", "has no {id} field"),
    ("{image}.jpg", "field {image} is not known"),
    ("{id.jpg", "is not a format string"),
    ("{id:q}.jpg", "format {id:q} is not valid"),
    ("/abs/{id}.jpg", "inside the --images folder"),
    ("../{id}.jpg", "inside the --images folder"),
])
def test_bad_patterns_are_one_line_errors(pattern, message):
    with pytest.raises(VlgapError) as err:
        check_pattern(pattern)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_caption_eval_reads_coco_named_folders(tmp_path, capsys):
    """The same pictures named <id>.png, COCO 2014's way and through a pattern give the same CLIPScores;
    a missing one stops the CLI with exit 2 and one line."""
    import vlgap

    ids = [391895, 522418, 184613]
    clip = make_tiny_clip(tmp_path / "clip", max_length=77)
    plain = write_images(tmp_path / "plain", ids)
    coco = tmp_path / "val2014"
    coco.mkdir()
    for p in plain.iterdir():
        (coco / f"COCO_val2014_{int(p.stem):012d}{p.suffix}").write_bytes(p.read_bytes())
    preds = [{"image_id": i, "caption": c} for i, c in zip(ids, ["a dog", "two cats on a sofa", "a red bus"])]
    named = tmp_path / "named"  # one layout no default rule knows (Pillow reads the .jpg by its content)
    named.mkdir()
    for p in plain.iterdir():
        (named / f"pic_{int(p.stem):06d}.png").write_bytes(p.read_bytes())
    scores = [[r["CLIPScore"] for r in vlgap.caption_eval(preds, None, "clipscore", images=folder, clip=f"hf:{clip}",
                                                          per_item=True, image_pattern=pattern)["per_item"]]
              for folder, pattern in [(plain, None), (coco, None), (named, "pic_{id:06d}.png")]]
    assert scores[0] == scores[1] == scores[2]
    with pytest.raises(VlgapError, match="item '391895': no picture in"):
        vlgap.caption_eval(preds, None, "clipscore", images=named, clip=f"hf:{clip}")
    pred_file = tmp_path / "preds.json"
    pred_file.write_text(json.dumps(preds + [{"image_id": 7, "caption": "a cat"}]))
    capsys.readouterr()  # (the model writer's progress bar)
    line = refused(capsys, "caption-eval", "--pred", pred_file, "--images", coco, "--clip", f"hf:{clip}",
                   "--metrics", "clipscore")
    assert "item '7': no picture in" in line and "COCO_<split>_000000000007" in line
    line = refused(capsys, "caption-eval", "--pred", pred_file, "--images", coco, "--clip", f"hf:{clip}",
                   "--metrics", "clipscore", "--image-pattern", "{name}.jpg")
    assert "field {name} is not known" in line
