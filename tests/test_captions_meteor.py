"""The METEOR jar wrapper never hangs: missing Java or jar, a silent, crashing or babbling JVM all
end in a VlgapError. Fake `java` scripts stand in for the JVM; the real jar is tested in
test_captions_metrics.py (@pytest.mark.java)."""
from __future__ import annotations

import stat
import sys

import numpy as np
import pytest

from vlgap.captions.evaluate import caption_eval
from vlgap.captions.meteor import MeteorJar, find_java, find_jar, meteor_from_statistics, parse_statistics
from vlgap.errors import VlgapError


def _fake_java(tmp_path, body: str):
    script = tmp_path / "java"
    script.write_text(f"#!{sys.executable}\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    jar = tmp_path / "meteor-1.5.jar"
    jar.write_bytes(b"not a jar")
    return str(script), jar


def test_missing_java_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(VlgapError, match="needs a Java runtime"):
        find_java()


def test_missing_jar_is_a_clear_error(tmp_path):
    with pytest.raises(VlgapError, match="METEOR jar not found"):
        find_jar(tmp_path / "nope.jar")


def test_silent_jvm_times_out(tmp_path):
    java, jar = _fake_java(tmp_path, "import time; time.sleep(60)")
    m = MeteorJar(jar=jar, java=java, timeout=1.0)
    # the wrapper's own timeout ends the call (the fake JVM would sleep 60 s); no wall-clock assert
    with pytest.raises(VlgapError, match="gave no answer within 1 s"):
        m.statistics(["a dog"], [["a dog runs"]])
    assert m._proc is None  # killed, not left behind


def test_crashing_jvm_reports_its_messages(tmp_path):
    java, jar = _fake_java(tmp_path, "import sys; sys.stderr.write('Exception in thread main\\n'); sys.exit(3)")
    m = MeteorJar(jar=jar, java=java, timeout=120.0)  # ends as soon as the JVM exits; generous for loaded CI
    with pytest.raises(VlgapError, match=r"stopped \(exit code 3\)"):
        m.statistics(["a dog"], [["a dog runs"]])


def test_babbling_jvm(tmp_path):
    java, jar = _fake_java(tmp_path, "import sys\nwhile sys.stdin.readline():\n    print('garbage\\ngarbage', flush=True)")
    m = MeteorJar(jar=jar, java=java, timeout=120.0)  # ends at the first garbage line; generous for loaded CI
    with pytest.raises(VlgapError, match="not a score"):
        m.evaluate(["1 2 3"])
    m.close()


def test_line_breaks_are_refused_before_reaching_the_jar(tmp_path):
    java, jar = _fake_java(tmp_path, "import time; time.sleep(60)")
    m = MeteorJar(jar=jar, java=java, timeout=1.0)
    with pytest.raises(VlgapError, match="must not contain line breaks"):
        m.statistics(["a\ndog"], [["a dog"]])


def test_meteor_skipped_with_a_note_only_when_not_requested(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    preds = {"1": "a dog runs"}
    refs = {"1": ["a dog is running", "dog runs"]}
    result = caption_eval(preds, refs)
    assert "METEOR" not in result and any("METEOR skipped" in n for n in result["notes"])
    assert "CIDEr" in result
    with pytest.raises(VlgapError, match="needs a Java runtime"):
        caption_eval(preds, refs, ["meteor"])


def test_statistics_reduction_by_hand():
    # one item, 5 test / 6 reference words, exact 2+2 and stem 1 matches, 2 chunks (jar output)
    line = "5.0 6.0 2.0 3.0 2.0 2.0 2.0 2.0 1.0 1.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0 2.0 5.0 5.0"
    stats = parse_statistics([line])
    twl, rwl = 0.75 * 3 + 0.25 * 2, 0.75 * 3 + 0.25 * 3
    wm = 2 * 0.75 + 1 * 0.6 * 0.75 + 2 * 0.25
    p, r = wm / twl, wm / rwl
    f = 1 / (0.15 / p + 0.85 / r)
    frag = 2 / 5
    assert meteor_from_statistics(stats)[0] == pytest.approx(f * (1 - 0.6 * frag ** 0.2), abs=1e-12)


def test_perfect_items_do_not_add_chunks():
    perfect = "3.0 3.0 1.0 1.0 2.0 2.0 1.0 1.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0 1.0 3.0 3.0"
    stats = parse_statistics([perfect])
    assert stats[0, -3] == 0.0 and meteor_from_statistics(stats)[0] == pytest.approx(1.0)
    assert np.isfinite(meteor_from_statistics(stats.sum(axis=0)))
