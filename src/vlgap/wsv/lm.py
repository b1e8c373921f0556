"""The language model side: a caption tokenizer and a causal LM that reads soft prompts (adapters over
`tokenizers`, `transformers` and `peft`).

Default: a small GPT-2-style decoder built from a `GPT2Config` with random weights and trained from
scratch, with a word-level tokenizer built from the training corpus (saved next to the checkpoint).
Options: the bundled SmolLM2-135M-Instruct (converted once from its GGUF into the cache), frozen or with
LoRA through peft, or any Hugging Face causal LM id or folder for users who have the weights.
Soft prompts [B, P, d] are prepended to the token embeddings (`inputs_embeds`); the loss counts caption
tokens only. Generation is greedy with a key/value cache, batched: every row has the same prompt
length, so no padding is needed and a row's result does not depend on its batch.
"""
from __future__ import annotations

import re
from typing import Any, Sequence

import torch
from torch import nn

from vlgap.encoders.causal_lm import smollm2_folder  # noqa: F401  (re-exported)
from vlgap.errors import VlgapError

SPECIALS = ("[PAD]", "[BOS]", "[EOS]", "[UNK]")


class CaptionTokenizer:
    """Word-level tokenizer (lower case; words and punctuation) built from a caption corpus."""

    def __init__(self, tok):
        self.tok = tok
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = (tok.token_to_id(s) for s in SPECIALS)

    @classmethod
    def build(cls, corpus: Sequence[str], min_count: int = 1) -> "CaptionTokenizer":
        from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

        if not corpus:
            raise VlgapError("cannot build a tokenizer from an empty caption corpus")
        tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
        tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        trainer = trainers.WordLevelTrainer(special_tokens=list(SPECIALS), min_frequency=min_count)
        tok.train_from_iterator(list(corpus), trainer)
        return cls(tok)

    @classmethod
    def from_json(cls, text: str) -> "CaptionTokenizer":
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_str(text))

    def to_json(self) -> str:
        return self.tok.to_str()

    @property
    def vocab_size(self) -> int:
        return self.tok.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text).ids

    def decode(self, ids: Sequence[int]) -> str:
        words = [self.tok.id_to_token(int(i)) for i in ids if int(i) not in (self.pad_id, self.bos_id, self.eos_id)]
        text = " ".join(words)
        text = re.sub(r" ([,.;:!?])", r"\1", text)
        text = re.sub(r" - ", "-", text)
        return text[:1].upper() + text[1:]


class HFTokenizer:
    """A pretrained model's own tokenizer behind the same small interface."""

    def __init__(self, tok):
        self.tok = tok
        self.eos_id = tok.eos_token_id
        self.bos_id = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        self.vocab_size = len(tok)

    def encode(self, text: str) -> list[int]:
        return self.tok(text, add_special_tokens=False)["input_ids"]

    def decode(self, ids: Sequence[int]) -> str:
        return self.tok.decode([int(i) for i in ids if int(i) != self.eos_id], skip_special_tokens=True).strip()


def encode_batch(tokenizer, texts: Sequence[str], max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[N, L] ids (BOS caption EOS, right-padded) and 0/1 mask; captions longer than max_len are cut (and
    keep no EOS), which the caller reports."""
    rows = []
    for t in texts:
        ids = [tokenizer.bos_id] + tokenizer.encode(t)[: max_len - 2] + [tokenizer.eos_id]
        rows.append(ids)
    L = max(len(r) for r in rows)
    ids = torch.full((len(rows), L), tokenizer.pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), L), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        mask[i, : len(r)] = 1
    return ids, mask


class SoftPromptLM(nn.Module):
    """A causal LM that reads P soft prompts before the caption."""

    def __init__(self, model, tokenizer, kind: str, record: dict[str, Any]):
        super().__init__()
        self.model, self.tokenizer, self.kind, self.record = model, tokenizer, kind, record
        self.d_model = int(model.get_input_embeddings().embedding_dim)
        # a pretrained LM's vocabulary is large (SmolLM2: 49,152): its loss projects only the caption positions.
        # The scratch LM's word vocabulary is a few hundred: it keeps the full projection, and with it the
        # documented scratch cells' exact numbers
        self.logits_on_targets_only = kind == "pretrained"

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.get_input_embeddings()(ids)

    def loss(self, prompts: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy over caption tokens (the BOS input predicts the first word)."""
        B, P, _ = prompts.shape
        emb = self.embed(ids)
        x = torch.cat([prompts.to(emb.dtype), emb], dim=1)
        att = torch.cat([torch.ones(B, P, dtype=mask.dtype, device=mask.device), mask], dim=1)
        split = self._body_and_head() if self.logits_on_targets_only else None
        if split is None:
            logits = self.model(inputs_embeds=x, attention_mask=att, use_cache=False).logits
            pred = logits[:, P:-1]  # position P+j predicts ids[:, j+1]
            target = ids[:, 1:].masked_fill(mask[:, 1:] == 0, -100)
            return nn.functional.cross_entropy(pred.reshape(-1, pred.shape[-1]), target.reshape(-1), ignore_index=-100)
        # the same loss with the vocabulary projection applied only where a caption token is predicted: a
        # pretrained LM's head (SmolLM2: 576 x 49,152) would otherwise score every prompt and padding position
        body, head = split
        hidden = body(inputs_embeds=x, attention_mask=att, use_cache=False).last_hidden_state
        keep = mask[:, 1:] == 1
        logits = head(hidden[:, P:-1][keep])
        return nn.functional.cross_entropy(logits, ids[:, 1:][keep])

    def _unwrapped(self) -> nn.Module:
        """The Hugging Face model itself, under peft's LoRA wrapper when there is one."""
        return self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model

    def _body_and_head(self):
        """(decoder body, vocabulary head) of a plain Hugging Face causal LM (peft's LoRA layers sit inside the
        body), or None where the model post-processes its logits (Gemma's soft-capping, Cohere's scale)."""
        base = self._unwrapped()
        body, head = getattr(base, "base_model", None), base.get_output_embeddings()
        cfg = getattr(base, "config", None)
        if body is None or body is base or head is None or getattr(cfg, "final_logit_softcapping", None) \
                or hasattr(base, "logit_scale") or getattr(cfg, "logit_scale", None) is not None:
            return None
        return body, head

    @torch.no_grad()
    def generate(self, prompts: torch.Tensor, max_new_tokens: int = 40) -> list[list[int]]:
        """Greedy decoding for a batch of prompt sequences; returns token ids up to (excluding) EOS."""
        B = prompts.shape[0]
        bos = torch.full((B, 1), self.tokenizer.bos_id, dtype=torch.long, device=prompts.device)
        emb = self.embed(bos)
        x = torch.cat([prompts.to(emb.dtype), emb], dim=1)
        import inspect

        # transformers 5 renamed past_key_values to cache (keyword and output); accept either
        # (peft's wrapper takes **kwargs: read the wrapped model's own signature)
        base = self._unwrapped()
        key = "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"
        out = self.model(inputs_embeds=x, use_cache=True)
        past = out.get("cache", None) if key == "cache" else out.past_key_values
        done = torch.zeros(B, dtype=torch.bool, device=prompts.device)
        result: list[list[int]] = [[] for _ in range(B)]
        for _ in range(max_new_tokens):
            nxt = out.logits[:, -1].argmax(-1)
            for i in range(B):
                if not done[i]:
                    if int(nxt[i]) == self.tokenizer.eos_id:
                        done[i] = True
                    else:
                        result[i].append(int(nxt[i]))
            if bool(done.all()):
                break
            out = self.model(inputs_embeds=self.embed(nxt[:, None]), use_cache=True, **{key: past})
            past = out.get("cache", None) if key == "cache" else out.past_key_values
        return result


    @torch.no_grad()
    def beam_search(self, prompts: torch.Tensor, beam: int = 3, max_new_tokens: int = 40,
                    length_penalty: float = 1.0) -> list[list[int]]:
        """Beam search for a batch (all B*beam rows advance together; no KV cache, sequences are short).
        A finished beam only extends with EOS at no cost; the best beam per item maximises
        sum(log p) / length**length_penalty (length counts the EOS)."""
        B, P, _ = prompts.shape
        K, eos = beam, self.tokenizer.eos_id
        pr = prompts.repeat_interleave(K, 0)
        seqs = torch.full((B * K, 1), self.tokenizer.bos_id, dtype=torch.long, device=prompts.device)
        scores = torch.full((B, K), float("-inf"), device=prompts.device)
        scores[:, 0] = 0.0  # all beams start identical: expand only the first
        finished = torch.zeros(B * K, dtype=torch.bool, device=prompts.device)
        for _ in range(max_new_tokens):
            emb = self.embed(seqs)
            logits = self.model(inputs_embeds=torch.cat([pr.to(emb.dtype), emb], 1), use_cache=False).logits[:, -1]
            logp = torch.log_softmax(logits.float(), -1)
            logp[finished] = float("-inf")
            logp[finished, eos] = 0.0
            V = logp.shape[-1]
            top = (scores.view(B * K, 1) + logp).view(B, K * V).topk(K, dim=1)
            src = (torch.arange(B, device=prompts.device)[:, None] * K + top.indices // V).flatten()
            tok = (top.indices % V).flatten()
            seqs = torch.cat([seqs[src], tok[:, None]], 1)
            finished = finished[src] | (tok == eos)
            scores = top.values
            if bool(finished.all()):
                break
        out: list[list[int]] = []
        for b in range(B):
            best, best_val = None, float("-inf")
            for k in range(K):
                row = seqs[b * K + k, 1:].tolist()
                n = row.index(eos) + 1 if eos in row else len(row)
                val = float(scores[b, k]) / max(n, 1) ** length_penalty
                if val > best_val:
                    best, best_val = row[: n - 1] if eos in row else row, val
            out.append(best)
        return out


def build_scratch_lm(corpus: Sequence[str], *, n_layer: int = 3, n_embd: int = 192, n_head: int = 4,
                     n_positions: int = 96, tokenizer: CaptionTokenizer | None = None,
                     dropout: float = 0.1) -> SoftPromptLM:
    """A GPT-2-style decoder from a config (random weights) with a word-level tokenizer of the corpus."""
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = tokenizer or CaptionTokenizer.build(corpus)
    cfg = GPT2Config(vocab_size=tok.vocab_size, n_positions=n_positions, n_embd=n_embd, n_layer=n_layer,
                     n_head=n_head, bos_token_id=tok.bos_id, eos_token_id=tok.eos_id, pad_token_id=tok.pad_id,
                     resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout)
    model = GPT2LMHeadModel(cfg)
    record = {"kind": "scratch", "config": {"n_layer": n_layer, "n_embd": n_embd, "n_head": n_head,
                                            "n_positions": n_positions, "vocab_size": tok.vocab_size}}
    return SoftPromptLM(model, tok, "scratch", record)


LM_SPECS = "scratch | smollm2 | hf:<hub id or folder> (a causal LM such as GPT-2)"


def check_lm_spec(spec: str) -> str:
    if not isinstance(spec, str) or not spec or spec == "hf:":
        raise VlgapError(f"--lm {spec!r} is not valid; valid: {LM_SPECS}")
    return spec


def build_pretrained_lm(source: str, *, lora_r: int = 0, freeze: bool = False) -> SoftPromptLM:
    """'smollm2' (bundled), 'hf:<hub id or folder>' or a bare folder (the older spelling); `lora_r` > 0
    wraps it with peft LoRA on the attention projections (only the adapters train); `freeze` trains no
    LM weight at all; otherwise every weight trains (the paper's fully fine-tuned GPT-2). Weights are
    kept in float32 (the master copy); `--dtype` applies through autocast in training and captioning."""
    from vlgap.encoders.causal_lm import load_lm

    weights = None
    if source == "smollm2":
        where = "smollm2"
    else:
        from vlgap.wsv.sources import resolve_source

        path, rec = resolve_source(source.removeprefix("hf:"), "--lm hf:")
        where, weights = str(path), rec["weights"]
    try:
        loaded = load_lm(where, device="cpu", dtype="float32")
    except VlgapError as err:
        raise VlgapError(f"could not load causal LM {source!r}: {err} (give a folder or hub id of a causal LM "
                         "with its tokenizer, or 'smollm2')") from None
    model, tok = loaded.model, loaded.tokenizer
    record: dict[str, Any] = {"kind": "pretrained", "source": source, "lora_r": lora_r, "freeze": freeze}
    if weights is not None:
        record["weights"] = weights
    if lora_r > 0:
        model = wrap_lora(model, lora_r)
    elif freeze:
        model.requires_grad_(False)
    return SoftPromptLM(model, HFTokenizer(tok), "pretrained", record)


def wrap_lora(model, r: int = 8):
    """peft LoRA on the attention projections that this architecture has."""
    from peft import LoraConfig, get_peft_model

    names = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
    targets = [t for t in ("q_proj", "v_proj", "c_attn") if t in names]
    if not targets:
        raise VlgapError(f"no attention projection found for LoRA in {type(model).__name__}")
    return get_peft_model(model, LoraConfig(r=r, lora_alpha=2 * r, target_modules=targets, lora_dropout=0.0))


def lm_from_record(record: dict[str, Any], tokenizer_json: str | None) -> SoftPromptLM:
    """Rebuild an LM with the architecture a checkpoint recorded (weights are loaded by the caller)."""
    if record["kind"] == "scratch":
        c = record["config"]
        tok = CaptionTokenizer.from_json(tokenizer_json)
        return build_scratch_lm([], tokenizer=tok, n_layer=c["n_layer"], n_embd=c["n_embd"], n_head=c["n_head"],
                                n_positions=c["n_positions"])
    return build_pretrained_lm(record["source"], lora_r=record.get("lora_r", 0), freeze=record.get("freeze", False))
