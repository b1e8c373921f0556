"""The PTB scanner's pattern store (vlgap.captions._ptb_store): compiled patterns and rule analyses
kept between processes must be exactly what compiling gives, and anything wrong with the file must
fall back to compiling."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from re import _compiler as sre_compile, _parser as sre_parse

from vlgap.captions import _ptb_core as ptb, _ptb_lines, _ptb_rules, _ptb_store
from vlgap.captions._ptb_store import PatternStore

FIXTURES = Path(__file__).parent / "fixtures" / "captions"
sys.path.insert(0, str(FIXTURES))
from corpus import make_corpus, make_fuzz_lines  # noqa: E402

SRC = Path(__file__).resolve().parents[1] / "src"


def _core_sources() -> list[str]:
    """Sources the scanner compiles besides the rules' (each through _ptb_core._compile)."""
    m = _ptb_rules.macros()
    digit = f"[{_ptb_rules.classes()['DIGIT_CLASS']}\\u07c0-\\u07c9]"
    return [f"(?:{m['ABBREV1']}|{m['ABBREV2']}|{m['ABBREV3']}|{m['ACRONYM1']})",
            f"{m['ACRONYM_FOLLOWERS']}(?:{m['SPACENL']}|\\Z)",
            f"[0-9()+\\-\\xa0]*[0-9)]|{digit}{{1,4}}"]


def _analysis(source: str) -> tuple:
    parsed = _ptb_rules._parse(source)
    return _ptb_rules._analyse(parsed, len(parsed.data) > 1)  # (the body is one group, a context follows it)


def _fill(store: PatternStore) -> None:
    """Everything the scanner can ask of the store, asked of `store`."""
    for rule in _ptb_rules.rules():
        store.analysis(rule.source, lambda r=rule: _analysis(r.source))
        store.compiled(rule.source, lambda r=rule: _ptb_rules._parse(r.source))
        if rule.scans:
            store.compiled(rule.source, rule._run_pattern, kind="run")
        elif not rule.greedy_is_longest:
            store.posix(rule.source)
    for source in _core_sources():
        store.compiled(source, lambda s=source: _ptb_rules._parse(s))


def test_stored_patterns_are_the_compilers(tmp_path):
    """A pattern rebuilt from the file equals the standard library's compile of the same source (same
    code, by re.Pattern's equality); a POSIX pattern matches as regex's own; an analysis is the
    rule's own; the second store compiles nothing."""
    first = PatternStore(tmp_path)
    _fill(first)
    assert first.misses and not first.hits
    first.save()
    assert first.path().is_file() and first.path().parent == tmp_path

    second = PatternStore(tmp_path)
    _fill(second)
    assert second.misses == 0 and second.hits == first.misses
    texts = [ptb._to_utf16_units(line) for line in make_fuzz_lines(60, seed=3)]
    for rule in _ptb_rules.rules():
        plain = sre_compile.compile(sre_parse.parse(rule.source))
        assert second.compiled(rule.source, lambda: None) == plain, rule.name
        assert second.compiled(rule.source, lambda: None).groupindex == plain.groupindex
        analysis = second.analysis(rule.source, lambda: None)
        assert analysis[0].lows == rule.first.lows and analysis[0].reach == rule.first.reach, rule.name
        assert analysis[0].others == rule.first.others and analysis[1:] == (
            rule.max_len, rule.fixed, rule.required, analysis[4]), rule.name
        if rule.scans:
            assert second.compiled(rule.source, lambda: None, kind="run") == sre_compile.compile(rule._run_pattern())
        elif not rule.greedy_is_longest:
            import regex
            mine, theirs = second.posix(rule.source), regex.compile("(?p)" + rule.source)
            for text in texts:
                for pos in range(len(text)):
                    a, b = mine.match(text, pos), theirs.match(text, pos)
                    assert (a is None) == (b is None) and (a is None or a.span("b") == b.span("b") and a.end() == b.end())
    for source in _core_sources():
        assert second.compiled(source, lambda: None) == sre_compile.compile(sre_parse.parse(source))


def test_analysis_of_context_widths_matches_the_rules():
    """`_analyse`'s last value (one trailing-context width) is what Rule.scans is made of."""
    for rule in _ptb_rules.rules():
        fixed_context = _analysis(rule.source)[4]
        assert rule.scans == (not rule.greedy_is_longest and fixed_context), rule.name
    assert any(r.scans for r in _ptb_rules.rules()) and any(not r.scans and not r.greedy_is_longest for r in _ptb_rules.rules())


_SCRIPT = """
import json, sys
sys.path.insert(0, {fixtures!r})
from corpus import make_corpus
from vlgap.captions.ptb_tokenize import ptb_tokenize
from vlgap.captions._ptb_store import STORE
refs, preds = make_corpus(400, 3, seed=5, nasty=True)
lines = [c for k in refs for c in refs[k]] + list(preds.values())
out = ptb_tokenize(lines)
print(json.dumps({{"tokens": out, "hits": STORE.hits, "misses": STORE.misses}}))
"""


def _run_fresh(cache: Path) -> dict:
    env = {**os.environ, "VLGAP_CACHE": str(cache), "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _SCRIPT.format(fixtures=str(FIXTURES))], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return {**json.loads(done.stdout), "stderr": done.stderr}


def test_fresh_processes_tokenise_alike_cold_and_warm(tmp_path):
    """The first process on a machine compiles and writes the store, the next one compiles nothing;
    both give the tokens this process gives."""
    cold = _run_fresh(tmp_path)
    warm = _run_fresh(tmp_path)
    assert cold["misses"] > 0 and cold["hits"] == 0
    assert warm["misses"] == 0 and warm["hits"] > 0
    refs, preds = make_corpus(400, 3, seed=5, nasty=True)
    from vlgap.captions.ptb_tokenize import ptb_tokenize

    expected = ptb_tokenize([c for k in refs for c in refs[k]] + list(preds.values()))
    assert cold["tokens"] == expected and warm["tokens"] == expected
    assert "recomputing" not in cold["stderr"] + warm["stderr"]
    assert list((tmp_path / _ptb_store.FOLDER).glob("ptb-*.pickle"))


def test_damaged_file_is_reported_and_rebuilt(tmp_path, capsys):
    store = PatternStore(tmp_path)
    _fill(store)
    store.save()
    data = bytearray(store.path().read_bytes())
    data[len(data) // 2] ^= 0xFF
    store.path().write_bytes(bytes(data))
    again = PatternStore(tmp_path)
    _fill(again)
    assert again.hits == 0 and again.misses == store.misses
    assert "compiled tokenizer patterns" in capsys.readouterr().err  # said why it recompiles
    again.save()
    assert PatternStore(tmp_path).entries().keys() == again.entries().keys()


def test_stored_program_python_refuses_is_compiled_again(tmp_path):
    """A stored program `_sre` rejects (not valid code) is compiled from its source instead."""
    source = _core_sources()[2]
    store = PatternStore(tmp_path)
    store.compiled(source, lambda: _ptb_rules._parse(source))
    flags, code, groups, groupindex, indexgroup = store._entries[("re", source)]
    store._entries[("re", source)] = (flags, b"\xff\xff\xff\xff" * 4, groups, groupindex, indexgroup)
    store.save()
    again = PatternStore(tmp_path)
    got = again.compiled(source, lambda: _ptb_rules._parse(source))
    assert got == sre_compile.compile(sre_parse.parse(source)) and again.misses == 1


def test_unwritable_cache_leaves_patterns_as_compiled(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    store = PatternStore(blocker / "lexer")
    source = _core_sources()[0]
    got = store.compiled(source, lambda: _ptb_rules._parse(source))
    store.save()  # cannot create the folder: nothing raised
    assert not store.enabled and got == sre_compile.compile(sre_parse.parse(source))
    # ... and, the store off, later patterns are compiled as before
    other = _core_sources()[1]
    assert store.compiled(other, lambda: _ptb_rules._parse(other)) == sre_compile.compile(sre_parse.parse(other))


def test_key_names_what_the_programs_depend_on():
    key = PatternStore.key()
    assert {"python", "sre_magic", "regex", "code_sha256"} <= set(key)
    assert PatternStore(Path("x")).path().name == f"ptb-{__import__('vlgap.reuse').reuse.key_digest(key)[:16]}.pickle"


def test_cache_check_reads_the_store_as_a_sealed_artefact(tmp_path):
    from vlgap.cache_check import check_cache

    store = PatternStore(tmp_path / _ptb_store.FOLDER)
    _fill(store)
    store.save()
    check = check_cache(tmp_path)
    assert [f.status for f in check.findings if f.path.endswith(".pickle")] == ["ok"]
    assert not check.problems  # (nothing beside it is taken for a leftover)


def test_scanner_uses_the_store():
    """The rules and the scanner's own patterns come through the module's store."""
    assert _ptb_rules.STORE is _ptb_store.STORE and ptb.STORE is _ptb_store.STORE
    assert _ptb_lines._voiding_chars()[1] == sre_compile.compile(
        sre_parse.parse(f" (?<!\\n )(?=[{''.join(__import__('re').escape(c) for c in sorted(ptb._digits_and_period()))}])"))
