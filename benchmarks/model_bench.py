"""A model's speed with attention by mx.fast, by patch_mx_fast's routing
(``auto``, after ``--tune``: the tuned table) and by this package's kernel
wherever one covers the call (``fused``): a whole generation (prefill, then
greedy decoding) and a LoRA training step.

The model is mlx-lm's own, built from a config with random weights
(offline): ``--config`` an mlx-lm config.json, by default Llama 3 8B's
layer shape (hidden 4096, 32 query heads on 8 key/value heads, head dim
128, MLP 14336), cut to ``--layers`` layers. Prefill runs the prompt
through a fresh ``KVCache`` (logits left unevaluated, as mlx-lm's generate
does for its prompt chunks); decode then takes ``--gen`` greedy steps. The
LoRA step is one ``value_and_grad`` of the cross-entropy over
``--train-len`` tokens with mlx-lm's LoRA adapters on every layer (the
rest frozen). The attentions alternate within each of ``--repeats``
rounds, on MLX's default device; medians are reported, with MLX's peak
memory (the prefill's above the weights, the decode's above the prefilled
cache) and the K/V cache's size.

``--kv-bits`` generates into mlx-lm's ``QuantizedKVCache`` (``--kv-group-size``)
instead of a float ``KVCache``: unpatched (``mx.fast``) its attention is
mlx-lm's own quantized matmuls; patched it is this package's quantized
kernel wherever one covers the call. The LoRA step has no cache and is the
same either way.

    python benchmarks/model_bench.py                       # 2 layers, prompt 512, 32 tokens
    python benchmarks/model_bench.py --tune --layers 4 --prompt 4096 --gen 128 \\
        --dtype bfloat16 --json out.json --plot out.png
    python benchmarks/model_bench.py --config path/to/config.json --tune
    python benchmarks/model_bench.py --kv-bits 4 --prompt 4096 --gen 128 --train-len 0
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import NamedTuple

import mlx.core as mx
import mlx.nn as nn

import mlx_fused_attn as fa
from mlx_fused_attn import _strict_json as strict_json
from mlx_fused_attn import model_calls
from mlx_fused_attn.tuning import Call

try:
    import mlx_lm
    from mlx_lm.models.cache import KVCache, QuantizedKVCache
    from mlx_lm.tuner.utils import linear_to_lora_layers
except ImportError:
    sys.exit("model_bench.py needs mlx-lm: pip install mlx-lm==0.32.2")

from quantized_cache import add_kv_options, peak_above

DTYPES = {"float16": mx.float16, "bfloat16": mx.bfloat16, "float32": mx.float32}
# Llama 3 8B's layer shape (config.json of meta-llama/Meta-Llama-3-8B).
SHAPE_8B = dict(
    model_type="llama",
    hidden_size=4096,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=128,
    intermediate_size=14336,
    rms_norm_eps=1e-5,
    rope_theta=500000.0,
    tie_word_embeddings=False,
)
# The attentions compared: mx.fast unpatched, or patch_mx_fast's policy.
ATTENTIONS = ("mx.fast", "auto", "fused")


def model_config(path, layers, vocab):
    """The config to build: the file at `path` (else Llama 3 8B's shape)
    with `layers` layers and a vocabulary of `vocab`."""
    config = dict(SHAPE_8B)
    if path:
        config = model_calls.read_config(path)
    return config | {"num_hidden_layers": layers, "vocab_size": vocab}


def build_model(config, dtype, seed=0):
    """mlx-lm's model for `config` (its model_type's module), random weights."""
    module = importlib.import_module(f"mlx_lm.models.{config['model_type']}")
    mx.random.seed(seed)
    model = module.Model(module.ModelArgs.from_dict(config))
    # Cast before evaluating, so the float32 initial weights never all exist at once.
    model.set_dtype(dtype)
    mx.eval(model.parameters())
    return model


def bench_calls(config, dtype, batch, prompt, gen, train_len):
    """The attention calls this benchmark makes, for tune: the prompt, the
    decode steps against each power-of-two cache length they reach, and the
    training step's forward."""
    shape = model_calls.model_shape(config, dtype=dtype)

    def call(label, lq, lk, mask):
        return Call(batch, shape.heads, shape.kv_heads, lq, lk, shape.head_dim,
                    shape.head_dim, shape.dtype, mask, label)  # fmt: skip

    calls = [call("prompt", prompt - 1, prompt - 1, "causal")]
    lk = prompt
    while lk < prompt + gen:
        calls.append(call("decode", 1, lk, "none"))
        lk = 1 << lk.bit_length()
    calls.append(call("decode", 1, prompt + gen - 1, "none"))
    if train_len:
        calls.append(call("LoRA step", train_len, train_len, "causal"))
    return calls


def agreeing_prefix(a, b):
    """How many leading steps two generations ([batch][step] tokens) share."""
    steps = list(zip(zip(*a), zip(*b)))
    return next((t for t, (x, y) in enumerate(steps) if x != y), len(steps))


class Generation(NamedTuple):
    """One request's generation: its times, tokens and memory."""

    prefill_s: float
    decode_s: float
    tokens: list  # [batch][step]
    prefill_peak: int  # bytes above the weights, the filled cache included
    decode_peak: int  # bytes above the prefilled cache
    cache_bytes: int  # the K/V cache's arrays after the last step


def new_cache(model, kv_bits, group_size):
    """A fresh cache a layer: mlx-lm's QuantizedKVCache with `kv_bits`, else
    a float KVCache."""
    if kv_bits:
        return [QuantizedKVCache(group_size=group_size, bits=kv_bits) for _ in model.layers]
    return [KVCache() for _ in model.layers]


def generate(model, prompt, gen, cache):
    """Prefills `cache` with the prompt (its logits left unevaluated, as
    mlx-lm's generate does for its prompt chunks), then decodes `gen` greedy
    steps."""

    def prefill():
        model(prompt[:, :-1], cache=cache)
        return [c.state for c in cache]

    def decode():
        y = prompt[:, -1:]
        out = []
        for _ in range(gen):
            y = mx.argmax(model(y, cache=cache)[:, -1, :], axis=-1, keepdims=True)
            mx.eval(y)
            out.append(y)
        return mx.concatenate(out, axis=1)

    start = time.perf_counter()
    _, prefill_peak = peak_above(prefill)
    prefill_s = time.perf_counter() - start
    start = time.perf_counter()
    tokens, decode_peak = peak_above(decode)
    decode_s = time.perf_counter() - start
    return Generation(prefill_s, decode_s, tokens.tolist(), prefill_peak, decode_peak,
                      sum(c.nbytes for c in cache))  # fmt: skip


def add_lora(model):
    """mlx-lm's LoRA adapters on every layer, the rest frozen; B made
    nonzero, so that A gets gradients too."""
    model.freeze()
    linear_to_lora_layers(model, len(model.layers), {"rank": 8, "scale": 20.0, "dropout": 0.0})
    mx.random.seed(5)
    for _, layer in model.named_modules():
        if hasattr(layer, "lora_b"):
            layer.lora_b = 0.01 * mx.random.normal(layer.lora_b.shape).astype(layer.lora_b.dtype)
    mx.eval(model.parameters())


def lora_step(model, data):
    """Seconds of one training step: loss and the adapters' gradients."""

    def loss_fn(model, x, y):
        return nn.losses.cross_entropy(model(x), y, reduction="mean")

    step = nn.value_and_grad(model, loss_fn)
    mx.synchronize()
    start = time.perf_counter()
    loss, grads = step(model, data[:, :-1], data[:, 1:])
    mx.eval(loss, grads)
    return time.perf_counter() - start


def attention(name):
    """The context in which `name` runs: unpatched, or patched with its policy."""
    return contextlib.nullcontext() if name == "mx.fast" else fa.patch_mx_fast(policy=name)


def routes(config, dtype, batch, prompt, name):
    """Where the prompt's and a decode step's attention go under `name`."""
    shape = model_calls.model_shape(config, dtype=dtype)
    dt = DTYPES[shape.dtype]

    def one(Lq, Lk, mask):
        q = mx.zeros((batch, shape.heads, Lq, shape.head_dim), dt)
        kv = mx.zeros((batch, shape.kv_heads, Lk, shape.head_dim), dt)
        r = fa.route(q, kv, kv, scale=shape.head_dim**-0.5, mask=mask, policy=name)
        return {"choice": r.choice, "source": r.source, "reason": r.reason}

    return {"prefill": one(prompt - 1, prompt - 1, "causal"), "decode": one(1, prompt, None)}


def device_name():
    if mx.default_device() == mx.cpu:
        cpu = platform.processor() or "?"
        try:
            with open("/proc/cpuinfo") as f:
                cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
        except (OSError, StopIteration):
            pass
        return f"{os.cpu_count()}-core {cpu} CPU"
    info = mx.device_info()
    return f"GPU {info.get('device_name', info.get('architecture', '?'))}"


def git_commit():
    try:
        return subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            cwd=os.path.dirname(os.path.abspath(__file__)),
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return os.environ.get("GIT_COMMIT", "?")


def _cell(x, fmt):
    return "-" if x is None else format(x, fmt)


def kv_cache_name(config):
    """The cache the generation runs in, as the table names it."""
    if config["kv_bits"]:
        return f"QuantizedKVCache({config['kv_bits']} bits, groups of {config['kv_group_size']})"
    return "KVCache"


def print_table(result, file=sys.stdout):
    c = result["config"]
    print(
        f"# model_bench: {result['model']} x {c['layers']} layers, vocab {c['vocab']}, "
        f"{c['dtype']}, batch {c['batch']}, prompt {c['prompt']}, {c['gen']} tokens, "
        f"LoRA step over {c['train_len']} tokens; {kv_cache_name(c)}; {result['device']}; "
        f"mlx {result['mlx']}, "
        f"mlx-lm {result['mlx_lm']}, mlx_fused_attn {result['mlx_fused_attn']}; "
        f"{result['date']}; commit {result['commit']}",
        file=file,
    )
    if result["tuned"] is not None:
        print(f"tuned {len(result['tuned'])} shape classes in {result['tune_s']:.1f} s", file=file)
    print("| attention | prefill tok/s | decode tok/s | LoRA step s | prefill s | decode s "
          "| prefill peak MiB | decode peak MiB | K/V cache MiB "
          "| calls fused / fallback / passthrough | tokens equal to mx.fast's |",
          file=file)  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|", file=file)
    for name, r in result["runs"].items():
        print(
            f"| {name} | {r['prefill_tok_s']:.1f} | {r['decode_tok_s']:.2f} | "
            f"{_cell(r['lora_step_s'], '.3f')} | {r['prefill_s']:.3f} | {r['decode_s']:.3f} | "
            f"{r['prefill_peak_mib']:.1f} | {r['decode_peak_mib']:.1f} | "
            f"{r['kv_cache_mib']:.1f} | {r['calls'] or '-'} | {r['tokens_agree']} of {c['gen']} |",
            file=file,
        )
    base = result["runs"].get("mx.fast")
    for name, r in result["runs"].items():
        if base and name != "mx.fast":
            lora = (f", LoRA step {base['lora_step_s'] / r['lora_step_s']:.2f}x"
                    if r["lora_step_s"] else "")  # fmt: skip
            prefill = r["prefill_tok_s"] / base["prefill_tok_s"]
            print(f"{name} against mx.fast: prefill {prefill:.2f}x, "
                  f"decode {r['decode_tok_s'] / base['decode_tok_s']:.2f}x{lora}; routes: "
                  + "; ".join(f"{k} -> {v['choice']} ({v['source']})"
                              for k, v in result["routes"][name].items()),
                  file=file)  # fmt: skip


def plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [("prefill_tok_s", "prefill tokens / s"), ("decode_tok_s", "decode tokens / s"),
            ("lora_step_s", "LoRA step s (lower is better)")]  # fmt: skip
    fig, axes = plt.subplots(1, len(keys), figsize=(12, 4.5))
    names = list(result["runs"])
    for ax, (key, label) in zip(axes, keys):
        values = [result["runs"][n][key] or 0.0 for n in names]
        bars = ax.bar(names, values, color=["tab:gray", "tab:blue", "tab:orange"][: len(names)])
        ax.bar_label(bars, fmt="%.3g")
        ax.set_ylabel(label)
        ax.set_xlabel("attention")
    c = result["config"]
    fig.suptitle(
        f"{result['model']} x {c['layers']} layers, {c['dtype']}, batch {c['batch']}, "
        f"prompt {c['prompt']}, {c['gen']} tokens\n{result['device']}; mlx {result['mlx']}, "
        f"mlx-lm {result['mlx_lm']}, mlx_fused_attn {result['mlx_fused_attn']}; "
        f"{result['date']}; commit {result['commit']}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--config",
                    help="an mlx-lm config.json or its folder (default: Llama 3 8B's shape)")
    ap.add_argument("--layers", type=int, default=2, help="decoder layers (Llama 3 8B has 32)")
    ap.add_argument("--prompt", type=int, default=512, help="prompt tokens")
    ap.add_argument("--gen", type=int, default=32, help="greedy decode steps")
    ap.add_argument("--batch", type=int, default=1, help="requests decoded together")
    ap.add_argument("--train-len", type=int, default=256,
                    help="LoRA step tokens a sequence (0: none)")
    ap.add_argument("--dtype", choices=list(DTYPES), default="float16")
    ap.add_argument("--vocab", type=int, default=32000, help="vocabulary (Llama 3: 128256)")
    ap.add_argument("--repeats", type=int, default=1, help="rounds; the median is reported")
    ap.add_argument("--attention", default=",".join(ATTENTIONS),
                    help=f"the attentions compared, comma-separated from {', '.join(ATTENTIONS)}")
    ap.add_argument("--tune", action="store_true",
                    help="tune this benchmark's calls first (python -m mlx_fused_attn.tune)")
    add_kv_options(ap, "generate into mlx-lm's QuantizedKVCache of this many bits instead of a "
                       "float KVCache (4 and 8 have GPU kernels)")  # fmt: skip
    ap.add_argument("--device", choices=["cpu", "gpu"], help="default: MLX's default device")
    ap.add_argument("--json", help="write the results as JSON")
    ap.add_argument("--plot", help="write a bar chart (PNG)")
    args = ap.parse_args(argv)
    names = args.attention.split(",")
    if not names or set(names) - set(ATTENTIONS):
        ap.error(f"--attention takes names from {', '.join(ATTENTIONS)}; got {args.attention!r}")
    if args.device:
        mx.set_default_device(mx.cpu if args.device == "cpu" else mx.gpu)
    try:
        config = model_config(args.config, args.layers, args.vocab)
    except (OSError, json.JSONDecodeError) as e:
        ap.error(f"--config: {e}")

    tuned, tune_s = None, None
    if args.tune:
        start = time.perf_counter()
        tuned = fa.tune(bench_calls(config, args.dtype, args.batch, args.prompt, args.gen,
                                    args.train_len))  # fmt: skip
        tune_s = time.perf_counter() - start

    model = build_model(config, DTYPES[args.dtype])
    prompt = mx.random.randint(0, args.vocab, (args.batch, args.prompt), key=mx.random.key(1))
    data = mx.random.randint(0, args.vocab, (args.batch, args.train_len + 1), key=mx.random.key(2))
    # Warm-up at the timed shapes (a shorter prompt left the first timed run
    # to pay for cuDNN plans and allocations at the full length: seen on an
    # H200 as an 8x "speedup" of calls both paths sent to mx.fast).
    def cache():
        return new_cache(model, args.kv_bits, args.kv_group_size)

    for name in names:
        with attention(name):
            generate(model, prompt, 2, cache())
    gen_times = {n: [] for n in names}
    calls = {}
    for _ in range(args.repeats):
        for name in names:
            with attention(name) as patch:
                gen_times[name].append(generate(model, prompt, args.gen, cache()))
            calls[name] = patch.stats if patch else None
    lora_times = {n: [] for n in names}
    if args.train_len:
        add_lora(model)
        for name in names:
            with attention(name):
                lora_step(model, data)
        for _ in range(args.repeats):
            for name in names:
                with attention(name):
                    lora_times[name].append(lora_step(model, data))

    runs = {}
    first = gen_times[names[0]][0].tokens
    reference = gen_times["mx.fast"][0].tokens if "mx.fast" in gen_times else first
    for name, ts in gen_times.items():
        prefill = statistics.median(t.prefill_s for t in ts)
        decode = statistics.median(t.decode_s for t in ts)
        stats = calls[name]
        runs[name] = {
            "prefill_s": prefill,
            "decode_s": decode,
            "prefill_tok_s": args.batch * (args.prompt - 1) / prefill,
            "decode_tok_s": args.batch * args.gen / decode,
            "lora_step_s": statistics.median(lora_times[name]) if lora_times[name] else None,
            "prefill_peak_mib": max(t.prefill_peak for t in ts) / 2**20,
            "decode_peak_mib": max(t.decode_peak for t in ts) / 2**20,
            "kv_cache_mib": ts[0].cache_bytes / 2**20,
            "calls": (f"{stats.fused} / {stats.fallback} / {stats.passed_through}"
                      if stats else None),
            # Random weights give near ties, so rounding flips a greedy token
            # sooner or later; a flip at the first token would point at a bug.
            "tokens_agree": agreeing_prefix(reference, ts[0].tokens),
        }
    result = {
        "config": vars(args),
        "model": args.config or "Llama-3-8B-shaped",
        "model_config": config,
        "device": device_name(),
        "mlx": mx.__version__,
        "mlx_lm": mlx_lm.__version__,
        "mlx_fused_attn": fa.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": git_commit(),
        "tune_s": tune_s,
        "tuned": None if tuned is None else [
            {"class": r.shape_class.key(), "winner": r.winner, "us": r.us, "calls": r.calls}
            for r in tuned],  # fmt: skip
        "runs": runs,
        "routes": {n: routes(config, args.dtype, args.batch, args.prompt, n)
                   for n in names if n != "mx.fast"},  # fmt: skip
    }
    print_table(result)
    if args.json:
        strict_json.dump(result, args.json)
    if args.plot:
        plot(result, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
