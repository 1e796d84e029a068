#!/usr/bin/env python3
"""Writes the PyTorch reference cases of the batch-norm and group-norm op rules to stdout.

Each case runs one aten op of the running torch on small fixed inputs (seeded), in several dtypes
and memory layouts (contiguous, channels-last, transposed), and records the inputs and torch's
outputs with their dtypes. tests/core/ops/test_norm_torch_cases.cpp reads the file and checks
that (a) the rules' binary64 point values match torch's float64 outputs and (b) the interval
rules enclose torch's float32/bfloat16/float16 outputs under the traced precision.

Regenerate the committed set (both the Debian torch 1.13 and a torch 2.x, which knows the _legit
ops and fp16 CPU batch norm); --full writes a larger matrix (every layout and offset, for a run of
the test with LOSSBOUND_NORM_TORCH_CASES=<file>):
  { /usr/bin/python3 make_norm_torch_cases.py; /path/to/venv/bin/python make_norm_torch_cases.py; } \
      > norm_torch_cases.txt
Format, one item per line: "case <id> <op> <torch version> <layout>", then "arg" lines
("tensor <dtype> <shape> <values>", "none", "bool 0|1", "float <v>", "int <v>", "bools a,b,c"),
"out <dtype> <shape> <values>" lines, and "end". Values are shortest round-trip decimals: of
binary64 for f64/bf16/f16 tensors, of binary32 for f32 tensors (read those with strtof).
"""
import torch

aten = torch.ops.aten
V2 = int(torch.__version__.split(".")[0]) >= 2
DT = {torch.float64: "f64", torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}


def fmt_tensor(t):
    t = t.detach()
    shape = ",".join(str(s) for s in t.shape) or "-"
    flat = t.contiguous().reshape(-1)
    if t.dtype == torch.float32:  # shortest decimal that round-trips in fp32 (read with strtof)
        vals = " ".join(str(v) for v in flat.numpy())
    else:  # exact in binary64: the shortest round-trip repr
        vals = " ".join(repr(float(v)) for v in flat.double().tolist())
    return f"{DT[t.dtype]} {shape} {vals}".rstrip()


def emit(cid, op, layout, args, outs):
    print(f"case {cid} {op} {torch.__version__} {layout}")
    for a in args:
        if a is None:
            print("arg none")
        elif isinstance(a, torch.Tensor):
            print("arg tensor " + fmt_tensor(a))
        elif isinstance(a, bool):
            print(f"arg bool {int(a)}")
        elif isinstance(a, float):
            print(f"arg float {a!r}")
        elif isinstance(a, int):
            print(f"arg int {a}")
        elif isinstance(a, list):
            print("arg bools " + ",".join(str(int(b)) for b in a))
        else:
            raise TypeError(a)
    for o in outs:
        print("out " + fmt_tensor(o))
    print("end")


def layout(x, kind):
    if kind == "cl" and x.dim() == 4:
        return x.contiguous(memory_format=torch.channels_last)
    if kind == "strided":
        return x.transpose(-1, -2).contiguous().transpose(-1, -2)
    return x.contiguous()


def main(full):
    g = torch.Generator().manual_seed(20240611)
    dtypes = [(torch.float64, torch.float64), (torch.float32, torch.float32),
              (torch.bfloat16, torch.bfloat16), (torch.bfloat16, torch.float32)]
    if V2:
        dtypes += [(torch.float16, torch.float16), (torch.float16, torch.float32)]
    n = 0
    for (dt, pdt) in dtypes:
        # (shape, layout, mean offset of x): the committed set keeps one 4-d and one 3-d case per
        # dtype pair plus the layouts and the badly conditioned offset in reduced precision.
        combos = [((2, 3, 2, 2), "contig", 3.0), ((3, 2, 5), "contig", 0.0)]
        if dt != torch.float64:
            combos += [((2, 3, 2, 2), "cl", 0.0), ((2, 3, 2, 2), "strided", 0.0)]
        if dt in (torch.bfloat16, torch.float16):
            combos += [((2, 3, 2, 2), "contig", 100.0)]
        if full:
            combos = [(s, l, o) for s in ((2, 3, 4, 5), (3, 2, 7)) for l in ("contig", "cl", "strided")
                      for o in (0.0, 3.0, 100.0) if not (l == "cl" and len(s) == 3)]
        for (shape, lay, offset) in combos:
            C = shape[1]
            x = (offset + torch.randn(shape, generator=g, dtype=torch.float64)).to(dt)
            x = layout(x, lay)
            dy = layout(torch.randn(shape, generator=g, dtype=torch.float64).to(dt), lay)
            w = (1 + 0.3 * torch.randn(C, generator=g, dtype=torch.float64)).to(pdt)
            b = (0.5 * torch.randn(C, generator=g, dtype=torch.float64)).to(pdt)
            rm = (offset + 0.2 * torch.randn(C, generator=g, dtype=torch.float64)).to(pdt)
            rv = (0.5 + torch.rand(C, generator=g, dtype=torch.float64)).to(pdt)
            tag = f"{DT[dt]}-{DT[pdt]}-{lay}-{len(shape)}d-off{int(offset)}"
            # Batch norm forward, training and eval; backward with the forward's saved stats.
            for training in (True, False):
                mode = "train" if training else "eval"
                try:
                    outs = aten.native_batch_norm.default(x, w, b, rm.clone(), rv.clone(), training,
                                                          0.1, 1e-5)
                except RuntimeError:
                    continue  # dtype combination this torch does not implement
                emit(f"bn-{mode}-{tag}", "aten.native_batch_norm.default", lay,
                     [x, w, b, rm, rv, training, 0.1, 1e-5], outs)
                gargs = [dy, x, w, rm, rv, outs[1], outs[2], training, 1e-5, [True, True, True]]
                emit(f"bnb-{mode}-{tag}", "aten.native_batch_norm_backward.default", lay, gargs,
                     aten.native_batch_norm_backward.default(*gargs))
                n += 2
            if V2 and lay == "contig" and len(shape) == 4:
                emit(f"bnl-nostats-{tag}", "aten._native_batch_norm_legit.no_stats", lay,
                     [x, w, b, True, 0.1, 1e-5],
                     aten._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5))
                emit(f"bnl-notrain-{tag}", "aten._native_batch_norm_legit_no_training.default", lay,
                     [x, w, b, rm, rv, 0.1, 1e-5],
                     aten._native_batch_norm_legit_no_training.default(x, w, b, rm, rv, 0.1, 1e-5))
                for training in (True, False):
                    outs = aten._native_batch_norm_legit_functional.default(x, w, b, rm, rv,
                                                                            training, 0.1, 1e-5)
                    emit(f"bnl-func-{'train' if training else 'eval'}-{tag}",
                         "aten._native_batch_norm_legit_functional.default", lay,
                         [x, w, b, rm, rv, training, 0.1, 1e-5], outs)
                n += 4
            # Group norm (groups: 1 for 4-d inputs, C for 3-d ones; both in --full).
            N, HxW = shape[0], 1
            for s in shape[2:]:
                HxW *= s
            for G in ([1, C] if full else [1 if len(shape) == 4 else C]):
                xg, dyg = x.contiguous(), dy.contiguous()
                gargs = [xg, w, b, N, C, HxW, G, 1e-5]
                try:
                    outs = aten.native_group_norm.default(*gargs)
                except RuntimeError:
                    continue
                emit(f"gn-g{G}-{tag}", "aten.native_group_norm.default", lay, gargs, outs)
                bargs = [dyg, xg, outs[1], outs[2], w, N, C, HxW, G, [True, True, True]]
                emit(f"gnb-g{G}-{tag}", "aten.native_group_norm_backward.default", lay, bargs,
                     aten.native_group_norm_backward.default(*bargs))
                n += 2
    import sys
    print(f"# {n} cases from torch {torch.__version__}", file=sys.stderr)


if __name__ == "__main__":
    import sys
    main("--full" in sys.argv[1:])
