"""Tune routing on this machine: time mx.fast and this package's fused
plans for the calls a model makes, and keep the winner of each shape class
in the tuned table that ``patch_mx_fast()`` and ``route()`` read.

    python -m mlx_fused_attn.tune CONFIG [--max-kv N] [--device cpu|gpu]
    python -m mlx_fused_attn.tune --shapes b=1,hq=32,hkv=8,lq=1,lk=4096,d=128,dtype=bfloat16
    python -m mlx_fused_attn.tune --show

CONFIG is an mlx-lm model's config.json (or its folder): heads, key/value
heads, head dim, dtype and sliding window give the calls (model_calls.py).
``--shapes`` times explicit calls instead (or as well). Prints a table of
the winners, their time and mx.fast's over theirs, and where the table was
written. Exit status 0, or 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import sys
import time

import mlx.core as mx

from . import _strict_json, candidates, model_calls, tuned_table, tuning
from ._progress import ProgressBar

# The longest context tuned by default: the CPU takes seconds a call at
# long contexts, so it stops sooner.
DEFAULT_MAX_KV = {"cpu": 2048, "gpu": 32768}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m mlx_fused_attn.tune",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("config", nargs="?", help="an mlx-lm model's config.json, or its folder")
    p.add_argument("--shapes", nargs="+", default=[], metavar="CALL", type=_call,
                   help="explicit calls: b=,hq=,hkv=,lq=,lk=,d=[,dv=],dtype=[,mask=] "
                        f"(mask: {', '.join(tuning.MASKS)})")  # fmt: skip
    p.add_argument("--device", choices=("cpu", "gpu"), help="default: MLX's default device")
    p.add_argument("--max-kv", type=int, help="the longest context (default: "
                   + ", ".join(f"{k} {v}" for k, v in DEFAULT_MAX_KV.items()) + ")")  # fmt: skip
    p.add_argument("--prefill-step", type=int, default=2048, help="mlx-lm's prefill chunk")
    p.add_argument("--batch", default="8", help="batched decoding's batch sizes, comma-separated")
    p.add_argument("--dtype", choices=sorted(tuning.DTYPES), help="instead of the config's")
    p.add_argument("--train-lengths", default="",
                   help="also training steps (forward and gradient, as mlx-lm's LoRA) of these "
                        "lengths, comma-separated")
    p.add_argument("--train-batch", type=int, default=4,
                   help="with --train-lengths: the sequences a step (mlx-lm's LoRA default: 4)")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--chain", type=int,
                   help="dependent calls a timed run makes (default: 8 on a GPU, 1 on the CPU)")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--budget", type=float, default=1.0,
                   help="timed seconds after which a candidate's runs stop")  # fmt: skip
    p.add_argument("--no-save", action="store_true", help="time and print, keep no table")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.add_argument("--show", action="store_true", help="print this device's table and exit")
    return p


def _call(text: str) -> tuning.Call:
    try:
        return tuning.Call.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _us(x) -> str:
    return "-" if x is None else f"{x:.1f}"


def print_results(results: list[tuning.ClassResult], out=sys.stdout) -> None:
    rows = [("shape class", "winner", "us", "mx.fast us", "speedup", "calls")]
    for r in results:
        speedup = r.speedup()
        fast = r.us.get(candidates.MX_FAST)
        if fast is None and candidates.MX_FAST in r.skipped:
            fast_text = "skipped"
        else:
            fast_text = _us(fast)
        speedup_text = "-" if speedup is None else f"{speedup:.2f}x"
        rows.append((r.shape_class.key(), r.winner, _us(r.us[r.winner]), fast_text,
                     speedup_text, "; ".join(r.calls)))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    for row in rows:
        cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1])]
        cells += [c.rjust(w) for c, w in zip(row[2:5], widths[2:5])]
        print("  ".join(cells + [row[5]]), file=out)


def _show(device: mx.Device) -> int:
    table = tuned_table.table_for(device)
    if table is None:
        print(f"no tuned table for {tuned_table.device_key(device)['device']} in "
              f"{tuned_table.path()}: routing uses the shipped defaults and rules")  # fmt: skip
        return 0
    print(f"{table.key['device']}, tuned {table.tuned} ({tuned_table.path()}):")
    results = [tuning.ClassResult(c, e.winner, e.us, e.per_call, e.skipped, e.calls)
               for c, e in sorted(table.classes.items())]  # fmt: skip
    print_results(results)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    kind = args.device or ("gpu" if mx.default_device().type == mx.DeviceType.gpu else "cpu")
    if kind == "gpu" and not mx.is_available(mx.gpu):
        parser.error("--device gpu: MLX has no GPU here")
    device = mx.Device(mx.gpu if kind == "gpu" else mx.cpu)
    if args.show:
        return _show(device)
    if not args.config and not args.shapes:
        parser.error("give a model's config, --shapes, or --show")
    calls = list(args.shapes)
    if args.config:
        try:
            shape = model_calls.model_shape(model_calls.read_config(args.config), dtype=args.dtype)
            batches = tuple(int(b) for b in args.batch.split(","))
            train = tuple(int(n) for n in args.train_lengths.split(",") if n)
        except (OSError, ValueError) as e:
            parser.error(f"{args.config}: {e}")
        max_kv = args.max_kv or DEFAULT_MAX_KV[kind]
        print(f"{shape.describe()}; contexts up to {max_kv} keys, prefill chunks of "
              f"{args.prefill_step}, batched decoding of {args.batch} sequences")  # fmt: skip
        calls += model_calls.model_calls(
            shape, max_kv=max_kv, prefill_step=args.prefill_step, batch_sizes=batches,
            train_lengths=train, train_batch=args.train_batch,
        )  # fmt: skip
    start = time.monotonic()
    results = tuning.tune(
        calls, device=device, warmup=args.warmup, repeats=args.repeats,
        budget_s=args.budget, chain=args.chain, save=not args.no_save, progress=ProgressBar(),
    )  # fmt: skip
    elapsed = time.monotonic() - start
    print_results(results)
    where = "not saved (--no-save)" if args.no_save else f"saved to {tuned_table.path()}"
    print(f"{len(results)} shape classes on {tuned_table.device_key(device)['device']} "
          f"in {elapsed:.1f} s; {where}")  # fmt: skip
    if args.json:
        _strict_json.dump(
            {"device": tuned_table.device_key(device), "seconds": elapsed,
             "classes": [{"class": r.shape_class.key(), "winner": r.winner, "us": r.us,
                          "skipped": r.skipped, "calls": r.calls} for r in results]},
            args.json,
        )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
