"""Tiny random-weight WSV parts saved to folders, built from configs (no files, no hub): a CogVideoX-style
video VAE, a CogVideoX text-to-video pipeline around it (tiny transformer, tiny T5 encoder, a T5
tokenizer built from a small vocabulary with `tokenizers`, its scheduler), a tiny CLIP and a tiny GPT-2
with its tokenizer. Their outputs mean nothing; the tests check the plumbing and compare against the
models' own forwards."""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

WORDS = ("a red blue green yellow circle square star heart moves left right up down grows shrinks the on of "
         "background black white photo appears disappears and then big small").split()


def tiny_vae_config() -> dict:
    return dict(in_channels=3, out_channels=3, down_block_types=("CogVideoXDownBlock3D",) * 3,
                up_block_types=("CogVideoXUpBlock3D",) * 3, block_out_channels=(8, 8, 8), latent_channels=4,
                layers_per_block=1, norm_num_groups=2, temporal_compression_ratio=4, sample_height=16,
                sample_width=16)


def make_tiny_vae(folder: Path, seed: int = 0) -> Path:
    import torch
    from diffusers import AutoencoderKLCogVideoX

    torch.manual_seed(seed)
    AutoencoderKLCogVideoX(**tiny_vae_config()).save_pretrained(folder)
    return Path(folder)


def t5_tokenizer(max_length: int = 226):
    """A T5TokenizerFast over a Unigram model of a few words (pad 0, eos 1, unk 2, as T5)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import T5TokenizerFast

    vocab = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)] + [("\u2581" + w, -1.0) for w in WORDS] + \
        [(ch, -5.0) for ch in "abcdefghijklmnopqrstuvwxyz.,"]
    tok = Tokenizer(models.Unigram(vocab, unk_id=2))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    from tokenizers.processors import TemplateProcessing

    tok.post_processor = TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return T5TokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                           extra_ids=0, model_max_length=max_length)


def make_tiny_cogvideox(folder: Path, seed: int = 0) -> Path:
    """A CogVideoXPipeline of tiny random parts saved with save_pretrained (vae/, transformer/, ...)."""
    import torch
    from diffusers import (AutoencoderKLCogVideoX, CogVideoXDDIMScheduler, CogVideoXPipeline,
                           CogVideoXTransformer3DModel)
    from transformers import T5Config, T5EncoderModel

    torch.manual_seed(seed)
    tok = t5_tokenizer()
    text = T5EncoderModel(T5Config(vocab_size=len(tok), d_model=16, d_ff=32, d_kv=8, num_layers=1, num_heads=2,
                                   pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)).eval()
    transformer = CogVideoXTransformer3DModel(num_attention_heads=2, attention_head_dim=8, in_channels=4,
                                              out_channels=4, time_embed_dim=4, text_embed_dim=16, num_layers=1,
                                              sample_width=4, sample_height=4, sample_frames=9, patch_size=2,
                                              temporal_compression_ratio=4)
    vae = AutoencoderKLCogVideoX(**tiny_vae_config())
    pipe = CogVideoXPipeline(tokenizer=tok, text_encoder=text, vae=vae, transformer=transformer,
                             scheduler=CogVideoXDDIMScheduler())
    pipe.save_pretrained(folder)
    return Path(folder)


def make_tiny_gpt2(folder: Path, seed: int = 0) -> Path:
    """A tiny GPT2LMHeadModel with a byte-level BPE tokenizer trained on a few words."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator([" ".join(WORDS)] * 4, vocab_size=300, min_frequency=1,
                            special_tokens=["<|endoftext|>"])
    tok = GPT2TokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                            unk_token="<|endoftext|>")
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=len(tok), n_positions=64, n_embd=16, n_layer=1, n_head=2,
                     bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    GPT2LMHeadModel(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return Path(folder)


def make_tiny_clip(folder: Path, seed: int = 0) -> Path:
    from vlgap.captions.clip_model import write_random_clip

    return write_random_clip(folder, seed=seed, max_length=32, image_size=16, width=16, layers=1)


def lay_out_hub_cache(hf_home: Path, hub_id: str, folder: Path) -> Path:
    """$HF_HOME/hub/models--ORG--NAME/{refs/main, snapshots/<40-hex>/<files>}, as huggingface_hub writes it."""
    commit = hashlib.sha1(hub_id.encode()).hexdigest()
    repo = Path(hf_home) / "hub" / ("models--" + hub_id.replace("/", "--"))
    shutil.copytree(folder, repo / "snapshots" / commit)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    return repo / "snapshots" / commit
