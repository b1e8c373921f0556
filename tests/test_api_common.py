"""A common test over the whole Python API (issue 44), the counterpart of tests/test_cli_common.py.

Part 1 walks every name of `vlgap.__all__` and every parameter of each function, reads its type hint and
generates the values that hint rules out (None where None is not allowed, a bool for an int, a string for a
number, a bool or a list, a dict for a list, a number for a string, a choice that is not one, an object of no
kind at all), then calls the public function with each of them, every other required argument at a valid
sample of its hint. The function's body is replaced by a stand-in (`vlgap.arguments._call_body`), so nothing
loads a model or reads a file: a value that gets through fails the test instead of starting work. Each must
be refused with one VlgapError (or TypeError) naming the argument.

Part 2 is for the arguments the hints cannot judge (arrays, tables, caption lists: Any or no hint): a small
table of valid calls per function, and every data argument replaced by None, a dict, a generator, a string,
an array of strings, an empty array, a constant array, a scaled one. The real function runs (small inputs):
a refusal must be a one-line VlgapError (or TypeError) naming the argument, never a traceback from inside
numpy or torch; a constant input is refused or carries a warning (vlgap.caveats), never a silent number; a
scaled one gives the same result (the scale-free statistics) or a refusal that says why, and never a numpy
overflow warning.
"""
from __future__ import annotations

import collections.abc
import inspect
import os
import re
import types
import typing
import warnings
from pathlib import Path

import numpy as np
import pytest

import vlgap
from vlgap import arguments
from vlgap.caveats import DegenerateWarning, warning_lines
from vlgap.errors import VlgapError

API = {name: getattr(vlgap, name) for name in vlgap.__all__ if name != "__version__"}
FUNCTIONS = {name: f for name, f in API.items() if not isinstance(f, type)}
CLASSES = {name: c for name, c in API.items() if isinstance(c, type)}


class Reached(Exception):
    """The function's body was called: every argument passed the door."""


# ---- part 1: generated from the type hints --------------------------------------------------------

SEQUENCES = (list, tuple, collections.abc.Sequence, collections.abc.Iterable, collections.abc.Collection, set,
             frozenset, collections.abc.Set)


def members(tp) -> list:
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        return [m for part in typing.get_args(tp) for m in members(part)]
    return [tp]


def kind(m) -> str:
    origin = typing.get_origin(m)
    if m is None or m is type(None):
        return "none"
    if origin is typing.Literal:
        return "literal"
    if m is bool:
        return "bool"
    if m is int:
        return "int"
    if m is float:
        return "float"
    if m is str:
        return "str"
    if m in (Path, os.PathLike) or origin is os.PathLike:
        return "path"
    if origin in (dict, collections.abc.Mapping) or m in (dict, collections.abc.Mapping):
        return "map"
    if origin is collections.abc.Callable or m is collections.abc.Callable:
        return "callable"
    if origin in SEQUENCES or m in SEQUENCES:
        return "seq"
    if isinstance(m, type) and m is not object:
        try:
            isinstance(0, m)
        except TypeError:
            return "any"  # a protocol: not judged
        return "class"
    return "any"


def bad_values(tp) -> list[tuple[str, object]]:
    """The values the hint `tp` rules out, each with a label (no value if any member is unjudged: Any)."""
    ms = members(tp)
    kinds = {kind(m) for m in ms}
    if "any" in kinds or tp is arguments._NOT_CHECKED:
        return []
    numbers, texts = kinds & {"int", "float"}, kinds & {"str", "path", "literal"}
    out = [("an object of no kind", object())]
    if "none" not in kinds:
        out.append(("None", None))
    if "int" in kinds and "bool" not in kinds and "float" not in kinds:
        out.append(("a bool for an int", True))
        out.append(("a fraction for an int", 2.5))
    if numbers and not texts:
        out.append(("a string for a number", "10"))
    if "bool" in kinds and not texts:
        out.append(("a string for a bool", "false"))
        if not numbers:
            out.append(("an int for a bool", 1))
    if "seq" in kinds and not texts:
        out.append(("a string for a list", "a b"))
    if "seq" in kinds and "map" not in kinds:
        out.append(("a dict for a list", {"a": 1}))
    if kinds & {"str", "path"} and not numbers and "seq" not in kinds and "class" not in kinds:
        out.append(("a number for a string", 5))
    if "map" in kinds and "seq" not in kinds and "class" not in kinds:
        out.append(("a list for a dict", [1, 2]))
    if "literal" in kinds and not kinds & {"str", "path"}:
        out.append(("not a choice", "no-such-choice"))
    seqs = [m for m in ms if kind(m) == "seq" and typing.get_args(m)]
    if seqs and all(kind(typing.get_args(m)[0]) == "str" for m in seqs) and not numbers:
        out.append(("a number inside a list of strings", [5]))
    if seqs and all(kind(typing.get_args(m)[0]) == "int" for m in seqs) and not texts:
        out.append(("a string inside a list of ints", ["1"]))
    return out


def sample(tp):
    """A value the hint `tp` allows (for the other required arguments of a call)."""
    for m in members(tp):
        k = kind(m)
        if k in ("any",):
            return "x"
        if k == "none":
            continue
        if k == "literal":
            return typing.get_args(m)[0]
        if k in ("str", "path"):
            return "x"
        if k == "int":
            return 1
        if k == "float":
            return 0.5
        if k == "bool":
            return False
        if k == "map":
            return {}
        if k == "callable":
            return print
        if k == "seq":
            args = typing.get_args(m)
            inner = sample(args[0]) if args and args[0] is not Ellipsis else "x"
            return (inner,) * len(args) if typing.get_origin(m) is tuple and args and args[-1] is not Ellipsis \
                else [inner]
        if k == "class":
            if issubclass(m, np.ndarray):
                return np.zeros((2, 2))
            if m.__module__.startswith("torch"):
                import torch

                return torch.zeros(2, 2) if m is torch.Tensor else torch.float32
            return object.__new__(m)
    return None


def hint_cases(callables: dict):
    """(name, parameter, bad value) for every parameter of every callable (functions: the checked one's
    original, whose signature and hints the door reads; classes: the class)."""
    cases = []
    for name, obj in sorted(callables.items()):
        sig, hints = arguments._plan(obj if isinstance(obj, type) else obj.__wrapped__)
        for pname, p in sig.parameters.items():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            for label, value in bad_values(hints[pname]):
                cases.append(pytest.param(name, pname, value, id=f"{name}-{pname}-{label}"))
    return cases


def call_with(name: str, pname: str, value):
    func = FUNCTIONS[name]
    sig, hints = arguments._plan(func.__wrapped__)
    args, kwargs = [], {}
    for q, p in sig.parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if q == pname:
            v = value
        elif p.default is p.empty:
            v = sample(hints[q])
        else:
            continue
        if p.kind == p.POSITIONAL_ONLY:
            args.append(v)
        else:
            kwargs[q] = v
    return func(*args, **kwargs)


@pytest.fixture
def stub(monkeypatch):
    def body(func, args, kwargs):
        raise Reached(func.__name__)

    monkeypatch.setattr(arguments, "_call_body", body)


HINT_CASES = hint_cases(FUNCTIONS)


def test_the_walk_finds_every_function_and_many_cases():
    assert len(FUNCTIONS) >= 100 and len(HINT_CASES) >= 1000
    assert all(getattr(f, "__vlgap_checked__", False) for f in FUNCTIONS.values())


@pytest.mark.parametrize("name, pname, value", HINT_CASES)
def test_a_value_its_hint_rules_out_is_refused_by_name(stub, name, pname, value):
    with pytest.raises((VlgapError, TypeError)) as err:
        call_with(name, pname, value)
    assert re.search(rf"\b{re.escape(pname)}\b", str(err.value)), str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_valid_samples_pass_the_door(stub, name):
    """The other half: a call at valid samples of every required argument reaches the body (the door does
    not refuse what its hints allow)."""
    func = FUNCTIONS[name]
    sig, hints = arguments._plan(func.__wrapped__)
    required = [q for q, p in sig.parameters.items() if p.default is p.empty
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    with pytest.raises(Reached):
        call_with(name, required[0], sample(hints[required[0]])) if required else func()


def test_messages_say_what_would_be_valid(stub):
    with pytest.raises(VlgapError, match=r"^align\(\): k='10' \(a str\): expected an integer"):
        vlgap.align(np.zeros((3, 2)), np.zeros((3, 2)), k="10")
    with pytest.raises(VlgapError, match=r"ptb_tokenize\(\): captions='a dog' \(a str\): expected a list of strings"):
        vlgap.ptb_tokenize("a dog")
    with pytest.raises(VlgapError, match=r"read_manifest\(\): path=None: expected a path"):
        vlgap.read_manifest(None)
    with pytest.raises(VlgapError, match=r"gap\(\): ci_method='x' \(a str\): expected one of 'bca', 'percentile'"):
        vlgap.gap([1], [2], ci_method="x")


def test_an_element_type_is_said_in_words():
    """Iterable[int] read "a list (integer (not a bool or a string)) (not a string)" (issue 44's rerun)."""
    with pytest.raises(VlgapError, match=r"^extract\(\): n_frames='12' \(a str\): expected a list of integers \(not a "
                                         r"string\) or None$"):
        vlgap.extract("m.jsonl", "tv", n_frames="12")


def test_a_side_that_holds_no_array_is_named_as_what_it_is():
    """gap(None, B) said "A: expected a numeric array [N, D], got dtype object" and frechet_distance('a', B)
    "got dtype <U1": numpy's view of the value, not the value (issue 44's rerun)."""
    x = np.zeros((3, 2))
    with pytest.raises(VlgapError, match=r"^a: expected the path of a feature file .* or an array \[N, D\] \(numpy or "
                                         r"torch\), got None$"):
        vlgap.gap(None, x)
    with pytest.raises(VlgapError, match=r"^A: expected a numeric array \[N, D\] \(numpy or torch\), got a str$"):
        vlgap.frechet_distance("a", x)
    with pytest.raises(VlgapError, match=r"^A: expected a numeric array \[N, D\], got dtype <U1$"):
        vlgap.frechet_distance(np.array([["a"]]), x)  # an array keeps its dtype in the message


def test_a_renamed_keyword_keeps_its_own_message():
    with pytest.raises(VlgapError, match="the keyword 'bootstrap' is now n_bootstrap"):
        vlgap.align(np.zeros((3, 2)), np.zeros((3, 2)), bootstrap=5)


# ---- part 2: data arguments, real calls -----------------------------------------------------------

RNG = np.random.default_rng(0)
X = RNG.normal(size=(40, 6))
Y = X @ RNG.normal(size=(6, 5)) + 0.3 * RNG.normal(size=(40, 5))
B = RNG.normal(size=(40, 6)) + 0.5
V = RNG.normal(size=(40,))


def _gen():
    yield X


#: the bad data values every data argument is tried with (label -> value); "constant" and "scaled" are judged
#: apart (see DATA)
BAD = {
    "None": None,
    "a dict": {"x": X},
    "a generator": "generator",
    "a string": "not an array",
    "an array of strings": np.array([["a", "b"], ["c", "d"]]),
    "an empty array": np.empty((0, 6)),
}

#: function -> (valid keyword call, data arguments, what a constant input gives, what a scale 1e-30 / 1e30 gives)
#: constant: "error" (refused) or "warns" (a result with warnings); scaled: "same" (the result does not depend on
#: a global scale), "error" (refused, saying why) or "runs" (a value that legitimately scales, no overflow)
DATA = {
    "align": (dict(X=X, Y=Y, k=5), ["X", "Y"], "error", "same"),
    "layer_search": (dict(xs=[X], ys=[Y], k=5), ["xs", "ys"], "error", "same"),
    "precompute_layers": (dict(xs=[X], k=5), ["xs"], "runs", "runs"),
    "mmd2": (dict(a=X, b=B), ["a", "b"], "warns", "runs"),
    "mmd_test": (dict(a=X, b=B, n_permutations=20, n_bootstrap=20), ["a", "b"], "warns", "runs"),
    "gap": (dict(a=X, b=B, n_permutations=20, n_bootstrap=20), ["a", "b"], "warns", "runs"),
    "frechet_distance": (dict(a=X, b=B), ["a", "b"], "warns", "runs"),
    "witness": (dict(a=X, b=B), ["a", "b"], "warns", "runs"),
    "c2st": (dict(a=X, b=B, n_permutations=5), ["a", "b"], "warns", "runs"),
    "intrinsic_dimension": (dict(x=X, n_bootstrap=10), ["x"], "error", "same"),
    "knn_classify_cv": (dict(x=X, y=["a", "b"] * 20), ["x"], "runs", "same"),
    "linear_probe_cv": (dict(x=X, y=["a", "b"] * 20), ["x"], "runs", "runs"),
    "retrieval_scores": (dict(video=X, text=X + 0.1, n_bootstrap=10), ["video", "text"], "runs", "same"),
    "bootstrap_ci": (dict(data=V, n_bootstrap=50), ["data"], "runs", "runs"),
    "sign_flip_inference": (dict(differences=V, n_permutations=100), ["differences"], "runs", "runs"),
    "compare": (dict(scores=V, scores_b=V + 0.1, n_bootstrap=20, n_permutations=100), ["scores", "scores_b"],
                "runs", "runs"),
    "fit_line": (dict(x=V, y=2 * V + 0.1, n_bootstrap=20), ["x", "y"], "error", "runs"),
    "loo_linear": (dict(x=V, y=2 * V), ["x", "y"], "runs", "runs"),
    "pool_frames": (dict(per_frame=X[:4]), ["per_frame"], "runs", "runs"),
}

#: where a message names the argument in another spelling (the statistics call the sets A and B)
SPELLINGS = {"a": ("a", "A"), "b": ("b", "B"), "xs": ("xs", "X"), "ys": ("ys", "Y"), "x": ("x", "X")}


def _names(message: str, pname: str) -> bool:
    return any(re.search(rf"(?<![\w'-]){re.escape(n)}(?=[\[:=\s,)'])", message)
               for n in SPELLINGS.get(pname, (pname,)))


def _bad_value(label, like):
    if label == "a generator":
        return _gen()
    value = BAD[label]
    if label == "an empty array" and isinstance(like, np.ndarray) and like.ndim == 1:
        return np.empty(0)
    if label == "an empty array" and isinstance(like, list):
        return []
    if label == "an array of strings" and isinstance(like, np.ndarray) and like.ndim == 1:
        return np.array(["a", "b", "c"])
    return value


DATA_CASES = [pytest.param(name, pname, label, id=f"{name}-{pname}-{label}")
              for name, (call, pnames, _, _) in sorted(DATA.items()) for pname in pnames for label in BAD]


@pytest.mark.parametrize("name, pname, label", DATA_CASES)
def test_bad_data_is_refused_by_name(name, pname, label):
    call, _, _, _ = DATA[name]
    kwargs = dict(call)
    kwargs[pname] = _bad_value(label, call[pname])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a numpy overflow or invalid-value warning is a failure
        with pytest.raises((VlgapError, TypeError)) as err:
            FUNCTIONS[name](**kwargs)
    message = str(err.value)
    assert _names(message, pname), message
    assert "\n" not in message and "Traceback" not in message


def _constant(like):
    if isinstance(like, list):
        return [np.ones_like(like[0])]
    return np.ones_like(like)


@pytest.mark.parametrize("name", sorted(DATA))
def test_constant_data_is_refused_or_warned(name):
    call, pnames, expect, _ = DATA[name]
    kwargs = dict(call)
    kwargs[pnames[0]] = _constant(call[pnames[0]])
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("error", RuntimeWarning)
        warnings.simplefilter("always", DegenerateWarning)
        if expect == "error":
            with pytest.raises(VlgapError) as err:
                FUNCTIONS[name](**kwargs)
            assert _names(str(err.value), pnames[0]) or "zero variance" in str(err.value) or \
                "identical" in str(err.value), str(err.value)
            return
        result = FUNCTIONS[name](**kwargs)
    if expect == "warns":  # in the result's warnings, or (a bare number) as a DegenerateWarning
        assert warning_lines(result) or any(issubclass(w.category, DegenerateWarning) for w in said), result


def _scaled(like, s):
    if isinstance(like, list):
        return [a * s for a in like]
    return like * s


def _same(a, b) -> None:
    """Equal results: the score-like fields of two results (dataclasses, dicts, numbers)."""
    if hasattr(a, "to_dict"):
        a, b = a.to_dict(), b.to_dict()
    if isinstance(a, dict):
        for key in ("score", "scores", "d", "accuracy", "best"):
            if key in a:
                assert np.allclose(np.asarray(a[key], dtype=float) if key != "best" else a[key]["score"],
                                   np.asarray(b[key], dtype=float) if key != "best" else b[key]["score"],
                                   rtol=1e-9), key
        for key in ("text_to_video", "video_to_text"):
            if key in a:
                assert a[key]["R@1"]["value"] == b[key]["R@1"]["value"]
        return
    assert np.allclose(a, b, rtol=1e-9)


@pytest.mark.parametrize("name", sorted(DATA))
@pytest.mark.parametrize("scale", [1e-30, 1e30])
def test_scaled_data_gives_the_same_result_or_says_why(name, scale):
    call, pnames, _, expect = DATA[name]
    kwargs = dict(call)
    for p in pnames:
        kwargs[p] = _scaled(call[p], scale)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # never numpy's overflow warnings, then a number
        warnings.simplefilter("ignore", DegenerateWarning)
        try:
            result = FUNCTIONS[name](**kwargs)
        except VlgapError as err:
            assert expect == "error" or "range" in str(err), str(err)
            return
        if expect == "same":
            _same(result, FUNCTIONS[name](**call))


# ---- the classes of the API: their constructors check the same way ---------------------------------

@pytest.mark.parametrize("name, pname, value", hint_cases(CLASSES))
def test_a_class_refuses_what_its_hints_rule_out(name, pname, value, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a constructor that gets through may write nothing outside
    cls = CLASSES[name]
    sig, hints = arguments._plan(cls)
    kwargs = {q: (value if q == pname else sample(hints[q])) for q, p in sig.parameters.items()
              if (q == pname or p.default is p.empty) and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    with pytest.raises((VlgapError, TypeError)) as err:
        cls(**kwargs)
    assert re.search(rf"\b{re.escape(pname)}\b", str(err.value)), str(err.value)
