#!/usr/bin/python3
"""Records one training step of models nobody here wrote and lists the aten ops of each program.

    /usr/bin/python3 samples/pytorch/op_survey.py [--json FILE] [--only NAME ...]
    "$(scripts/torch2-env.sh | tail -n 1)" samples/pytorch/op_survey.py --json ops-torch2.json

Each model runs in eval mode (dropout off) on a small random batch; the step is the loss plus
torch.autograd.grad of every parameter, with the buffers passed in params (requires_grad=False);
--autocast-bf16 runs it under torch.autocast("cpu", dtype=torch.bfloat16).
The step is recorded with RunRecorder into a temporary run file, the program is re-executed from
that file by lossbound_replay.run_program (native dtype and float64) and compared with the eager
loss. Prints one line per model and the op list; --json writes {model: {ops, constants, ...}};
--record-dir DIR keeps the run files (DIR/<model>.h5) for lossbound-cli info / analyze.
The Hugging Face models (transformers, torch 2.x) are built from tiny configs: nothing is
downloaded.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
import warnings
from typing import Callable, Dict, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from lossbound_recorder import RunRecorder  # noqa: E402
from lossbound_replay import RunFile, program_ops, run_program  # noqa: E402

try:  # torch >= 2
    from torch.func import functional_call
except ImportError:  # torch 1.13
    from torch.nn.utils.stateless import functional_call

TORCH2 = int(torch.__version__.split(".")[0]) >= 2
Batch = Dict[str, torch.Tensor]


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------------------------------------
# Models: each returns (model, batch, loss_fn(model_output, batch) or None for HF models)


def image_batch(n: int = 2, classes: int = 10) -> Batch:
    g = gen(1)
    return {"x": torch.randn(n, 3, 32, 32, generator=g), "y": torch.randint(0, classes, (n,),
                                                                            generator=g)}


def resnet18():
    import torchvision
    return torchvision.models.resnet18(num_classes=10), image_batch(), "classify"


def mobilenet_v3_small():
    import torchvision
    return torchvision.models.mobilenet_v3_small(num_classes=10), image_batch(), "classify"


def vit():
    from torchvision.models.vision_transformer import VisionTransformer
    m = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
                          mlp_dim=64, num_classes=10)
    return m, image_batch(), "classify"


class EncoderLM(nn.Module):
    """nn.TransformerEncoder (pre-norm, batch_first) with a causal mask, as a tiny LM."""

    def __init__(self, vocab: int = 48, width: int = 32, heads: int = 2, layers: int = 2):
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        return self.head(self.enc(self.emb(ids), mask=mask))


def token_batch(b: int = 2, t: int = 12, vocab: int = 48) -> Batch:
    g = gen(2)
    ids = torch.randint(1, vocab, (b, t), generator=g)
    labels = torch.roll(ids, -1, 1)
    labels[:, -1] = -100
    labels[0, -3:] = -100
    return {"ids": ids, "labels": labels}


def transformer_encoder():
    return EncoderLM(), token_batch(), "lm"


class ConvGN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(4, 8, 3, padding=1)
        self.gn = nn.GroupNorm(2, 8)
        self.c2 = nn.Conv1d(8, 8, 3, stride=2)
        self.pool = nn.AdaptiveAvgPool1d(1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.gelu(self.gn(self.c1(x)))
        return self.fc(self.pool(F.silu(self.c2(x))).flatten(1))


def conv1d_groupnorm():
    g = gen(3)
    return ConvGN(), {"x": torch.randn(3, 4, 16, generator=g),
                      "y": torch.randint(0, 5, (3,), generator=g)}, "classify"


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class LlamaBlockLM(nn.Module):
    """A Llama-style decoder block in plain torch: RMSNorm, rotary embeddings (cos/sin computed
    in the step), causal attention written out with matmul + softmax, SwiGLU MLP."""

    def __init__(self, vocab: int = 48, d: int = 32, heads: int = 4, hidden: int = 64):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.emb = nn.Embedding(vocab, d)
        self.n1, self.n2, self.nf = RMSNorm(d), RMSNorm(d), RMSNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.gate, self.up = nn.Linear(d, hidden, bias=False), nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)
        self.head = nn.Linear(d, vocab, bias=False)

    def rotary(self, x: torch.Tensor) -> torch.Tensor:
        t, hd = x.shape[-2], x.shape[-1]
        inv_freq = 1.0 / (10000 ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        ang = torch.outer(torch.arange(t, dtype=torch.float32), inv_freq)
        ang = torch.cat([ang, ang], dim=-1)
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return x * ang.cos() + torch.cat([-x2, x1], dim=-1) * ang.sin()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        b, t = ids.shape
        h = self.emb(ids)
        x = self.n1(h)
        q, k, v = ((lin(x).view(b, t, self.heads, self.hd).transpose(1, 2))
                   for lin in (self.q, self.k, self.v))
        q, k = self.rotary(q), self.rotary(k)
        s = q @ k.transpose(-1, -2) / math.sqrt(self.hd)
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        a = (s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, -1)
        h = h + self.o(a)
        x = self.n2(h)
        h = h + self.down(F.silu(self.gate(x)) * self.up(x))
        return self.head(self.nf(h))


class MetaRotaryBlockLM(LlamaBlockLM):
    """The Llama block with Meta's original rotary embedding in complex numbers: freqs_cis =
    torch.polar(1, angles), precomputed as a plain attribute (the trace captures it as a complex64
    constant), and view_as_complex(x) * freqs_cis. The recorder rewrites it as real pairs."""

    def __init__(self, t: int = 12):
        super().__init__()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
        ang = torch.outer(torch.arange(t).float(), inv_freq)
        self.freqs_cis = torch.polar(torch.ones_like(ang), ang)

    def rotary(self, x: torch.Tensor) -> torch.Tensor:
        xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        f = self.freqs_cis[: x.shape[-2]].view(1, 1, x.shape[-2], -1)
        return torch.view_as_real(xc * f).flatten(3).type_as(x)


def llama_block():
    return LlamaBlockLM(), token_batch(), "lm"


def meta_rotary_block():
    return MetaRotaryBlockLM(), token_batch(), "lm"


def llama_label_smoothing():
    return LlamaBlockLM(), token_batch(), "lm_smooth"


def encoder_label_write():
    return EncoderLM(), token_batch(2, 24), "lm_write"


def hf(kind: str, attn: str):
    import transformers as tr
    vocab = 64
    if kind == "gpt2":
        cfg = tr.GPT2Config(vocab_size=vocab, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        cls = tr.GPT2LMHeadModel
    elif kind == "llama":
        cfg = tr.LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                             max_position_embeddings=64)
        cls = tr.LlamaForCausalLM
    else:
        cfg = tr.BertConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=2, intermediate_size=64,
                            max_position_embeddings=64, hidden_dropout_prob=0.0,
                            attention_probs_dropout_prob=0.0)
        cls = tr.BertForMaskedLM
    kwargs = {} if attn == "default" else {"attn_implementation": attn}
    torch.manual_seed(0)
    model = cls._from_config(cfg, **kwargs)
    batch = token_batch(2, 12, vocab)
    if kind == "bert":  # masked LM: labels at a few positions only
        labels = torch.full_like(batch["ids"], -100)
        labels[:, 2::4] = batch["ids"][:, 2::4]
        batch = {"ids": batch["ids"], "labels": labels}
    else:  # causal LM: HF shifts the labels itself
        labels = batch["ids"].clone()
        labels[0, -3:] = -100
        batch = {"ids": batch["ids"], "labels": labels}
    return model, batch, "hf"


class Recurrent(nn.Module):
    """A recurrent layer of torch.nn over a sequence, classified from its last step."""

    def __init__(self, kind: str):
        super().__init__()
        layer = {"lstm": nn.LSTM, "gru": nn.GRU}[kind]
        self.rnn = layer(6, 4, num_layers=2, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.rnn(x)[0][:, -1])


def recurrent(kind: str):
    g = gen(5)
    return Recurrent(kind), {"x": torch.randn(3, 5, 6, generator=g),
                             "y": torch.randint(0, 5, (3,), generator=g)}, "classify"


MODELS: Dict[str, Callable[[], Tuple[nn.Module, Batch, str]]] = {
    "resnet18": resnet18,
    "mobilenet_v3_small": mobilenet_v3_small,
    "vit": vit,
    "transformer_encoder": transformer_encoder,
    "conv1d_groupnorm": conv1d_groupnorm,
    "llama_block": llama_block,
    "meta_rotary_block": meta_rotary_block,
    "llama_label_smoothing": llama_label_smoothing,
    "encoder_label_write": encoder_label_write,
}
if TORCH2:  # torch 1.13's functional_call does not reach nn.LSTM's / nn.GRU's flat weights
    MODELS["lstm"] = lambda: recurrent("lstm")
    MODELS["gru"] = lambda: recurrent("gru")
    for _kind in ("gpt2", "llama", "bert"):
        for _attn in ("default", "eager"):
            MODELS[f"hf_{_kind}_{_attn}"] = (lambda k=_kind, a=_attn: hf(k, a))


def make_step(model: nn.Module, how: str, autocast: bool = False
              ) -> Callable[[Batch, Batch], Batch]:
    def step(p: Batch, b: Batch) -> Batch:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            return loss_and_grads(p, b)

    def loss_and_grads(p: Batch, b: Batch) -> Batch:
        if how == "classify":
            loss = F.cross_entropy(functional_call(model, p, (b["x"],)), b["y"])
        elif how in ("lm", "lm_smooth", "lm_write"):
            logits = functional_call(model, p, (b["ids"],))
            labels = b["labels"]
            if how == "lm_write":  # an in-place write into a copy of the labels
                labels = labels.clone()
                labels[:, 20:] = -100
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100,
                                   label_smoothing=0.1 if how == "lm_smooth" else 0.0)
        else:
            loss = functional_call(model, p, (), {"input_ids": b["ids"],
                                                  "labels": b["labels"]}).loss
        names = [k for k, v in p.items() if v.requires_grad]
        grads = torch.autograd.grad(loss, [p[k] for k in names])
        return {"loss": loss, **{"grad:" + k: g for k, g in zip(names, grads)}}
    return step


def survey(name: str, autocast: bool = False, keep_dir: str | None = None) -> dict:
    model, batch, how = MODELS[name]()
    model.eval()
    params = {k: v.detach().clone().requires_grad_() for k, v in model.named_parameters()}
    params.update({k: v.detach().clone() for k, v in model.named_buffers()})
    step = make_step(model, how, autocast)
    eager = step(params, batch)["loss"].item()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "run.h5")
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with RunRecorder(path, run_name=name, role="survey", step_fn=step) as rec:
                rec.checkpoint(0, params, batch)
                rec.log(0, eager)
        seconds = time.perf_counter() - start
        with RunFile(path) as run:
            program = run.program_at(0)
            inputs = run.inputs_at(0)
            native = float(run_program(program, inputs, None, ["loss"])["loss"])
            f64 = float(run_program(program, inputs, torch.float64, ["loss"])["loss"])
            data_dependent = run.file["programs"][run.program_id_at(0)].attrs.get(
                "data_dependent")
        if keep_dir:
            shutil.copyfile(path, os.path.join(keep_dir, name + ".h5"))
    notes = sorted({str(w.message).split(". ")[0] for w in caught
                    if "checkpoint" in str(w.message) or "self-check" in str(w.message)})
    return {
        "torch": torch.__version__,
        "ops": program_ops(program),
        "nodes": len(program["nodes"]),
        "constants": [(c["name"], c["shape"], c["dtype"]) for c in program["constants"]],
        "params": sum(v.numel() for v in params.values()),
        "eager_loss": eager,
        "replay_rel_error": abs(native - eager) / abs(eager),
        "replay64_rel_error": abs(f64 - eager) / abs(eager),
        "data_dependent": json.loads(data_dependent) if data_dependent else [],
        "warnings": notes,
        "record_seconds": round(seconds, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write the results to this file")
    ap.add_argument("--only", nargs="*", help="model names (default: all)")
    ap.add_argument("--record-dir", help="keep each run file as DIR/<model>.h5 (for "
                    "lossbound-cli info / analyze)")
    ap.add_argument("--autocast-bf16", action="store_true",
                    help="run each step under torch.autocast('cpu', dtype=torch.bfloat16)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    results = {}
    failed = 0
    for name in args.only or MODELS:
        try:
            r = survey(name, args.autocast_bf16, args.record_dir)
        except Exception as e:  # report and go on: the survey is about coverage
            failed += 1
            results[name] = {"torch": torch.__version__, "error": f"{type(e).__name__}: {e}"}
            print(f"{name}: FAILED {type(e).__name__}: {e}", flush=True)
            continue
        results[name] = r
        print(f"{name}: {len(r['ops'])} ops, {r['nodes']} nodes, {len(r['constants'])} "
              f"constants, replay rel. error {r['replay_rel_error']:.1e} (fp64 "
              f"{r['replay64_rel_error']:.1e}), {r['record_seconds']} s"
              + (f", data-dependent: {r['data_dependent']}" if r["data_dependent"] else ""),
              flush=True)
        print("   ", " ".join(o.replace("aten.", "") for o in r["ops"]), flush=True)
    union = sorted({o for r in results.values() for o in r.get("ops", [])})
    print(f"all models, torch {torch.__version__}: {len(union)} distinct ops")
    print("   ", " ".join(o.replace("aten.", "") for o in union))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
