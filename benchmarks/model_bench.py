"""Prefill and decode speed of an mlx-lm Llama with and without patch_mx_fast.

The model is mlx-lm's own Llama (``mlx_lm.models.llama``) shaped like Llama
3 8B -- hidden 4096, 32 query heads on 8 key/value heads, head dim 128, MLP
14336 -- cut to ``--layers`` layers, with random weights. Prefill runs the
prompt through a fresh ``KVCache`` (logits left unevaluated, as mlx-lm's
generate does for its prompt chunks); decode then takes ``--gen`` greedy
steps, one token per step. Both run unpatched (mx.fast) and under
``patch_mx_fast(policy=...)`` on MLX's default device, alternating, and the
median of ``--repeats`` runs is reported.

    python benchmarks/model_bench.py                       # 2 layers, prompt 512, 32 tokens
    python benchmarks/model_bench.py --layers 4 --prompt 4096 --gen 128 --dtype bfloat16 \\
        --json out.json --plot out.png
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import subprocess
import sys
import time

import mlx.core as mx

import mlx_fused_attn as fa
from mlx_fused_attn import _strict_json as strict_json

try:
    import mlx_lm
    from mlx_lm.models import llama
    from mlx_lm.models.cache import KVCache
except ImportError:
    sys.exit("model_bench.py needs mlx-lm: pip install mlx-lm==0.32.2")

DTYPES = {"float16": mx.float16, "bfloat16": mx.bfloat16, "float32": mx.float32}
# Llama 3 8B's layer shape (config.json of meta-llama/Meta-Llama-3-8B).
SHAPE_8B = dict(
    hidden_size=4096,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=128,
    intermediate_size=14336,
    rms_norm_eps=1e-5,
    rope_theta=500000.0,
)


def build_model(layers, vocab, dtype, seed=0):
    mx.random.seed(seed)
    args = llama.ModelArgs(
        model_type="llama",
        num_hidden_layers=layers,
        vocab_size=vocab,
        tie_word_embeddings=False,
        **SHAPE_8B,
    )
    model = llama.Model(args)
    # Cast before evaluating, so the float32 initial weights never all exist at once.
    model.set_dtype(dtype)
    mx.eval(model.parameters())
    return model


def agreeing_prefix(a, b):
    """How many leading steps two generations ([batch][step] tokens) share."""
    steps = list(zip(zip(*a), zip(*b)))
    return next((t for t, (x, y) in enumerate(steps) if x != y), len(steps))


def run_once(model, prompt, gen):
    """(prefill seconds, decode seconds, generated tokens) for one request."""
    cache = [KVCache() for _ in model.layers]
    mx.synchronize()
    start = time.perf_counter()
    model(prompt[:, :-1], cache=cache)
    mx.eval([c.state for c in cache])
    prefill = time.perf_counter() - start
    y = prompt[:, -1:]
    out = []
    start = time.perf_counter()
    for _ in range(gen):
        y = mx.argmax(model(y, cache=cache)[:, -1, :], axis=-1, keepdims=True)
        mx.eval(y)
        out.append(y)
    decode = time.perf_counter() - start
    return prefill, decode, mx.concatenate(out, axis=1).tolist()


def routes(model, prompt, policy):
    """Where the prefill's and a decode step's attention go under the patch."""
    args = model.args
    B, P = prompt.shape
    H, Hk, D = args.num_attention_heads, args.num_key_value_heads, args.head_dim
    dt = model.model.embed_tokens.weight.dtype

    def one(Lq, Lk, mask):
        q, kv = mx.zeros((B, H, Lq, D), dt), mx.zeros((B, Hk, Lk, D), dt)
        return fa.route(q, kv, kv, scale=D**-0.5, mask=mask, policy=policy)

    return {"prefill": one(P - 1, P - 1, "causal"), "decode": one(1, P, None)}


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


def print_table(result, file=sys.stdout):
    c = result["config"]
    print(
        f"# model_bench: Llama-8B-shaped x {c['layers']} layers, vocab {c['vocab']}, "
        f"{c['dtype']}, batch {c['batch']}, prompt {c['prompt']}, {c['gen']} tokens, "
        f"policy {c['policy']}; "
        f"{result['device']}; mlx {result['mlx']}, mlx-lm {result['mlx_lm']}, "
        f"mlx_fused_attn {result['mlx_fused_attn']}; {result['date']}; commit {result['commit']}",
        file=file,
    )
    print(
        "| attention | prefill tok/s | decode tok/s | prefill s | decode s | calls fused / fallback / passthrough |",
        file=file,
    )
    print("|---|---:|---:|---:|---:|---|", file=file)
    for name, r in result["runs"].items():
        print(
            f"| {name} | {r['prefill_tok_s']:.1f} | {r['decode_tok_s']:.2f} | "
            f"{r['prefill_s']:.3f} | {r['decode_s']:.3f} | {r.get('calls', '-')} |",
            file=file,
        )
    base, patched = result["runs"]["mx.fast"], result["runs"]["patched"]
    print(
        f"speedup: prefill {patched['prefill_tok_s'] / base['prefill_tok_s']:.2f}x, "
        f"decode {patched['decode_tok_s'] / base['decode_tok_s']:.2f}x; "
        f"greedy tokens equal to mx.fast's: the first {result['tokens_agree']} of {result['config']['gen']}; routes: "
        + "; ".join(f"{k} -> {v[0]} ({v[1]})" for k, v in result["routes"].items()),
        file=file,
    )


def plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 4.5))
    names = list(result["runs"])
    for ax, key, label in zip(axes, ("prefill_tok_s", "decode_tok_s"), ("prefill", "decode")):
        values = [result["runs"][n][key] for n in names]
        bars = ax.bar(names, values, color=["tab:gray", "tab:blue"])
        ax.bar_label(bars, fmt="%.3g")
        ax.set_ylabel("tokens / s (higher is better)")
        ax.set_xlabel("attention")
        ax.set_title(label)
    c = result["config"]
    fig.suptitle(
        f"Llama-8B-shaped x {c['layers']} layers, {c['dtype']}, batch {c['batch']}, "
        f"prompt {c['prompt']}, {c['gen']} tokens, policy {c['policy']}\n{result['device']}; mlx {result['mlx']}, "
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
    ap.add_argument("--layers", type=int, default=2, help="decoder layers (Llama 3 8B has 32)")
    ap.add_argument("--prompt", type=int, default=512, help="prompt tokens")
    ap.add_argument("--gen", type=int, default=32, help="greedy decode steps")
    ap.add_argument("--batch", type=int, default=1, help="requests decoded together")
    ap.add_argument("--dtype", choices=list(DTYPES), default="float16")
    ap.add_argument("--vocab", type=int, default=32000, help="vocabulary (Llama 3: 128256)")
    ap.add_argument("--repeats", type=int, default=1, help="runs of each; the median is reported")
    ap.add_argument(
        "--policy", choices=["auto", "fused"], default="auto", help="patch_mx_fast's policy"
    )
    ap.add_argument("--device", choices=["cpu", "gpu"], help="default: MLX's default device")
    ap.add_argument("--json", help="write the results as JSON")
    ap.add_argument("--plot", help="write a bar chart (PNG)")
    args = ap.parse_args(argv)
    if args.device:
        mx.set_default_device(mx.cpu if args.device == "cpu" else mx.gpu)

    model = build_model(args.layers, args.vocab, DTYPES[args.dtype])
    prompt = mx.random.randint(0, args.vocab, (args.batch, args.prompt), key=mx.random.key(1))
    # Warm-up at the timed shapes (a shorter prompt left the first timed run
    # to pay for cuDNN plans and allocations at the full length: seen on an
    # H200 as an 8x "speedup" of calls both paths sent to mx.fast).
    for patched in (False, True):
        with fa.patch_mx_fast(policy=args.policy) if patched else contextlib.nullcontext():
            run_once(model, prompt, 2)

    times = {"mx.fast": [], "patched": []}
    tokens = {}
    calls = None
    for _ in range(args.repeats):
        times["mx.fast"].append(run_once(model, prompt, args.gen))
        with fa.patch_mx_fast(policy=args.policy) as patch:
            times["patched"].append(run_once(model, prompt, args.gen))
        calls = patch.stats
    runs = {}
    for name, ts in times.items():
        prefill = statistics.median(t[0] for t in ts)
        decode = statistics.median(t[1] for t in ts)
        tokens[name] = ts[0][2]
        runs[name] = {
            "prefill_s": prefill,
            "decode_s": decode,
            "prefill_tok_s": args.batch * (args.prompt - 1) / prefill,
            "decode_tok_s": args.batch * args.gen / decode,
        }
    runs["patched"]["calls"] = f"{calls.fused} / {calls.fallback} / {calls.passed_through}"
    result = {
        "config": vars(args) | {"shape": SHAPE_8B},
        "device": device_name(),
        "mlx": mx.__version__,
        "mlx_lm": mlx_lm.__version__,
        "mlx_fused_attn": fa.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": git_commit(),
        "runs": runs,
        # Random weights give near ties, so rounding flips a greedy token
        # sooner or later; a flip at the first token would point at a bug.
        "tokens_agree": agreeing_prefix(tokens["mx.fast"], tokens["patched"]),
        "routes": routes(model, prompt, args.policy),
    }
    print_table(result)
    if args.json:
        strict_json.dump(result, args.json)
    if args.plot:
        plot(result, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
