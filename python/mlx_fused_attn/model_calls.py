"""The attention calls an mlx-lm model makes, from its config alone: the
heads, key/value heads, head dim, dtype and sliding window of a Hugging
Face style ``config.json`` (a ``text_config`` inside it, as multimodal
models nest it, is read first).

mlx-lm's generation makes these calls (``mlx_lm.generate``): the prompt in
chunks of ``prefill_step`` tokens (2048 in mlx-lm), the first against
itself and each later one against the cache so far; then one token at a
time against a cache that grows to the context's length; and batched
generation decodes several sequences at once under a bool mask that hides
each one's left padding (``BatchKVCache``). A sliding-window layer keeps
``window`` keys (``RotatingKVCache``) and passes a bool window mask where
a chunk is longer than the window.
"""

from __future__ import annotations

import json
import pathlib
from typing import NamedTuple

from .tuning import DTYPES, Call


class ModelShape(NamedTuple):
    """What of a model's config its attention calls depend on."""

    heads: int
    kv_heads: int
    head_dim: int
    dtype: str  # a key of tuning.DTYPES
    window: int  # the sliding window in keys; 0: none

    def describe(self) -> str:
        window = f", window {self.window}" if self.window else ""
        return f"{self.heads}/{self.kv_heads} heads, head dim {self.head_dim}, {self.dtype}{window}"


def read_config(source: str | pathlib.Path) -> dict:
    """The config at ``source``: a config.json or a folder holding one."""
    path = pathlib.Path(source)
    if path.is_dir():
        path = path / "config.json"
    with open(path) as f:
        return json.load(f)


def model_shape(config: dict, *, dtype: str | None = None) -> ModelShape:
    """The attention of a config; ``dtype`` overrides the config's
    (``torch_dtype``, default bfloat16). ValueError names a missing field."""
    config = {**config, **config.get("text_config", {})}
    try:
        heads = int(config["num_attention_heads"])
        kv_heads = int(config.get("num_key_value_heads") or heads)
        head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
    except KeyError as e:
        raise ValueError(
            f"config: {e.args[0]} is missing (needed: num_attention_heads, and head_dim "
            "or hidden_size; num_key_value_heads defaults to the heads)"
        ) from None
    dtype = dtype or str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    if dtype not in DTYPES:
        raise ValueError(f"config: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    window = int(config.get("sliding_window") or 0)
    return ModelShape(heads, kv_heads, head_dim, dtype, window)


def powers_of_two(low: int, high: int) -> list[int]:
    out, n = [], low
    while n <= high:
        out.append(n)
        n *= 2
    return out


def model_calls(
    shape: ModelShape,
    *,
    max_kv: int = 8192,
    prefill_step: int = 2048,
    batch_sizes: tuple[int, ...] = (8,),
    train_lengths: tuple[int, ...] = (),
    train_batch: int = 4,
) -> list[Call]:
    """The calls of generation up to ``max_kv`` tokens of context, one per
    shape class: prompts of 16 tokens up to a chunk, chunks against longer
    caches, decoding against caches of 256 keys up to ``max_kv`` (or the
    window), and batched decoding of each of ``batch_sizes`` sequences
    against caches from 1024 keys; then a training step (mlx-lm's LoRA:
    ``train_batch`` causal sequences) of each of ``train_lengths`` tokens."""
    s = shape
    kv_limit = min(max_kv, s.window) if s.window else max_kv

    def call(label, b, lq, lk, mask):
        return Call(b, s.heads, s.kv_heads, lq, lk, s.head_dim, s.head_dim, s.dtype, mask, label)

    def prefill_mask(lq, lk):
        # create_attention_mask: an array only where the chunk passes the window.
        return f"bool-window={s.window}" if s.window and lq > s.window else "causal"

    step = min(prefill_step, max_kv)
    calls = [call("prompt", 1, n, n, prefill_mask(n, n)) for n in powers_of_two(16, step)]
    calls += [
        call("prefill chunk", 1, step, min(lk, step + kv_limit), prefill_mask(step, lk))
        for lk in powers_of_two(2 * step, max_kv)
    ]
    calls += [
        call("decode", 1, 1, lk, "none") for lk in powers_of_two(min(256, kv_limit), kv_limit)
    ]
    calls += [
        call("batched decode", b, 1, lk, "bool-padding")
        for b in batch_sizes
        for lk in powers_of_two(min(1024, kv_limit), kv_limit)
    ]
    calls += [
        call("training step", train_batch, n, n, prefill_mask(n, n))._replace(training=True)
        for n in train_lengths
    ]
    return calls
