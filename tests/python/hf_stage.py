#!/usr/bin/env python3
"""The Hugging Face stage of the test suite: record tiny transformers models, analyse the pairs.

    PY=$(scripts/torch2-env.sh | tail -n 1)
    $PY tests/python/hf_stage.py --cli build/app/lossbound-cli [--jobs N] [--keep DIR]

Records GPT2LMHeadModel, LlamaForCausalLM and BertForMaskedLM with samples/pytorch/record_hf.py
(a reference, a buggy and a fixed gradient-accumulation candidate each): with the default
attention implementation (sdpa) for 10 steps, with attn_implementation="eager" for 3 steps; and
MixtralForCausalLM (sdpa, 3 steps), whose experts take transformers' default grouped_mm path.
The recordings run in parallel (--jobs, default: the number of CPUs). Then
`lossbound-cli analyze --no-cache --json` on every pair, all recorded steps, default method
(first-order), and checks:
  - the fixed pair: exit 0, every step "rounding";
  - the buggy pair: exit 3 and the first exit at step 0;
  - every step of every pair bounded (no "not bounded", so no unsupported op) and its
    self-check passed (the candidate's program reproduces its own logged loss);
  - independently of the engine, the recorded programs re-executed by PyTorch in float64 on the
    reference's step-0 checkpoint: the fixed candidate equals the reference (< 1e-12 relative),
    the buggy one differs (> 1e-4).
Prints one line per pair (verdict, exit code, first-order relative half-width at step 0, time)
and exits 1 when a check fails, saying which.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECORD = os.path.join(ROOT, "samples", "pytorch", "record_hf.py")
MODELS = ("bert", "llama", "gpt2")  # slowest recording first (bert traces at every step)
CASES: List[Tuple[str, str, int]] = [(m, "sdpa", 10) for m in MODELS] + \
    [(m, "eager", 3) for m in MODELS] + \
    [("mixtral", "sdpa", 3)]  # a mixture of experts: topk routing, sort, histc, _grouped_mm



def record(out: str, model: str, attn: str, steps: int) -> Tuple[float, str]:
    """Runs record_hf.py for one model; returns (seconds, its output). Raises on failure."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, RECORD, "--out", out, "--model", model, "--attn", attn,
                           "--steps", str(steps)], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"record_hf.py --model {model} --attn {attn} exited "
                           f"{proc.returncode}:\n{proc.stdout}")
    return time.perf_counter() - start, proc.stdout


def analyse(cli: str, folder: str, style: str) -> Tuple[int, dict, str, float]:
    """lossbound-cli analyze on one pair; returns (exit code, JSON report, stdout, seconds)."""
    report = os.path.join(folder, f"analysis-{style}.json")
    start = time.perf_counter()
    proc = subprocess.run([cli, "analyze", "--no-cache", "--json", report,
                           "--reference", os.path.join(folder, "reference.h5"),
                           "--candidate", os.path.join(folder, f"candidate-{style}.h5")],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seconds = time.perf_counter() - start
    data = {}
    if os.path.exists(report):
        with open(report, encoding="utf-8") as f:
            data = json.load(f)
    return proc.returncode, data, proc.stdout, seconds


def check(style: str, steps: int, code: int, data: dict) -> List[str]:
    """The failed expectations of one pair (empty when it is as expected)."""
    problems = []
    want = 0 if style == "fixed" else 3
    if code != want:
        problems.append(f"exit {code}, expected {want}")
    rows = data.get("steps", [])
    if [r["step"] for r in rows] != list(range(steps)):
        problems.append(f"analysed steps {[r['step'] for r in rows]}, expected 0..{steps - 1}")
    for r in rows:
        if r["verdict"] == "not bounded":
            problems.append(f"step {r['step']} not bounded: {r['note']}")
        elif not r["self_check"]:
            problems.append(f"step {r['step']}: self-check failed ({r['verdict']}): {r['note']}")
        elif style == "fixed" and r["verdict"] != "rounding":
            problems.append(f"step {r['step']}: {r['verdict']}, expected rounding (margin "
                            f"{r['margin']})")
    if style == "buggy" and data.get("first_exit") != 0:
        problems.append(f"first exit {data.get('first_exit')}, expected step 0")
    return problems


def fp64_gaps(folder: str) -> Dict[str, float]:
    """Relative gap of each candidate's recorded program to the reference's, both re-executed
    by PyTorch in float64 on the reference's step-0 checkpoint."""
    sys.path.insert(0, os.path.join(ROOT, "samples", "pytorch"))
    import torch
    from lossbound_replay import RunFile, run_program
    gaps = {}
    with RunFile(os.path.join(folder, "reference.h5")) as ref:
        inputs = ref.inputs_at(0)
        r = float(run_program(ref.program_at(0), inputs, torch.float64, ["loss"])["loss"])
        for style in ("fixed", "buggy"):
            with RunFile(os.path.join(folder, f"candidate-{style}.h5")) as cand:
                c = float(run_program(cand.program_at(0), inputs, torch.float64,
                                      ["loss"])["loss"])
            gaps[style] = abs(c - r) / abs(r)
    return gaps


def half_width(row: dict) -> float:
    """Relative half-width of a step's envelope."""
    lo, hi = float(row["envelope_lo"]), float(row["envelope_hi"])
    return (hi - lo) / abs(hi + lo)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True, help="path of lossbound-cli")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="recordings run in parallel (default: the number of CPUs)")
    ap.add_argument("--keep", help="record into this folder and keep it (default: a temporary "
                                   "folder, removed at the end)")
    ap.add_argument("--steps", type=int, default=10,
                    help="at most this many steps per run (default 10: the SDPA runs 10, the "
                         "eager ones 3; CI's ctest runs 3)")
    ap.add_argument("--models", help="comma-separated models to run (default: every case)")
    args = ap.parse_args()
    if args.steps < 1:
        ap.error("--steps must be at least 1")
    chosen = args.models.split(",") if args.models else None
    known = sorted({m for m, _, _ in CASES})
    if chosen and not set(chosen) <= set(known):
        ap.error(f"--models {args.models}: expected names among {', '.join(known)}")
    cases = [(m, a, min(n, args.steps)) for m, a, n in CASES if not chosen or m in chosen]
    import torch
    import transformers
    print(f"hf stage: torch {torch.__version__}, transformers {transformers.__version__}, "
          f"python {sys.version.split()[0]}, {args.jobs} recording job(s)", flush=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lossbound-hf-") as tmp:
        work = os.path.abspath(args.keep) if args.keep else tmp
        folders: Dict[Tuple[str, str], str] = {
            (m, a): os.path.join(work, f"{m}-{a}") for m, a, _ in cases}
        failed = []
        with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
            jobs = {pool.submit(record, folders[(m, a)], m, a, n): (m, a, n) for m, a, n in cases}
            for job in concurrent.futures.as_completed(jobs):
                m, a, n = jobs[job]
                try:
                    seconds, _ = job.result()
                    print(f"recorded {m}-{a}: {n} steps, 3 runs in {seconds:.1f} s", flush=True)
                except Exception as e:
                    failed.append(f"{m}-{a}: recording failed: {e}")
                    print(failed[-1], flush=True)
        recorded = time.perf_counter() - start
        print(f"recording: {recorded:.1f} s", flush=True)
        if failed:
            print(f"FAILED: {len(failed)} recording(s)")
            return 1
        print(f"{'pair':<18} {'steps':>5} {'exit':>4} {'rel. half-width @0':>18} {'time':>7}  "
              f"verdict", flush=True)
        for m, a, n in cases:
            gaps = fp64_gaps(folders[(m, a)])
            print(f"{m + '-' + a:<18} float64 replay at step 0: fixed - reference "
                  f"{gaps['fixed']:.1e}, buggy - reference {gaps['buggy']:.1e} (relative)",
                  flush=True)
            if not gaps["fixed"] < 1e-12 or not gaps["buggy"] > 1e-4:
                failed.append(f"{m}-{a}: float64 gaps at step 0: fixed {gaps['fixed']:.1e} "
                              f"(expected < 1e-12), buggy {gaps['buggy']:.1e} (expected > 1e-4)")
            for style in ("fixed", "buggy"):
                code, data, out, seconds = analyse(args.cli, folders[(m, a)], style)
                rows = data.get("steps", [])
                width = f"{half_width(rows[0]):.2e}" if rows and rows[0]["verdict"] != \
                    "not bounded" else "-"
                verdict = next((line[len("verdict: "):] for line in out.splitlines()
                                if line.startswith("verdict: ")), "?")
                print(f"{m + '-' + a + '/' + style:<18} {len(rows):>5} {code:>4} {width:>18} "
                      f"{seconds:>6.1f}s  {verdict}", flush=True)
                problems = check(style, n, code, data)
                if problems:
                    failed.append(f"{m}-{a}/{style}: " + "; ".join(problems))
                    print(out)
        total = time.perf_counter() - start
        print(f"analysis: {total - recorded:.1f} s; stage: {total:.1f} s")
    if failed:
        print("FAILED:\n  " + "\n  ".join(failed))
        return 1
    print(f"hf stage: all {2 * len(cases)} pairs as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
