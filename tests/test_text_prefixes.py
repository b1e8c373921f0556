"""A causal LM's features for every n_c from one pass over the longest texts (features/chunk_steps
TextSteps._encode_shared_prefixes, HFTextEncoder.encode_prefixes): equal to a separate pass per n_c, and
to the model's own hidden states of each text alone; an encoder that attends both ways, or texts that
are not token prefixes of each other, take the separate passes."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from vlgap.encoders.text import load_hf_text
from vlgap.features.chunk_steps import Decoded, TextSteps
from tests.test_text_models import _llama, _own_mean_pool, _twin

CAPTIONS = ["a cat on the mat", "the red ball rolls left", "a probe sentence", "the cat and the ball"]
VALUES = [1, 2, 4]


def _decoded(per_item: list[list[str]], values=VALUES) -> Decoded:
    ids = [f"v{i}" for i in range(len(per_item))]
    texts = {v: [" ".join(c + "." for c in caps[:v]) for caps in per_item] for v in values}
    return Decoded({v: list(ids) for v in values}, {v: [] for v in values}, texts)


def _items(n: int) -> list[list[str]]:
    rng = np.random.default_rng(0)
    return [[CAPTIONS[j] for j in rng.permutation(len(CAPTIONS))] for _ in range(n)]


def _separate(enc, steps, decoded, batch_size):
    causal, enc.causal = enc.causal, False
    try:
        return steps.encode_chunk(enc, decoded, batch_size)[0]
    finally:
        enc.causal = causal


@pytest.mark.parametrize("pooling", ["mean", "last"])
def test_causal_lm_prefixes_equal_separate_passes_and_own_states(tmp_path, pooling):
    enc = load_hf_text(str(_llama(tmp_path / "llama")), pooling=pooling)
    assert enc.causal
    steps, decoded = TextSteps(VALUES, skip_bad=False, pooling=pooling), _decoded(_items(7))
    assert set(steps._encode_shared_prefixes(enc, decoded, 3)) == set(VALUES)  # the shared path runs
    shared = steps.encode_chunk(enc, decoded, batch_size=3)[0]
    separate = _separate(enc, steps, decoded, 3)
    for v in VALUES:
        assert len(shared[v]) == enc.num_layers
        for a, b in zip(shared[v], separate[v]):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    if pooling == "mean":  # the model's own states, each text alone, no padding
        for v in VALUES:
            own = _own_mean_pool(enc.model, enc.tokenizer, decoded.payload[v])
            for a, b in zip(shared[v], own):
                np.testing.assert_allclose(a, b.numpy(), rtol=1e-4, atol=1e-5)


def test_bidirectional_encoder_is_not_causal_and_runs_each_n_c(tmp_path):
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                     max_position_embeddings=64)
    enc = load_hf_text(str(_twin(tmp_path / "bert", BertModel(cfg))))
    assert enc.causal is False
    steps, decoded = TextSteps(VALUES, skip_bad=False), _decoded(_items(4))
    assert steps._encode_shared_prefixes(enc, decoded, 8) == {}
    with pytest.raises(Exception, match="causal"):
        enc.encode_prefixes(["a cat"], [[1]])


def test_texts_that_are_not_prefixes_take_separate_passes(tmp_path):
    enc = load_hf_text(str(_llama(tmp_path / "llama")))
    steps = TextSteps(VALUES, skip_bad=False)
    decoded = _decoded(_items(4))
    decoded.payload[2][1] = "the mat."  # item 1's n_c = 2 text no longer begins with its n_c = 1 text
    assert steps._encode_shared_prefixes(enc, decoded, 8) == {}
    decoded = _decoded(_items(4))
    decoded.ids[1] = decoded.ids[1][:-1]  # an item missing at one n_c
    assert steps._encode_shared_prefixes(enc, decoded, 8) == {}
