#!/usr/bin/python3
"""Records one rung of the scale ladder (issue 14) and measures PyTorch on its step.

    /usr/bin/python3 bench/scale_ladder_record.py --size NAME --out DIR [--steps N]
    /usr/bin/python3 bench/scale_ladder_record.py --list

The model is the GPT of the sample sessions (samples/pytorch/make_samples.py: token + position
embedding, pre-LN blocks of causal self-attention and a GELU MLP, final layer norm, lm_head) with
its module constants set to the rung's width, heads, context, blocks, vocabulary and batch; the
data are the samples' variable-length, padded counting sequences at that context. Three runs of
N steps (default 3) from the same initial weights on the same batches, with a checkpoint at the
first and the last step:

  reference.h5        the whole batch: summed token loss / token count
  candidate-fixed.h5  4 micro-batches, summed token loss_i / total token count (rounding only)
  candidate-buggy.h5  4 micro-batches, mean of the micro-batch means (the transformers bug)

Then it measures PyTorch eager (CPU) running the candidate-fixed step function (the forward and
backward pass of the 4 micro-batches) at the reference's first checkpoint: median wall time in
float32 and float64, on 1 thread and on every core (and the thread's CPU time on 1 thread, which a
loaded machine inflates less than wall time), and the peak resident memory (ru_maxrss) of a
fresh process that runs the float64 step once, next to that process's resident memory just before
the step (/proc/self/statm). It writes them to DIR/torch.json, which bench-scale-ladder reads.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES_PY = os.path.join(os.path.dirname(HERE), "samples", "pytorch")
sys.path.insert(0, SAMPLES_PY)
import make_samples as ms  # noqa: E402
from lossbound_recorder import RunRecorder  # noqa: E402

# The rungs: width 128 -> 512, context 64 -> 256, more blocks at the top. The batch shrinks as
# the context grows (a multiple of the 4 micro-batches) so that a randomized execution of the
# largest rung still takes about a minute on one core.
SIZES = {
    "s0": dict(vocab=512, width=128, heads=4, context=64, blocks=1, batch=16),
    "s1": dict(vocab=512, width=256, heads=4, context=128, blocks=1, batch=8),
    "s2": dict(vocab=1024, width=384, heads=6, context=192, blocks=2, batch=4),
    "s3": dict(vocab=1024, width=512, heads=8, context=256, blocks=3, batch=4),
}


def configure(size: dict) -> None:
    """Sets make_samples' module constants (read when a model is built and run) to the rung."""
    ms.VOCAB = size["vocab"]
    ms.CONTEXT = size["context"]
    ms.WIDTH = size["width"]
    ms.HEADS = size["heads"]
    ms.BLOCKS = size["blocks"]
    ms.MLP = 4 * size["width"]
    ms.BATCH = size["batch"]


def parameter_count() -> int:
    return sum(v.numel() for v in ms.initial_state().values())


def train(path: str, name: str, role: str, step_fn, batches, notes: str) -> None:
    """make_samples.train with checkpoints at the first and the last step only."""
    params = {k: v.clone().requires_grad_() for k, v in ms.initial_state().items()}
    opt = torch.optim.AdamW(params.values(), lr=ms.LR, weight_decay=0.01)
    last = len(batches) - 1
    with RunRecorder(path, run_name=name, role=role, step_fn=step_fn, overwrite=True,
                     notes=notes) as rec:
        for step_no, batch in enumerate(batches):
            out = step_fn(params, batch)
            rec.log(step_no, out["loss"].item(), lr=ms.LR)
            if step_no in (0, last):
                rec.checkpoint(step_no, params, batch)
            for k, p in params.items():
                p.grad = out["grad:" + k].detach()
            opt.step()
            opt.zero_grad(set_to_none=True)


def step_inputs(dtype: torch.dtype):
    """The candidate-fixed step function and the reference's state and batch at step 0."""
    params = {k: v.to(dtype).requires_grad_() for k, v in ms.initial_state().items()}
    batch = ms.make_batches(1)[0]
    return ms.gradaccum_step(ms.TinyGPT(), hf_bug=False), params, batch


def median_seconds(f, repeats: int, clock=time.perf_counter) -> float:
    f()
    ts = []
    for _ in range(repeats):
        t0 = clock()
        f()
        ts.append(clock() - t0)
    ts.sort()
    return ts[len(ts) // 2]


def peak_child(size_name: str) -> dict:
    """Runs the float64 step once in a fresh process; returns its resident memory (KiB)."""
    out = subprocess.run([sys.executable, __file__, "--size", size_name, "--peak-child"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), help="the rung to record")
    ap.add_argument("--out", help="folder for the three run files and torch.json")
    ap.add_argument("--steps", type=int, default=3, help="training steps (default 3)")
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats (median; default 3)")
    ap.add_argument("--list", action="store_true", help="print the rungs and their sizes")
    ap.add_argument("--timing-only", action="store_true",
                    help="measure PyTorch and rewrite torch.json only (the run files exist)")
    ap.add_argument("--peak-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.list:
        for name, size in SIZES.items():
            configure(size)
            print(f"{name}: {parameter_count()} parameters, {size}")
        return 0
    if not args.size:
        ap.error("--size is required")
    configure(SIZES[args.size])
    if args.peak_child:
        step, params, batch = step_inputs(torch.float64)
        with open("/proc/self/statm") as f:  # resident pages now, before the step
            before = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
        step(params, batch)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps({"before_kib": before, "peak_kib": peak}))
        return 0
    if not args.out or args.steps < 2:
        ap.error("--out is required and --steps must be at least 2")
    os.makedirs(args.out, exist_ok=True)
    batches = ms.make_batches(args.steps)
    t0 = time.perf_counter()
    runs = [] if args.timing_only else [
        ("reference", "reference", ms.reference_step(ms.TinyGPT()), ms.REFERENCE_NOTES),
        ("candidate-fixed", "candidate", ms.gradaccum_step(ms.TinyGPT(), hf_bug=False),
         ms.SAMPLES["gradaccum-fixed"]["notes"]),
        ("candidate-buggy", "candidate", ms.gradaccum_step(ms.TinyGPT(), hf_bug=True),
         ms.SAMPLES["gradaccum-hf-bug"]["notes"])]
    for file, role, fn, notes in runs:
        train(os.path.join(args.out, file + ".h5"), f"ladder-{args.size}/{file}", role, fn,
              batches, notes)
    record_seconds = time.perf_counter() - t0

    timing = {}
    cores = os.cpu_count() or 1
    for threads in sorted({1, cores}):
        torch.set_num_threads(threads)
        for dtype, key in ((torch.float32, "fp32"), (torch.float64, "fp64")):
            step, params, batch = step_inputs(dtype)
            timing[f"{key}_t{threads}"] = median_seconds(lambda: step(params, batch),
                                                         args.repeats)
            if threads == 1:  # CPU time of this thread: what a shared machine does not inflate
                timing[f"{key}_cpu_t1"] = median_seconds(lambda: step(params, batch),
                                                         args.repeats, time.thread_time)
    torch.set_num_threads(1)
    result = {"size": args.size, "parameters": parameter_count(), "config": SIZES[args.size],
              "steps": args.steps, "torch": torch.__version__, "cores": cores,
              "seconds": timing, "peak_fp64": peak_child(args.size),
              "record_seconds": record_seconds}
    with open(os.path.join(args.out, "torch.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
