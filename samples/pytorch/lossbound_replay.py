"""Reads Lossbound run files and re-executes their step programs with PyTorch.

A point-evaluation check of a recording, independent of the C++ engine:

    from lossbound_replay import RunFile, run_program
    run = RunFile("candidate.h5")
    for step in run.checkpoint_steps():
        program, inputs = run.program_at(step), run.inputs_at(step)
        out = run_program(program, inputs, compute_dtype=torch.float64)
        print(step, run.logged_loss(step), float(out["loss"]))

run_program rebuilds every node from the IR JSON alone (torch.ops.aten.<op>.<overload>), so it
also checks that the JSON holds everything the program needs. It reads IR versions 1 and 2 (the
"constants" of version 2 are rebuilt from their JSON data). With compute_dtype=float64 every
floating input, every floating tensor constant and every floating dtype constant in the program
is promoted to float64.
"""

from __future__ import annotations

import json
import math
from typing import Any, Dict, List, Mapping, Optional

import h5py
import numpy as np
import torch

from lossbound_recorder import _DTYPE_BY_NAME, dataset_to_tensor, validate_program

__all__ = ["RunFile", "run_program", "aten_op", "program_ops", "constant_tensor"]

_FLOATING = {torch.float64, torch.float32, torch.bfloat16, torch.float16}


def aten_op(name: str) -> Any:
    """Returns the torch OpOverload for "aten.<op>.<overload>"; KeyError naming it if unknown."""
    _, op, overload = name.split(".")
    try:
        return getattr(getattr(torch.ops.aten, op), overload)
    except (AttributeError, RuntimeError):
        raise KeyError(f"unknown aten op {name!r}") from None


def program_ops(program: dict) -> List[str]:
    """The sorted distinct op overloads used by a program."""
    return sorted({n["op"] for n in program["nodes"]})


def _scalar(v: Any) -> Any:
    if isinstance(v, dict):
        (tag, x), = v.items()
        if tag != "float":
            raise ValueError(f"unknown tagged value {v!r}")
        return {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}[x]
    return v


def constant_tensor(entry: dict) -> torch.Tensor:
    """The tensor of an IR version 2 "constants" entry {name, shape, dtype, data}."""
    dtype = _DTYPE_BY_NAME[entry["dtype"]]
    data = [_scalar(v) for v in entry["data"]]
    if dtype.is_floating_point:
        # binary64 first: the JSON values are exactly the stored elements, so the cast is exact
        t = torch.tensor(data, dtype=torch.float64).to(dtype)
    else:
        t = torch.tensor(data, dtype=dtype)
    return t.reshape(entry["shape"])


_AS_STRIDED_OPS = frozenset({"aten.as_strided.default", "aten.as_strided_copy.default",
                             "aten.as_strided_scatter.default"})


def _row_major_as_strided(op: str, args: List[Any], kwargs: Dict[str, Any]) -> torch.Tensor:
    """as_strided / as_strided_copy / as_strided_scatter with the IR semantics: the view indexes
    the row-major elements of its input (base), storage_offset relative to its first element
    (docs/run-file-format.md), whatever the strides of the replayed tensor."""
    scatter = op == "aten.as_strided_scatter.default"
    k = 2 if scatter else 1
    size, stride = args[k], args[k + 1]
    off = args[k + 2] if len(args) > k + 2 else kwargs.get("storage_offset")
    off = 0 if off is None else off
    x = args[0]
    flat = torch.empty(x.numel(), dtype=x.dtype, device=x.device)
    flat.copy_(x.reshape(-1))  # fresh storage: row-major elements at storage offsets 0..n-1
    if not scatter:
        return flat.as_strided(size, stride, off).clone()
    flat.as_strided(size, stride, off).copy_(args[1])
    return flat.view(x.shape)


def _grouped_mm_loop(args: List[Any], kwargs: Dict[str, Any]) -> torch.Tensor:
    """aten._grouped_mm as a loop of matmuls, in any dtype (PyTorch's kernel takes no float64):
    offs holds the groups' cumulative ends along the rows (2-D x 3-D), the columns (3-D x 2-D)
    or the inner dimension (2-D x 2-D); 3-D x 3-D is a batched product."""
    a, b = args[0], args[1]
    offs = args[2] if len(args) > 2 else kwargs.get("offs")
    bias = args[3] if len(args) > 3 else kwargs.get("bias")
    out_dtype = args[4] if len(args) > 4 else kwargs.get("out_dtype")
    if bias is not None or (out_dtype is not None and out_dtype != a.dtype):
        raise ValueError("_grouped_mm with a bias or another out_dtype is not supported")
    if a.dim() == 3 and b.dim() == 3:
        return torch.bmm(a, b)
    ends = [int(e) for e in offs.tolist()]
    starts = [0] + ends[:-1]
    extent = a.shape[0] if b.dim() == 3 else b.shape[1] if a.dim() == 3 else None
    if extent is not None and (not ends or ends[-1] != extent):
        raise ValueError(f"_grouped_mm: offs {ends} leave rows or columns uninitialized")
    if a.dim() == 2 and b.dim() == 3:
        out = a.new_zeros(a.shape[0], b.shape[2])
        for g, (s, e) in enumerate(zip(starts, ends)):
            out[s:e] = a[s:e] @ b[g]
        return out
    if a.dim() == 3 and b.dim() == 2:
        out = a.new_zeros(a.shape[1], b.shape[1])
        for g, (s, e) in enumerate(zip(starts, ends)):
            out[:, s:e] = a[g] @ b[:, s:e]
        return out
    out = a.new_zeros(len(ends), a.shape[0], b.shape[1])
    for g, (s, e) in enumerate(zip(starts, ends)):
        out[g] = a[:, s:e] @ b[s:e]
    return out


def run_program(program: dict, inputs: Mapping[str, torch.Tensor],
                compute_dtype: Optional[torch.dtype] = None,
                outputs: Optional[List[str]] = None) -> Dict[str, torch.Tensor]:
    """Evaluates a step program on `inputs` (IR input name -> tensor) and returns its outputs.

    compute_dtype: promote every floating value (inputs and dtype constants) to this dtype.
    outputs: the output names to return (default: all).
    In-place ops (IR version 1 only) are evaluated on a copy, as the IR specifies (they produce a
    new value); version 2 programs have none.
    """
    env: Dict[str, List[Any]] = {}
    for spec in program["inputs"]:
        name = spec["name"]
        if name not in inputs:
            raise KeyError(f"missing program input {name!r}")
        t = inputs[name]
        if list(t.shape) != spec["shape"]:
            raise ValueError(f"input {name!r} has shape {list(t.shape)}, program expects "
                             f"{spec['shape']}")
        if compute_dtype is not None and t.dtype in _FLOATING:
            t = t.to(compute_dtype)
        env[name] = [t]
    for entry in program.get("constants", []):
        t = constant_tensor(entry)
        if compute_dtype is not None and t.dtype in _FLOATING:
            t = t.to(compute_dtype)
        env[entry["name"]] = [t]

    def value(v: Any) -> Any:
        if isinstance(v, list):
            return [value(x) for x in v]
        if isinstance(v, dict):
            if "ref" in v:
                return env[v["ref"]][v.get("index", 0)]
            (tag, x), = v.items()
            if tag == "float":
                return {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}[x]
            if tag == "dtype":
                dt = _DTYPE_BY_NAME[x]
                if compute_dtype is not None and dt in _FLOATING:
                    dt = compute_dtype
                return dt
            if tag == "device":
                return torch.device(x)
            if tag == "layout":
                return getattr(torch, x)
            if tag == "memory_format":
                return getattr(torch, x)
            raise ValueError(f"unknown tagged value {v!r}")
        return v

    with torch.no_grad():
        for node in program["nodes"]:
            op = aten_op(node["op"])
            args = [value(a) for a in node["args"]]
            kwargs = {k: value(a) for k, a in node["kwargs"].items()}
            for i, a in enumerate(op._schema.arguments[:len(args)]):
                if a.alias_info is not None and a.alias_info.is_write:
                    args[i] = args[i].clone()  # in-place: the IR value is a new tensor
            try:
                if node["op"] in _AS_STRIDED_OPS:
                    res = _row_major_as_strided(node["op"], args, kwargs)
                elif node["op"] == "aten._grouped_mm.default":
                    res = _grouped_mm_loop(args, kwargs)
                else:
                    res = op(*args, **kwargs)
            except Exception as e:  # name the node: this is a debugging tool
                raise RuntimeError(f"node '{node['name']}' ({node['op']}): {e}") from e
            env[node["name"]] = list(res) if isinstance(res, (tuple, list)) else [res]
    wanted = set(outputs) if outputs is not None else None
    return {o["name"]: value(o["ref"]) for o in program["outputs"]
            if wanted is None or o["name"] in wanted}


class RunFile:
    """Read-only access to a run file written by lossbound_recorder.RunRecorder."""

    def __init__(self, path: str):
        self.path = path
        self.file = h5py.File(path, "r")
        if self.file.attrs.get("format") != "lossbound-run":
            raise ValueError(f"{path}: not a Lossbound run file")
        self._programs: Dict[str, dict] = {}

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> "RunFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def attrs(self) -> Dict[str, Any]:
        return {k: (v.decode() if isinstance(v, bytes) else v)
                for k, v in self.file.attrs.items()}

    def log(self) -> Dict[str, np.ndarray]:
        return {k: np.asarray(ds[()]) for k, ds in self.file["log"].items()}

    def logged_loss(self, step: int) -> float:
        steps = np.asarray(self.file["log/step"][()])
        i = np.searchsorted(steps, step)
        if i >= len(steps) or steps[i] != step:
            raise KeyError(f"step {step} is not in the log")
        return float(self.file["log/loss"][i])

    def checkpoint_steps(self) -> List[int]:
        return sorted(int(g.attrs["step"]) for g in self.file["checkpoints"].values())

    def program_ids(self) -> List[str]:
        return sorted(self.file["programs"].keys())

    def program(self, pid: str) -> dict:
        if pid not in self._programs:
            raw = self.file["programs"][pid]["graph"][()]
            text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
            p = json.loads(text)
            validate_program(p)
            self._programs[pid] = p
        return self._programs[pid]

    def graph_text(self, pid: str) -> str:
        raw = self.file["programs"][pid]["graph"][()]
        return raw.decode("utf-8") if isinstance(raw, bytes) else raw

    def program_id_at(self, step: int) -> str:
        pid = self.file["checkpoints"][str(step)].attrs["program"]
        return pid.decode() if isinstance(pid, bytes) else pid

    def program_at(self, step: int) -> dict:
        return self.program(self.program_id_at(step))

    def params_at(self, step: int) -> Dict[str, torch.Tensor]:
        g = self.file["checkpoints"][str(step)]["params"]
        return {k: dataset_to_tensor(ds) for k, ds in g.items()}

    def batch_at(self, step: int) -> Dict[str, torch.Tensor]:
        g = self.file["checkpoints"][str(step)]["batch"]
        return {k: dataset_to_tensor(ds) for k, ds in g.items()}

    def inputs_at(self, step: int) -> Dict[str, torch.Tensor]:
        """The program inputs at `step`, keyed by IR input name (param:<n>, batch:<n>)."""
        d = {f"param:{k}": v for k, v in self.params_at(step).items()}
        d.update({f"batch:{k}": v for k, v in self.batch_at(step).items()})
        return d
