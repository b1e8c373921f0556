"""The pretrained-LM caption loss (the SmolLM2-135M + LoRA row's), on a tiny random-weight Llama (SmolLM2 is a
Llama) saved to a folder: the loss that projects only caption positions onto the vocabulary equals the full
projection's loss; only the LoRA adapters and the prompter receive gradients (no gradient reaches a frozen
base weight); kill + resume stays bit-exact; the experiment row carries its own settings."""
from __future__ import annotations

import numpy as np
import pytest
import torch

CORPUS = ["a red circle moves left", "a blue square grows", "a green star on a black background",
          "a yellow heart moves up and then disappears", "a big white square shrinks", "a small red star moves right"]


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    from tiny_tokenizer import byte_bpe_tokenizer  # tests/helpers
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("tiny_llama")
    tok = byte_bpe_tokenizer(CORPUS * 3, vocab_size=300)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      tie_word_embeddings=True, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    LlamaForCausalLM(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _data(n_latent_channels: int = 4):
    from vlgap.wsv.train import TrainData

    rng = np.random.default_rng(0)
    emb = rng.normal(size=(len(CORPUS), 8)).astype(np.float32)
    return TrainData(CORPUS, rng.normal(size=(len(CORPUS), n_latent_channels, 2, 3, 3)).astype(np.float32),
                     emb / np.linalg.norm(emb, axis=1, keepdims=True))


@pytest.mark.parametrize("lora_r", [0, 2])
def test_loss_on_caption_positions_equals_the_full_projection_loss(tiny_llama, lora_r):
    from vlgap.wsv.lm import build_pretrained_lm, encode_batch

    lm = build_pretrained_lm(f"hf:{tiny_llama}", lora_r=lora_r).double()
    if lora_r:  # LoRA's B starts at zero: give the adapters weight so that they take part in the comparison
        torch.manual_seed(1)
        for n, p in lm.named_parameters():
            if "lora_B" in n:
                p.data.normal_(0, 0.1)
    assert lm.logits_on_targets_only and lm._body_and_head() is not None
    ids, mask = encode_batch(lm.tokenizer, CORPUS, 48)  # captions of different lengths: right-padded rows
    assert (mask == 0).any()
    prompts = torch.randn(len(CORPUS), 3, lm.d_model, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    on_targets = lm.loss(prompts, ids, mask)
    lm.logits_on_targets_only = False
    full = lm.loss(prompts, ids, mask)
    # reference: the model's own full logits, cross-entropy averaged over the caption tokens only
    x = torch.cat([prompts, lm.embed(ids)], 1)
    logits = lm.model(inputs_embeds=x, attention_mask=torch.cat([torch.ones(len(CORPUS), 3, dtype=mask.dtype),
                                                                mask], 1)).logits[:, 3:-1]
    logp = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None])[..., 0]
    reference = -(logp * mask[:, 1:]).sum() / mask[:, 1:].sum()
    assert torch.allclose(full, reference, rtol=0, atol=1e-12)
    assert torch.allclose(on_targets, reference, rtol=0, atol=1e-12)


def test_only_the_adapters_and_the_prompter_get_gradients(tiny_llama):
    from vlgap.wsv.lm import build_pretrained_lm, encode_batch
    from vlgap.wsv.train import Bundle, WSVConfig, _freeze_for, _params, _step_loss

    data = _data()
    cfg = WSVConfig(system="no_polisher", lm=f"hf:{tiny_llama}", lora_r=2, caption_steps=1, n_prompts=2)
    bundle = Bundle(cfg, data, lm=build_pretrained_lm(cfg.lm, lora_r=2))
    _freeze_for(bundle, "caption")
    params = _params(bundle, "caption")
    tok = encode_batch(bundle.lm.tokenizer, data.captions, cfg.max_len)
    loss = _step_loss(bundle, "caption", data, torch.arange(len(CORPUS)), tok, torch.Generator().manual_seed(0))
    loss.backward()
    lm_named = dict(bundle.lm.named_parameters())
    lora = {n for n in lm_named if "lora_" in n}
    assert lora and {n for n, p in lm_named.items() if p.requires_grad} == lora
    assert all(lm_named[n].grad is None for n in lm_named if n not in lora)  # frozen base: no gradient computed
    assert all(lm_named[n].grad is not None for n in lora)
    assert any(float(lm_named[n].grad.abs().sum()) > 0 for n in lora if "lora_B" in n)  # A gets none while B is 0
    assert {id(p) for p in params} == {id(p) for p in bundle.prompter.parameters()} | {id(lm_named[n]) for n in lora}
    assert all(p.grad is not None for p in bundle.prompter.parameters())


def test_kill_and_resume_is_bit_exact_with_a_lora_llama(tiny_llama, tmp_path):
    """float32: at bfloat16 on this CPU two uninterrupted runs of the same config already differ (the scratch
    LM's too, so not the LM's loss), which no resume can match bit for bit."""
    from vlgap.wsv.train import WSVConfig, train

    data = _data()
    cfg = WSVConfig(system="wsv", lm=f"hf:{tiny_llama}", lora_r=2, head_steps=1,
                    polisher_steps=1, caption_steps=3, batch_size=2, checkpoint_every=1, n_prompts=2,
                    prompter_dim=8, polisher_hidden=4)
    full = train(data, cfg, tmp_path / "a")
    train(data, cfg, tmp_path / "b", stop_after=3)  # "killed" in the caption stage
    resumed = train(data, cfg, tmp_path / "b")
    a, b = full.state_dict(), resumed.state_dict()
    assert a.keys() == b.keys() and [k for k in a if not torch.equal(a[k], b[k])] == []
    import warnings

    with warnings.catch_warnings():  # greedy decoding through peft passes the cache under its current name
        warnings.simplefilter("error", FutureWarning)
        captions = resumed.caption(data.latents[:3], max_new_tokens=4)
    assert len(captions) == 3 and all(isinstance(c, str) for c in captions)


@pytest.mark.parametrize("native, dtype", [("1", "bfloat16"), ("0", "float32")])
def test_the_smollm2_row_carries_its_own_caption_settings(monkeypatch, native, dtype):
    """The row's own settings replace the experiment's; its number format is auto: bfloat16 where the
    device computes it natively, float32 where it would be emulated (the hardware probe forced both ways)."""
    from vlgap.wsv.experiment import SMOLLM2_TRAIN, ExperimentConfig, split_system
    from vlgap.wsv.train import WSVConfig

    monkeypatch.setenv("VLGAP_NATIVE_BF16", native)
    cfg, formats = ExperimentConfig(systems=("wsv", "wsv+smollm2"),
                                    train={"caption_steps": 1000, "batch_size": 32}).resolved("cpu")
    assert formats["lm_dtype"].auto and formats["lm_dtype"].line().startswith(f"LM rows (wsv+smollm2): {dtype} (auto: ")
    base = split_system("wsv+smollm2")[0]
    row = WSVConfig(system=base, **{**cfg.wsv_overrides(), **cfg.row_settings("wsv+smollm2")})
    scratch = WSVConfig(system="wsv", **cfg.wsv_overrides())
    assert (row.lm, row.lora_r, row.batch_size, row.caption_steps, row.dtype) == (
        "smollm2", 8, SMOLLM2_TRAIN["batch_size"], SMOLLM2_TRAIN["caption_steps"], dtype)
    assert (scratch.lm, scratch.batch_size, scratch.caption_steps, scratch.dtype) == ("scratch", 32, 1000, "float32")
