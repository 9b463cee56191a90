#!/usr/bin/env python3
"""Mutation testing of the Metal sources against the emulator tests.

    python tools/mutation/run.py --sample 60 --seed 1 -j 2

Draws a seeded random sample of the mutants (mutants.py) of the kernel families' .metal files (mlx_fused_attn/families/*/*.metal)
and the headers they include, runs the emulator tests that can see each one
in a private copy of the repository (worker.py), and prints the score: the
share of mutants, reviewed equivalents (equivalents.json) and code only CUDA
compiles left out, that a test kills. A timeout counts as killed. See
README.md.
"""

import argparse
import concurrent.futures
import json
import pathlib
import queue
import random
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import mutants as mutants_mod  # noqa: E402
import scope  # noqa: E402
import worker as worker_mod  # noqa: E402

EQUIVALENTS = pathlib.Path(__file__).resolve().parent / "equivalents.json"
KILLED = ("killed", "timeout")


def all_mutants():
    out = []
    for source in scope.mutated_sources():
        out += mutants_mod.mutants(source, (scope.REPO / source).read_text())
    return out


def load_equivalents():
    """{mutant key: reason} of the reviewed equivalent mutants; an entry's
    "occurrence" (default 1) tells lines of the same text apart."""
    entries = json.loads(EQUIVALENTS.read_text())
    return {(e["file"], e["original"], e["mutated"], e.get("occurrence", 1)): e["reason"] for e in entries}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=60, help="mutants drawn (default 60)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("-j", "--jobs", type=int, default=2, help="workers (default 2)")
    parser.add_argument("--timeout", type=int, default=900,
                        help="seconds a test run of one mutant may take; past it, killed")
    parser.add_argument("--work-dir", default="/tmp/fa_mutation",
                        help="the workers' repository copies and driver caches")
    parser.add_argument("--only", type=int, action="append",
                        help="run only these numbers of the sample (repeatable)")
    parser.add_argument("--list", action="store_true", help="print the sample, run nothing")
    parser.add_argument("--json", type=pathlib.Path, help="write every result here")
    parser.add_argument("--rescore", type=pathlib.Path, metavar="JSON",
                        help="print the score of a run's --json results again, with the "
                        "equivalents.json of now (after reviewing its survivors), running nothing")
    args = parser.parse_args(argv)
    if args.rescore:
        return rescore(args)

    population = all_mutants()
    sample = random.Random(args.seed).sample(population, min(args.sample, len(population)))
    numbered = list(enumerate(sample, 1))
    if args.only:
        numbered = [(n, m) for n, m in numbered if n in set(args.only)]
    print(f"{len(population)} mutants of {len(scope.mutated_sources())} files; "
          f"sample of {len(sample)}, seed {args.seed}")
    if args.list:
        for n, m in numbered:
            print(f"{n:3d} {m.describe()}\n      - {m.original_line.strip()}\n      + {m.mutated_line.strip()}")
        return 0

    equivalents = load_equivalents()
    seen_by = scope.seen_by()
    tested = {t: s for t, s in seen_by.items() if s}
    workers = queue.Queue()
    for i in range(args.jobs):
        w = worker_mod.Worker(args.work_dir, i, tested)
        w.sync()
        workers.put(w)

    start = time.monotonic()
    print(f"building the unmutated drivers in {args.jobs} copies under {args.work_dir}", flush=True)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        ws = [workers.get() for _ in range(args.jobs)]
        for w, seconds in zip(ws, pool.map(lambda w: w.baseline(args.timeout), ws)):
            print(f"  {w.repo}: tests pass unmutated ({seconds:.0f} s)", flush=True)
            workers.put(w)

    def one(item):
        n, m = item
        if m.key() in equivalents:
            return n, m, "equivalent", 0.0, equivalents[m.key()]
        w = workers.get()
        try:
            return (n, m, *w.run(m, args.timeout))
        finally:
            workers.put(w)

    results = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for n, m, status, seconds, detail in pool.map(one, numbered):
            results.append((n, m, status, seconds, detail))
            print(f"[{time.monotonic() - start:6.0f} s] {n:3d} {status:22s} {seconds:5.0f} s  "
                  f"{m.describe()}  {detail}", flush=True)

    report(results, args)
    return 0


def report(results, args):
    counted = [r for r in results if r[2] in KILLED + ("survived",)]
    killed = [r for r in counted if r[2] in KILLED]
    print()
    print(f"sample {args.sample}, seed {args.seed}: {len(killed)} of {len(counted)} "
          f"non-equivalent mutants killed ({100 * len(killed) / max(1, len(counted)):.1f}%)"
          f"{'; of them by timeout: %d' % sum(r[2] == 'timeout' for r in killed) if killed else ''}")
    for title, status in (
        ("Survivors (not killed, not reviewed)", "survived"),
        ("Reviewed equivalents (equivalents.json)", "equivalent"),
        ("Not compiled for Metal or its host (preprocessed text unchanged)", "not compiled for Metal"),
    ):
        rows = [r for r in results if r[2] == status]
        if rows:
            print(f"\n{title}: {len(rows)}")
        for n, m, _, _, detail in rows:
            print(f"  {n:3d} {m.describe()}\n        - {m.original_line.strip()}\n"
                  f"        + {m.mutated_line.strip()}")
            if status == "equivalent":
                print(f"        why: {detail}")
    if args.json:
        args.json.write_text(json.dumps([
            {"n": n, "file": m.path, "line": m.line, "operator": m.operator,
             "original": m.original_line.strip(), "mutated": m.mutated_line.strip(),
             "occurrence": m.occurrence,
             "status": status, "seconds": round(seconds), "detail": detail}
            for n, m, status, seconds, detail in results
        ], indent=1))


def rescore(args):
    """The report of saved results (same --sample and --seed, sources
    unchanged since), survivors now in equivalents.json counted as such."""
    sample = random.Random(args.seed).sample(all_mutants(), args.sample)
    equivalents = load_equivalents()
    results = []
    for r in json.loads(args.rescore.read_text()):
        m = sample[r["n"] - 1]
        if m.key()[:3] != (r["file"], r["original"], r["mutated"]):
            raise SystemExit(f"mutant {r['n']} is not the one saved: sources, --sample or --seed differ")
        status, detail = r["status"], r["detail"]
        if status == "survived" and m.key() in equivalents:
            status, detail = "equivalent", equivalents[m.key()]
        results.append((r["n"], m, status, r["seconds"], detail))
    args.json = None
    report(results, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
