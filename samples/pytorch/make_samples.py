#!/usr/bin/python3
"""Generates Lossbound's sample sessions: samples/<name>/{reference,candidate}.h5.

    /usr/bin/python3 samples/pytorch/make_samples.py [--out DIR] [--steps N] [--only NAME ...]

Deterministic: fixed seeds, CPU, torch.set_num_threads(1). Every sample trains the same tiny
GPT (token + position embedding, 1 pre-LN block of causal self-attention and a GELU MLP, final
layer norm, lm_head) from the same initial weights on the same batches (16 variable-length
padded sequences per step, labels -100 on padding), with AdamW, for 50 steps, recording a
checkpoint (the parameters before the update + the batch) and the reported loss at every step.
The reference and the candidate differ only inside their step_fn:

  gradaccum-fixed   candidate: 4 micro-batches x 4 sequences (sliced inside step_fn), each
                    micro-batch's summed token loss divided by the total token count of the whole
                    batch, gradients accumulated: the same function as the reference.
  gradaccum-hf-bug  candidate: 4 micro-batches, each divided by its own token count, the four
                    means averaged: the Hugging Face transformers bug fixed in October 2024.
  kernel-path       candidate: the same model through other kernels (matmul + add instead of
                    addmm, q scaled before q @ k^T, per-token losses summed per sequence first).

One more sample trains a small CNN instead (two conv + batch-norm (train mode) + ReLU stages,
max pooling, global average pooling, a linear classifier) on synthetic 12x12 images, with SGD
and momentum, for 20 steps; its batch-norm buffers are inputs too and each checkpoint is taken
before the step (train-mode batch norm updates them in place):

  cnn-softmax-bug   candidate: F.cross_entropy(F.softmax(logits, dim=1), y), the classic bug of
                    applying softmax before a loss that applies log-softmax itself.

Afterwards it measures, at every reference checkpoint, the candidate formula against the
reference (same weights, same batch), in float32 (eager) and float64 (the recorded programs
re-executed from their JSON), checks that every recorded program re-executed in float64
reproduces its run's logged losses, and rewrites the generated blocks of samples/README.md (the
GPT block when the three GPT samples were regenerated, the CNN block when the CNN sample was).
`--only cnn-softmax-bug` regenerates the CNN sample alone and leaves the GPT samples' files as
they are.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import warnings
from typing import Callable, Dict, List

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.stateless import functional_call

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from lossbound_recorder import RunRecorder  # noqa: E402
from lossbound_replay import RunFile, program_ops, run_program  # noqa: E402

SAMPLES_DIR = os.path.dirname(HERE)

# Model and data
VOCAB = 48          # token 0 is padding
CONTEXT = 16
WIDTH = 16
HEADS = 2           # head size 8: the attention scale 1/sqrt(8) is not a power of two
BLOCKS = 1
MLP = 4 * WIDTH
BATCH = 16
MICRO = 4           # micro-batches of the gradient-accumulation candidates
STEPS = 50
LR = 1e-2
DATA_SEED = 1234
INIT_SEED = 42
IGNORE = -100
NOISE = 0.1         # probability that a token is replaced by a random one
SAMPLES_EPOCH = 1795305600  # 2026-11-22T00:00:00Z, the "created" time of the sample files


# ---------------------------------------------------------------------------------------------
# The model. alt_path=True computes the same function through different kernels.


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(WIDTH)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)
        self.ln2 = nn.LayerNorm(WIDTH)
        self.fc = nn.Linear(WIDTH, MLP)
        self.fc2 = nn.Linear(MLP, WIDTH)

    def forward(self, x: torch.Tensor, alt_path: bool) -> torch.Tensor:
        lin = _linear_alt if alt_path else F.linear
        b, t, _ = x.shape
        hs = WIDTH // HEADS
        q, k, v = lin(self.ln1(x), self.qkv.weight, self.qkv.bias).split(WIDTH, dim=2)
        q = q.view(b, t, HEADS, hs).transpose(1, 2)
        k = k.view(b, t, HEADS, hs).transpose(1, 2)
        v = v.view(b, t, HEADS, hs).transpose(1, 2)
        scale = 1.0 / math.sqrt(hs)
        if alt_path:
            att = (q * scale) @ k.transpose(-2, -1)
        else:
            att = (q @ k.transpose(-2, -1)) * scale
        future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        att = att.masked_fill(future, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, WIDTH)
        x = x + lin(y, self.proj.weight, self.proj.bias)
        h = F.gelu(lin(self.ln2(x), self.fc.weight, self.fc.bias))
        return x + lin(h, self.fc2.weight, self.fc2.bias)


def _linear_alt(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return x @ w.t() + b


class TinyGPT(nn.Module):
    def __init__(self, alt_path: bool = False):
        super().__init__()
        self.alt_path = alt_path
        self.wte = nn.Embedding(VOCAB, WIDTH)
        self.wpe = nn.Embedding(CONTEXT, WIDTH)
        self.blocks = nn.ModuleList([Block() for _ in range(BLOCKS)])
        self.lnf = nn.LayerNorm(WIDTH)
        self.lm_head = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.wte(ids) + self.wpe(pos)
        for block in self.blocks:
            x = block(x, self.alt_path)
        x = self.lnf(x)
        if self.alt_path:
            return x @ self.lm_head.weight.t()
        return self.lm_head(x)


def initial_state() -> Dict[str, torch.Tensor]:
    torch.manual_seed(INIT_SEED)
    model = TinyGPT()
    return {k: v.detach().clone() for k, v in model.named_parameters()}


# ---------------------------------------------------------------------------------------------
# Data: counting sequences x_j = 1 + (s + j*d) mod (V-1) with random start s, stride d and noise;
# lengths 4..17 tokens, so short sequences have more unpredictable tokens per label.


def make_batches(steps: int) -> List[Dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(DATA_SEED)
    batches = []
    for _ in range(steps):
        ids = torch.zeros(BATCH, CONTEXT, dtype=torch.int64)
        labels = torch.full((BATCH, CONTEXT), IGNORE, dtype=torch.int64)
        for i in range(BATCH):
            n = int(torch.randint(4, CONTEXT + 2, (1,), generator=g))
            s = int(torch.randint(0, VOCAB - 1, (1,), generator=g))
            d = int(torch.randint(1, 4, (1,), generator=g))
            seq = torch.tensor([1 + (s + j * d) % (VOCAB - 1) for j in range(n)])
            noise = torch.rand(n, generator=g) < NOISE
            seq[noise] = torch.randint(1, VOCAB, (int(noise.sum()),), generator=g)
            ids[i, :n - 1] = seq[:-1]
            labels[i, :n - 1] = seq[1:]
        batches.append({"ids": ids, "labels": labels})
    return batches


# ---------------------------------------------------------------------------------------------
# Step functions: (params, batch) -> {"loss", "grad:<name>"}; the training loop calls them and
# the recorder traces them.


def _grads(loss: torch.Tensor, params: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    gs = torch.autograd.grad(loss, list(params.values()))
    return {"grad:" + k: g for k, g in zip(params, gs)}


def _token_loss_sum(model: nn.Module, params: Dict[str, torch.Tensor], ids: torch.Tensor,
                    labels: torch.Tensor) -> torch.Tensor:
    logits = functional_call(model, params, (ids,))
    if getattr(model, "alt_path", False):
        # per-token losses, summed per sequence first, then over sequences
        logp = F.log_softmax(logits.view(-1, VOCAB), dim=-1)
        tok = F.nll_loss(logp, labels.reshape(-1), ignore_index=IGNORE, reduction="none")
        return tok.view(ids.shape[0], -1).sum(dim=1).sum()
    return F.cross_entropy(logits.view(-1, VOCAB), labels.reshape(-1), ignore_index=IGNORE,
                           reduction="sum")


def reference_step(model: nn.Module) -> Callable:
    """Whole batch: summed token loss / number of non-ignored tokens."""
    def step(params, batch):
        labels = batch["labels"]
        loss = _token_loss_sum(model, params, batch["ids"], labels) / (labels != IGNORE).sum()
        return {"loss": loss, **_grads(loss, params)}
    return step


def gradaccum_step(model: nn.Module, hf_bug: bool) -> Callable:
    """MICRO micro-batches sliced from the full batch, one backward each, gradients summed.

    fixed:  loss_i = S_i / N (N = token count of the whole batch), loss = sum_i loss_i
    hf_bug: loss_i = S_i / N_i / MICRO (mean of the micro-batch means), loss = sum_i loss_i
    """
    def step(params, batch):
        ids, labels = batch["ids"], batch["labels"]
        size = ids.shape[0] // MICRO
        total = (labels != IGNORE).sum()
        loss, grads = None, None
        for i in range(MICRO):
            mi, ml = ids[i * size:(i + 1) * size], labels[i * size:(i + 1) * size]
            s = _token_loss_sum(model, params, mi, ml)
            if hf_bug:
                li = s / (ml != IGNORE).sum() / MICRO
            else:
                li = s / total
            gi = _grads(li, params)
            loss = li if loss is None else loss + li
            grads = gi if grads is None else {k: grads[k] + gi[k] for k in grads}
        return {"loss": loss, **grads}
    return step


# ---------------------------------------------------------------------------------------------


def train(path: str, run_name: str, role: str, step_fn: Callable, batches, notes: str) -> None:
    params = {k: v.clone().requires_grad_() for k, v in initial_state().items()}
    opt = torch.optim.AdamW(params.values(), lr=LR, weight_decay=0.01)
    with RunRecorder(path, run_name=run_name, role=role, step_fn=step_fn, overwrite=True,
                     notes=notes) as rec:
        for step_no, batch in enumerate(batches):
            out = step_fn(params, batch)
            rec.log(step_no, out["loss"].item(), lr=LR)
            rec.checkpoint(step_no, params, batch)      # parameters before the update
            for k, p in params.items():
                p.grad = out["grad:" + k].detach()
            opt.step()
            opt.zero_grad(set_to_none=True)


SAMPLES = {
    "gradaccum-fixed": dict(
        candidate=lambda: gradaccum_step(TinyGPT(), hf_bug=False),
        shows="Type-I: gradient accumulation done right (4 micro-batches x 4, summed token loss "
              "/ total token count) differs from the full batch by rounding only.",
        notes="4 micro-batches x 4 sequences; loss_i = summed token loss_i / total token count "
              "of the batch; gradients accumulated."),
    "gradaccum-hf-bug": dict(
        candidate=lambda: gradaccum_step(TinyGPT(), hf_bug=True),
        shows="Type-II: the transformers gradient-accumulation bug (mean of per-micro-batch "
              "token means) - outside any rounding envelope from the first step.",
        notes="4 micro-batches x 4 sequences; loss = mean_i(summed token loss_i / token "
              "count_i): the Hugging Face transformers bug before October 2024."),
    "kernel-path": dict(
        candidate=lambda: reference_step(TinyGPT(alt_path=True)),
        shows="Type-I: the same model through other kernels (matmul+add vs addmm, q scaled "
              "before q@k^T, per-sequence loss sums) - pure fp32 rounding.",
        notes="matmul + add instead of addmm; q scaled before q @ k^T; per-token losses "
              "(log_softmax + nll_loss, reduction none) summed per sequence, then over "
              "sequences."),
}

REFERENCE_NOTES = "Full batch of 16 sequences; loss = summed token loss / non-ignored token count."


def generate(out_dir: str, names: List[str], steps: int) -> None:
    batches = make_batches(steps)
    for name in names:
        folder = os.path.join(out_dir, name)
        os.makedirs(folder, exist_ok=True)
        print(f"{name}: reference", flush=True)
        train(os.path.join(folder, "reference.h5"), f"{name}/reference", "reference",
              reference_step(TinyGPT()), batches, REFERENCE_NOTES)
        print(f"{name}: candidate", flush=True)
        train(os.path.join(folder, "candidate.h5"), f"{name}/candidate", "candidate",
              SAMPLES[name]["candidate"](), batches, SAMPLES[name]["notes"])


def _rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


def measure(out_dir: str, names: List[str]) -> Dict[str, dict]:
    """Gaps at the same weights, fp64 self-consistency and the ops of every sample."""
    results = {}
    for name in names:
        folder = os.path.join(out_dir, name)
        cand_step = SAMPLES[name]["candidate"]()
        r = {"gap32": [], "gap64": [], "self64": 0.0, "ops": {}, "programs": {}}
        with RunFile(os.path.join(folder, "reference.h5")) as ref, \
                RunFile(os.path.join(folder, "candidate.h5")) as cand:
            for role, run in (("reference", ref), ("candidate", cand)):
                for pid in run.program_ids():
                    p = run.program(pid)
                    r["programs"][role] = (pid, len(p["nodes"]))
                    r["ops"][role] = program_ops(p)
                for step in run.checkpoint_steps():
                    out = run_program(run.program_at(step), run.inputs_at(step),
                                      compute_dtype=torch.float64, outputs=["loss"])
                    r["self64"] = max(r["self64"], _rel(float(out["loss"]),
                                                        run.logged_loss(step)))
            for step in ref.checkpoint_steps():
                inputs = ref.inputs_at(step)
                ref_loss = ref.logged_loss(step)
                params = {k: v.requires_grad_() for k, v in ref.params_at(step).items()}
                c32 = float(cand_step(params, ref.batch_at(step))["loss"])
                r["gap32"].append(_rel(c32, ref_loss))
                c64 = run_program(cand.program_at(step), inputs, torch.float64, ["loss"])
                r64 = run_program(ref.program_at(step), inputs, torch.float64, ["loss"])
                r["gap64"].append(_rel(float(c64["loss"]), float(r64["loss"])))
            r["loss_first_last"] = (ref.logged_loss(ref.checkpoint_steps()[0]),
                                    ref.logged_loss(ref.checkpoint_steps()[-1]))
        r["size"] = {f: os.path.getsize(os.path.join(folder, f))
                     for f in ("reference.h5", "candidate.h5")}
        results[name] = r
        print(f"{name}: rel gap fp64 min/median/max = {min(r['gap64']):.3e} / "
              f"{statistics.median(r['gap64']):.3e} / {max(r['gap64']):.3e}; "
              f"fp32 = {min(r['gap32']):.3e} / {statistics.median(r['gap32']):.3e} / "
              f"{max(r['gap32']):.3e}; fp64 replay vs logged loss <= {r['self64']:.2e}",
              flush=True)
    return results


def _fmt_gap(v: List[float]) -> str:
    return f"{min(v):.1e} / {statistics.median(v):.1e} / {max(v):.1e}"


def readme_block(results: Dict[str, dict]) -> str:
    nparams = sum(v.numel() for v in initial_state().values())
    lines = [
        f"Generated by `samples/pytorch/make_samples.py` with PyTorch {torch.__version__} "
        f"(CPU, 1 thread), data seed {DATA_SEED}, init seed {INIT_SEED}.",
        "",
        f"Model: vocab {VOCAB}, context {CONTEXT}, width {WIDTH}, {HEADS} heads, "
        f"{BLOCKS} block{'s' if BLOCKS > 1 else ''}, MLP {MLP}: **{nparams} parameters**. "
        f"AdamW (lr {LR}, weight decay 0.01), {BATCH} sequences per step, {STEPS} steps, a "
        f"checkpoint at every step.",
        "",
        "Relative gap `|L_cand - L_ref| / L_ref` of the candidate's loss formula evaluated on the "
        "reference's weights and batch, over all checkpoints (min / median / max). float64: both "
        "recorded programs re-executed in binary64 (no rounding to speak of, so this is the "
        "formula's own gap); float32: the candidate's step_fn run eagerly.",
        "",
        "| sample | float64 gap | float32 gap | fp64 replay vs logged loss | sizes (ref + cand) |",
        "|---|---|---|---|---|",
    ]
    for name, r in results.items():
        size = sum(r["size"].values())
        lines.append(f"| `{name}` | {_fmt_gap(r['gap64'])} | {_fmt_gap(r['gap32'])} | "
                     f"≤ {r['self64']:.1e} | {size / 1e6:.2f} MB |")
    first = next(iter(results.values()))
    lines += ["", f"Reference loss: {first['loss_first_last'][0]:.4f} at the first step, "
              f"{first['loss_first_last'][1]:.4f} at the last.", "",
              "### aten ops of the recorded programs", ""]
    all_ops = sorted({o for r in results.values() for ops in r["ops"].values() for o in ops})
    base_pid, base_count = first["programs"]["reference"]
    base_ops = first["ops"]["reference"]
    lines.append(f"The reference program (`{base_pid}`, the same in all three samples: "
                 f"{base_count} nodes, {len(base_ops)} distinct ops): "
                 + ", ".join(f"`{o}`" for o in base_ops) + ".")
    lines.append("")
    for name, r in results.items():
        pid, count = r["programs"]["candidate"]
        ops = r["ops"]["candidate"]
        extra = [o for o in ops if o not in base_ops]
        missing = [o for o in base_ops if o not in ops]
        diff = []
        if extra:
            diff.append("plus " + ", ".join(f"`{o}`" for o in extra))
        if missing:
            diff.append("without " + ", ".join(f"`{o}`" for o in missing))
        lines.append(f"- `{name}` candidate (`{pid}`, {count} nodes, {len(ops)} distinct ops): "
                     f"the reference's ops " + ("; ".join(diff) if diff else "exactly") + ".")
        if r["programs"]["reference"][0] != base_pid:
            lines.append(f"- `{name}` reference: a different program "
                         f"`{r['programs']['reference'][0]}`: " + ", ".join(r["ops"]["reference"]))
    lines += ["", f"All samples together: {len(all_ops)} distinct ops."]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The CNN sample: a small batch-norm CNN on synthetic images (10 classes, each a fixed random
# 3 x 12 x 12 pattern under noise), trained in train mode (batch statistics; the running
# statistics are buffers updated in place).

CNN_SIZE = 12
CNN_CLASSES = 10
CNN_BATCH = 8
CNN_STEPS = 20
CNN_LR = 0.1
CNN_MOMENTUM = 0.9
CNN_NOISE = 0.3


class TinyCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, CNN_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.relu(self.bn2(self.conv2(x)))
        return self.fc(x.mean(dim=(2, 3)))


def cnn_initial_state() -> Dict[str, torch.Tensor]:
    """Parameters and buffers (running statistics, num_batches_tracked) of the initial CNN."""
    torch.manual_seed(INIT_SEED)
    model = TinyCNN()
    state = {k: v.detach().clone() for k, v in model.named_parameters()}
    state.update({k: v.detach().clone() for k, v in model.named_buffers()})
    return state


def cnn_parameter_names() -> List[str]:
    return [k for k, _ in TinyCNN().named_parameters()]


def make_image_batches(steps: int) -> List[Dict[str, torch.Tensor]]:
    """Class c: stripes at angle c*pi/10 (two spatial frequencies, a class colour, a random phase
    per image) under Gaussian noise of std CNN_NOISE."""
    g = torch.Generator().manual_seed(DATA_SEED)
    colours = 0.5 + torch.rand(CNN_CLASSES, 3, 1, 1, generator=g)
    freq = 1.0 + (torch.arange(CNN_CLASSES) % 2).double()
    angle = torch.arange(CNN_CLASSES).double() * math.pi / CNN_CLASSES
    i = torch.arange(CNN_SIZE).double().view(-1, 1)
    j = torch.arange(CNN_SIZE).double().view(1, -1)
    batches = []
    for _ in range(steps):
        y = torch.randint(0, CNN_CLASSES, (CNN_BATCH,), generator=g)
        phase = 2 * math.pi * torch.rand(CNN_BATCH, generator=g, dtype=torch.float64)
        x = torch.empty(CNN_BATCH, 3, CNN_SIZE, CNN_SIZE)
        for b in range(CNN_BATCH):
            c = int(y[b])
            u = i * math.cos(angle[c]) + j * math.sin(angle[c])
            stripes = torch.sin(2 * math.pi * freq[c] * u / CNN_SIZE + phase[b]).float()
            x[b] = colours[c] * stripes
        x += CNN_NOISE * torch.randn(CNN_BATCH, 3, CNN_SIZE, CNN_SIZE, generator=g)
        batches.append({"x": x, "y": y})
    return batches


def cnn_step(model: nn.Module, softmax_bug: bool) -> Callable:
    """Cross-entropy of the CNN's logits (train-mode batch norm); softmax_bug: the candidate's
    F.cross_entropy(F.softmax(logits, dim=1), y) (often written F.softmax(logits), whose implicit
    dim is 1 for 2-D logits)."""
    names = cnn_parameter_names()

    def step(params, batch):
        logits = functional_call(model, params, (batch["x"],))
        if softmax_bug:
            loss = F.cross_entropy(F.softmax(logits, dim=1), batch["y"])
        else:
            loss = F.cross_entropy(logits, batch["y"])
        gs = torch.autograd.grad(loss, [params[k] for k in names])
        return {"loss": loss, **{"grad:" + k: g for k, g in zip(names, gs)}}
    return step


def train_cnn(path: str, run_name: str, role: str, step_fn: Callable, batches,
              notes: str) -> None:
    names = set(cnn_parameter_names())
    state = {k: (v.clone().requires_grad_() if k in names else v.clone())
             for k, v in cnn_initial_state().items()}
    opt = torch.optim.SGD([state[k] for k in cnn_parameter_names()], lr=CNN_LR,
                          momentum=CNN_MOMENTUM)
    with warnings.catch_warnings():
        # train-mode batch norm writes its running statistics in place; the recorder says so
        warnings.filterwarnings("ignore", message=".*writes into its inputs in place.*")
        with RunRecorder(path, run_name=run_name, role=role, step_fn=step_fn, overwrite=True,
                         notes=notes) as rec:
            for step_no, batch in enumerate(batches):
                rec.checkpoint(step_no, state, batch)  # before the step updates the buffers
                out = step_fn(state, batch)  # updates the running statistics in place
                rec.log(step_no, out["loss"].item(), lr=CNN_LR)
                for k in names:
                    state[k].grad = out["grad:" + k].detach()
                opt.step()
                opt.zero_grad(set_to_none=True)


CNN_SAMPLES = {
    "cnn-softmax-bug": dict(
        candidate=lambda: cnn_step(TinyCNN().train(), softmax_bug=True),
        notes="F.cross_entropy(F.softmax(logits, dim=1), y): softmax applied before a loss that "
              "applies log-softmax itself."),
}

CNN_REFERENCE_NOTES = "Small batch-norm CNN (train mode); loss = F.cross_entropy(logits, y)."


def generate_cnn(out_dir: str, names: List[str], steps: int) -> None:
    batches = make_image_batches(steps)
    for name in names:
        folder = os.path.join(out_dir, name)
        os.makedirs(folder, exist_ok=True)
        print(f"{name}: reference", flush=True)
        train_cnn(os.path.join(folder, "reference.h5"), f"{name}/reference", "reference",
                  cnn_step(TinyCNN().train(), softmax_bug=False), batches, CNN_REFERENCE_NOTES)
        print(f"{name}: candidate", flush=True)
        train_cnn(os.path.join(folder, "candidate.h5"), f"{name}/candidate", "candidate",
                  CNN_SAMPLES[name]["candidate"](), batches, CNN_SAMPLES[name]["notes"])


def measure_cnn(out_dir: str, names: List[str]) -> Dict[str, dict]:
    """Gaps at the same state (fp32 eager, fp64 programs), fp64 self-consistency and ops."""
    results = {}
    params = set(cnn_parameter_names())
    for name in names:
        folder = os.path.join(out_dir, name)
        cand_step = CNN_SAMPLES[name]["candidate"]()
        r = {"gap32": [], "gap64": [], "self64": 0.0, "ops": {}, "programs": {}}
        with RunFile(os.path.join(folder, "reference.h5")) as ref, \
                RunFile(os.path.join(folder, "candidate.h5")) as cand:
            for role, run in (("reference", ref), ("candidate", cand)):
                for pid in run.program_ids():
                    p = run.program(pid)
                    r["programs"][role] = (pid, len(p["nodes"]))
                    r["ops"][role] = program_ops(p)
                for step in run.checkpoint_steps():
                    out = run_program(run.program_at(step), run.inputs_at(step),
                                      compute_dtype=torch.float64, outputs=["loss"])
                    r["self64"] = max(r["self64"], _rel(float(out["loss"]),
                                                        run.logged_loss(step)))
            for step in ref.checkpoint_steps():
                inputs = ref.inputs_at(step)
                ref_loss = ref.logged_loss(step)
                state = {k: (v.requires_grad_() if k in params else v)
                         for k, v in ref.params_at(step).items()}
                c32 = float(cand_step(state, ref.batch_at(step))["loss"])
                r["gap32"].append(_rel(c32, ref_loss))
                c64 = run_program(cand.program_at(step), inputs, torch.float64, ["loss"])
                r64 = run_program(ref.program_at(step), inputs, torch.float64, ["loss"])
                r["gap64"].append(_rel(float(c64["loss"]), float(r64["loss"])))
            r["loss_first_last"] = (ref.logged_loss(ref.checkpoint_steps()[0]),
                                    ref.logged_loss(ref.checkpoint_steps()[-1]))
            r["cand_first_last"] = (cand.logged_loss(cand.checkpoint_steps()[0]),
                                    cand.logged_loss(cand.checkpoint_steps()[-1]))
        r["size"] = {f: os.path.getsize(os.path.join(folder, f))
                     for f in ("reference.h5", "candidate.h5")}
        results[name] = r
        print(f"{name}: rel gap fp64 min/median/max = {_fmt_gap(r['gap64'])}; fp32 = "
              f"{_fmt_gap(r['gap32'])}; fp64 replay vs logged loss <= {r['self64']:.2e}",
              flush=True)
    return results


def cnn_readme_block(results: Dict[str, dict]) -> str:
    state = cnn_initial_state()
    nparams = sum(state[k].numel() for k in cnn_parameter_names())
    nbuffers = sum(v.numel() for k, v in state.items() if k not in cnn_parameter_names())
    lines = [
        f"Generated by `samples/pytorch/make_samples.py` with PyTorch {torch.__version__} "
        f"(CPU, 1 thread), data seed {DATA_SEED}, init seed {INIT_SEED}.",
        "",
        f"Model: conv 3→8 (3×3) + batch norm + ReLU + 2×2 max pool, conv 8→16 (3×3) + batch "
        f"norm + ReLU, global average pool, linear 16→{CNN_CLASSES}: **{nparams} parameters** "
        f"and {nbuffers} buffer elements (running statistics, in train mode). Images "
        f"3×{CNN_SIZE}×{CNN_SIZE}, {CNN_BATCH} per step, {CNN_CLASSES} classes. SGD (lr "
        f"{CNN_LR}, momentum {CNN_MOMENTUM}), {len(results[next(iter(results))]['gap64'])} "
        f"steps, a checkpoint at every step.",
        "",
        "| sample | float64 gap | float32 gap | fp64 replay vs logged loss | sizes (ref + cand) |",
        "|---|---|---|---|---|",
    ]
    for name, r in results.items():
        size = sum(r["size"].values())
        lines.append(f"| `{name}` | {_fmt_gap(r['gap64'])} | {_fmt_gap(r['gap32'])} | "
                     f"≤ {r['self64']:.1e} | {size / 1e6:.2f} MB |")
    for name, r in results.items():
        lines += ["", f"`{name}`: reference loss {r['loss_first_last'][0]:.4f} at the first "
                  f"step, {r['loss_first_last'][1]:.4f} at the last; candidate "
                  f"{r['cand_first_last'][0]:.4f} and {r['cand_first_last'][1]:.4f}."]
        ref_pid, ref_count = r["programs"]["reference"]
        pid, count = r["programs"]["candidate"]
        ops, ref_ops = r["ops"]["candidate"], r["ops"]["reference"]
        extra = [o for o in ops if o not in ref_ops]
        missing = [o for o in ref_ops if o not in ops]
        lines += ["", f"The reference program (`{ref_pid}`: {ref_count} nodes, {len(ref_ops)} "
                  f"distinct ops): " + ", ".join(f"`{o}`" for o in ref_ops) + ".", "",
                  f"The candidate program (`{pid}`: {count} nodes, {len(ops)} distinct ops): the "
                  f"reference's ops" + (" plus " + ", ".join(f"`{o}`" for o in extra)
                                        if extra else "")
                  + ("; without " + ", ".join(f"`{o}`" for o in missing) if missing else "")
                  + "."]
    return "\n".join(lines)


BEGIN = "<!-- BEGIN GENERATED by samples/pytorch/make_samples.py -->"
END = "<!-- END GENERATED -->"
CNN_BEGIN = "<!-- BEGIN GENERATED (CNN sample) by samples/pytorch/make_samples.py -->"
CNN_END = "<!-- END GENERATED (CNN sample) -->"


def update_readme(block: str, begin: str = BEGIN, end: str = END) -> None:
    path = os.path.join(SAMPLES_DIR, "README.md")
    if not os.path.exists(path):
        print(f"{path} not found; generated block:\n{block}")
        return
    text = open(path, encoding="utf-8").read()
    if begin not in text or end not in text:
        print(f"{path} has no generated block {begin}; generated block:\n{block}")
        return
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    with open(path, "w", encoding="utf-8") as f:
        f.write(head + begin + "\n" + block + "\n" + end + tail)
    print(f"updated {path}")


def main() -> int:
    every = sorted(SAMPLES) + sorted(CNN_SAMPLES)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=SAMPLES_DIR, help="output folder (default: samples/)")
    ap.add_argument("--steps", type=int, help=f"steps per run (default {STEPS} for the GPT "
                                              f"samples, {CNN_STEPS} for the CNN sample)")
    ap.add_argument("--only", nargs="*", choices=every, default=every)
    ap.add_argument("--no-readme", action="store_true", help="do not rewrite samples/README.md")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    # identical runs give byte-identical files: the recorder takes "created" from here
    os.environ.setdefault("SOURCE_DATE_EPOCH", str(SAMPLES_EPOCH))
    in_samples = not args.no_readme and os.path.abspath(args.out) == SAMPLES_DIR
    gpt = [n for n in args.only if n in SAMPLES]
    if gpt:
        steps = args.steps or STEPS
        generate(args.out, gpt, steps)
        results = measure(args.out, gpt)
        block = readme_block(results)
        print(block)
        if in_samples and steps == STEPS and sorted(gpt) == sorted(SAMPLES):
            update_readme(block)
    cnn = [n for n in args.only if n in CNN_SAMPLES]
    if cnn:
        steps = args.steps or CNN_STEPS
        generate_cnn(args.out, cnn, steps)
        results = measure_cnn(args.out, cnn)
        block = cnn_readme_block(results)
        print(block)
        if in_samples and steps == CNN_STEPS and sorted(cnn) == sorted(CNN_SAMPLES):
            update_readme(block, CNN_BEGIN, CNN_END)
    try:
        du = subprocess.run(["du", "-cb"] + [os.path.join(args.out, n, f) for n in args.only
                                             for f in ("reference.h5", "candidate.h5")],
                            capture_output=True, text=True, check=False).stdout
        print(du.strip().splitlines()[-1])
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
