"""A tiny Llama GGUF file (2 layers, hidden size 32, a letters-only tokenizer) with random weights, written
with the gguf package, so GGUF loading and conversion (vlgap.encoders.gguf_cache) run without a real model."""
from __future__ import annotations

import numpy as np


def write_tiny_llama_gguf(path, seed: int = 0) -> None:
    """Write the file; `seed` draws the weights (another seed: other weights, the same architecture)."""
    import gguf

    rng = np.random.default_rng(seed)
    hidden, layers, heads, kv_heads, ff = 32, 2, 4, 2, 64
    tokens = [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["\u2581", "<s>", "</s>", "<unk>"]
    vocab = len(tokens)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny")
    w.add_context_length(64)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(hidden // heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(0)  # float32 tensors
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_types([1] * (vocab - 3) + [3, 3, 3])
    w.add_token_scores([0.0] * vocab)
    w.add_token_merges([])
    w.add_bos_token_id(vocab - 3)
    w.add_eos_token_id(vocab - 2)
    w.add_unk_token_id(vocab - 1)

    def rand(*shape):
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    kv = kv_heads * hidden // heads
    w.add_tensor("token_embd.weight", rand(vocab, hidden))
    for i in range(layers):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(hidden, np.float32))
        w.add_tensor(f"blk.{i}.attn_q.weight", rand(hidden, hidden))
        w.add_tensor(f"blk.{i}.attn_k.weight", rand(kv, hidden))
        w.add_tensor(f"blk.{i}.attn_v.weight", rand(kv, hidden))
        w.add_tensor(f"blk.{i}.attn_output.weight", rand(hidden, hidden))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(hidden, np.float32))
        w.add_tensor(f"blk.{i}.ffn_gate.weight", rand(ff, hidden))
        w.add_tensor(f"blk.{i}.ffn_up.weight", rand(ff, hidden))
        w.add_tensor(f"blk.{i}.ffn_down.weight", rand(hidden, ff))
    w.add_tensor("output_norm.weight", np.ones(hidden, np.float32))
    w.add_tensor("output.weight", rand(vocab, hidden))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
