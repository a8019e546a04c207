#!/usr/bin/env python3
"""Seeded synthetic models and text for the llama.cpp integration runs (no network needed).

  make_model.py model --fork FORK_DIR --shape gemma|llama --out MODEL.gguf [--seed N] [--layers N]
  make_model.py text  --out TEXT.txt [--seed N] [--words N]

A model is a real architecture of the fork (llama.cpp's `gemma` or `llama`) with random Q8_0
weights, written with the fork's own gguf-py and the vocabulary of the fork's
models/ggml-vocab-llama-spm.gguf (32000 tokens). The same seed writes the same bytes. Shapes:

  gemma: head dim 256, 16 query heads over 8 KV heads, 16 layers, n_embd 2048, n_ff 6144 (1.07 B)
  llama: head dim 128, 32 query heads over 8 KV heads, 16 layers, n_embd 2048, n_ff 6144 (1.01 B)

Weights are Q8_0 blocks drawn directly (uniform int8 quants with one f16 scale per tensor, so a
weight's standard deviation is about 0.02, as in trained models of this width); norms are 1.
The text is seeded pseudo-words for llama-perplexity.
"""
import argparse
import os
import sys

import numpy as np

SHAPES = {
    # name: (arch, n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim)
    "gemma": ("gemma", 16, 2048, 6144, 16, 8, 256),
    "llama": ("llama", 16, 2048, 6144, 32, 8, 128),
}
Q8_0_BLOCK = 32
WEIGHT_STD = 0.02


def q8_0_tensor(rng, rows, cols):
    """A weight of `rows` rows of `cols` values (ggml's ne = [cols, rows]) as Q8_0 bytes, std ~WEIGHT_STD;
    gguf-py reads the element shape from the byte shape."""
    assert cols % Q8_0_BLOCK == 0
    n_blocks = rows * cols // Q8_0_BLOCK
    # uniform quants in [-127, 127]: std 127/sqrt(3) quants, so d = std * sqrt(3) / 127
    scale = np.float16(WEIGHT_STD * np.sqrt(3.0) / 127.0)
    blocks = np.empty((n_blocks, 2 + Q8_0_BLOCK), dtype=np.uint8)
    blocks[:, :2] = np.frombuffer(scale.tobytes(), dtype=np.uint8)
    blocks[:, 2:] = rng.integers(-127, 128, size=(n_blocks, Q8_0_BLOCK), dtype=np.int8).view(np.uint8)
    return blocks.reshape(rows, cols // Q8_0_BLOCK * (2 + Q8_0_BLOCK))


def copy_vocab(gguf, writer, vocab_path):
    reader = gguf.GGUFReader(vocab_path)
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[1]
            values = [field.contents(i) for i in range(len(field.data))]
            writer.add_key_value(key, values, vtype, sub_type=sub)
        else:
            writer.add_key_value(key, field.contents(), vtype)
    return len(reader.fields["tokenizer.ggml.tokens"].data)


def write_model(args):
    sys.path.insert(0, os.path.join(args.fork, "gguf-py"))
    import gguf

    arch, n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim = SHAPES[args.shape]
    if args.layers:
        n_layer = args.layers
    rng = np.random.default_rng(args.seed)
    writer = gguf.GGUFWriter(args.out, arch)
    writer.add_name(f"turbo3-synthetic-{args.shape}")
    writer.add_context_length(262144)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(1000000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    n_vocab = copy_vocab(gguf, writer, os.path.join(args.fork, "models", "ggml-vocab-llama-spm.gguf"))
    writer.add_vocab_size(n_vocab)

    q8 = gguf.GGMLQuantizationType.Q8_0
    ones = np.ones(n_embd, dtype=np.float32)
    n_params = 0

    def add_q8(name, rows, cols):
        nonlocal n_params
        writer.add_tensor(name, q8_0_tensor(rng, rows, cols), raw_dtype=q8)
        n_params += rows * cols

    add_q8("token_embd.weight", n_vocab, n_embd)  # tied output: no output.weight
    writer.add_tensor("output_norm.weight", ones)
    for i in range(n_layer):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", ones)
        add_q8(f"blk.{i}.attn_q.weight", n_head * head_dim, n_embd)
        add_q8(f"blk.{i}.attn_k.weight", n_head_kv * head_dim, n_embd)
        add_q8(f"blk.{i}.attn_v.weight", n_head_kv * head_dim, n_embd)
        add_q8(f"blk.{i}.attn_output.weight", n_embd, n_head * head_dim)
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", ones)
        add_q8(f"blk.{i}.ffn_gate.weight", n_ff, n_embd)
        add_q8(f"blk.{i}.ffn_up.weight", n_ff, n_embd)
        add_q8(f"blk.{i}.ffn_down.weight", n_embd, n_ff)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"{args.out}: {arch}, {n_layer} layers, head dim {head_dim}, {n_head}/{n_head_kv} heads, "
          f"{n_params / 1e9:.2f} B parameters (Q8_0), seed {args.seed}")


SYLLABLES = ["ka", "lo", "mi", "tan", "ser", "vo", "ri", "del", "pa", "nu", "ges", "tor", "li", "ma", "ven",
             "cor", "di", "sa", "bel", "ro", "fin", "que", "tu", "mar", "hel", "os", "ty", "ran", "po", "ed"]
PUNCT = [".", ",", ".", "?", ";", "!"]


def write_text(args):
    rng = np.random.default_rng(args.seed)
    # A Zipf-like pseudo-vocabulary, so the text has repeated words as natural text does.
    lexicon = ["".join(rng.choice(SYLLABLES, size=rng.integers(1, 4))) for _ in range(4000)]
    ranks = rng.zipf(1.1, size=args.words)
    ranks = np.minimum(ranks, len(lexicon)) - 1
    out = []
    for i, r in enumerate(ranks):
        word = lexicon[r]
        out.append(word.capitalize() if i == 0 or out[-1][-1] in ".?!" else word)
        if rng.random() < 0.08:
            out[-1] += str(rng.choice(PUNCT))
    with open(args.out, "w") as f:
        for i in range(0, len(out), 16):
            f.write(" ".join(out[i:i + 16]) + "\n")
    print(f"{args.out}: {args.words} words, seed {args.seed}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("model")
    m.add_argument("--fork", required=True, help="the fork's source tree (gguf-py/ and models/)")
    m.add_argument("--shape", choices=sorted(SHAPES), required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--seed", type=int, default=42)
    m.add_argument("--layers", type=int, default=0, help="override the layer count (tests)")
    t = sub.add_parser("text")
    t.add_argument("--out", required=True)
    t.add_argument("--seed", type=int, default=42)
    t.add_argument("--words", type=int, default=40000)
    args = ap.parse_args()
    write_model(args) if args.cmd == "model" else write_text(args)


if __name__ == "__main__":
    main()
