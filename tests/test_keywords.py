"""One mechanism refuses old keyword names: vlgap.keywords, which features.source.feature_options_moved
builds on, so a rename reads the same whichever decorator a function carries."""
from __future__ import annotations

import inspect

import pytest

from vlgap.errors import VlgapError
from vlgap.features.source import feature_options_moved
from vlgap.keywords import reject_renamed_keywords, renamed_keywords


@renamed_keywords(bootstrap="n_bootstrap", permutations="n_permutations")
def api(x, *, n_bootstrap=0, n_permutations=0):
    return x, n_bootstrap, n_permutations


@feature_options_moved(source="features")
def probe(x, *, features=None):
    return x, features


def test_renames_read_the_same_through_both_decorators_and_signatures_stay_clean():
    assert api(1, n_bootstrap=2) == (1, 2, 0) and probe(1, features="f") == (1, "f")
    with pytest.raises(VlgapError) as a:
        api(1, bootstrap=5, permutations=3)
    assert str(a.value) == ("api(): the keyword 'bootstrap' is now n_bootstrap; "
                            "the keyword 'permutations' is now n_permutations")
    with pytest.raises(VlgapError) as b:
        probe(1, source=None, device="cpu", encoders={})
    assert str(b.value) == ("probe(): the keyword 'source' is now features; device= moved into "
                            "features=FeatureOptions(device=...); encoders= is given through "
                            "features=FeatureSource(options, encoders={...})")
    assert list(inspect.signature(api).parameters) == ["x", "n_bootstrap", "n_permutations"]
    assert list(inspect.signature(probe).parameters) == ["x", "features"]
    with pytest.raises(TypeError):
        api(1, n_resamples=3)  # unknown, never public: Python's own error


def test_reject_renamed_keywords_for_kwargs_functions():
    reject_renamed_keywords("f", {}, {"bootstrap": "n_bootstrap"})
    with pytest.raises(VlgapError, match=r"^f\(\): the keyword 'bootstrap' is now n_bootstrap$"):
        reject_renamed_keywords("f", {"bootstrap": 1}, {"bootstrap": "n_bootstrap"})
    with pytest.raises(TypeError, match="unexpected keyword arguments \\['zz'\\]"):
        reject_renamed_keywords("f", {"zz": 1}, {"bootstrap": "n_bootstrap"})
