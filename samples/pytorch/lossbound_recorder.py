"""Records a PyTorch training run into a Lossbound run file (HDF5).

    from lossbound_recorder import RunRecorder

    with RunRecorder("candidate.h5", run_name="ga4", role="candidate", step_fn=step) as rec:
        for step_no, batch in enumerate(loader):
            rec.checkpoint(step_no, params, batch)    # before the step and the optimizer update
            out = step(params, batch)                 # the SAME function the recorder traces
            rec.log(step_no, out["loss"].item(), lr=lr)
            ...optimizer update from out["grad:<name>"]...

`step_fn(params, batch) -> dict` takes two dicts of name -> tensor (params: the parameters and
the module buffers) and returns a dict of name -> tensor with at least "loss" (a 0-d floating
tensor); usually also "grad:<name>" for every parameter that requires grad, computed inside
step_fn with torch.autograd.grad. checkpoint() traces step_fn with
torch.fx.experimental.proxy_tensor.make_fx on the real tensors whenever the input names, shapes or
dtypes are new, functionalizes the traced graph (no in-place op is left), serialises it to the
step-program IR (version 2: with the small tensor constants the trace captured) and stores it
once per distinct graph. The file layout and the IR are specified in docs/run-file-format.md.

Works with PyTorch 1.13 (Debian's python3-torch, with its functorch) and PyTorch 2.x, h5py and
numpy; no other dependency.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import hashlib
import inspect
import json
import math
import operator
import os
import re
import sys
import types
import warnings
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

import h5py
import numpy as np
import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx

try:  # torch >= 2
    from torch.func import functionalize as _functionalize
except ImportError:  # torch 1.13: functorch ships with it (Debian: in python3-torch)
    from functorch import functionalize as _functionalize

__all__ = [
    "RunRecorder",
    "RecorderError",
    "RandomOpError",
    "UnsupportedGraphError",
    "trace_step_program",
    "TraceInfo",
    "validate_program",
    "tensor_to_dataset",
    "dataset_to_tensor",
    "RANDOM_OPS",
    "FORMAT_VERSION",
    "IR_VERSION",
    "CONSTANT_LIMIT",
    "DECOMPOSED_OPS",
]

FORMAT = "lossbound-run"
FORMAT_VERSION = 1
IR_FORMAT = "lossbound-step-program"
IR_VERSION = 2  # the version this recorder writes; validate_program also reads version 1
IR_VERSIONS = (1, 2)
CONSTANT_LIMIT = 4096  # most elements of a captured tensor constant stored in the IR

# Base names (without overload, without a trailing "_" of in-place variants) of aten ops that
# draw random numbers. Ops tagged `nondeterministic_seeded` by torch are refused as well.
RANDOM_OPS = frozenset({
    "native_dropout", "dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout",
    "_fused_dropout", "fused_dropout", "rand", "rand_like", "randn", "randn_like", "randint",
    "randint_like", "randperm", "bernoulli", "normal", "uniform", "exponential", "geometric",
    "log_normal", "cauchy", "random", "multinomial", "poisson", "binomial", "rrelu",
    "rrelu_with_noise", "_standard_gamma", "_sample_dirichlet", "_fused_moving_avg_obs_fq_helper",
})

# torch dtype -> (name in files and in the IR, numpy storage dtype)
_DTYPES: Dict[torch.dtype, Tuple[str, Any]] = {
    torch.float64: ("float64", np.float64),
    torch.float32: ("float32", np.float32),
    torch.bfloat16: ("bfloat16", np.uint16),  # bit patterns: upper 16 bits of the fp32 value
    torch.float16: ("float16", np.float16),
    torch.int64: ("int64", np.int64),
    torch.int32: ("int32", np.int32),
    torch.int16: ("int16", np.int16),
    torch.int8: ("int8", np.int8),
    torch.uint8: ("uint8", np.uint8),
    torch.bool: ("bool", np.uint8),
}
_DTYPE_BY_NAME = {name: dt for dt, (name, _) in _DTYPES.items()}

_OP_NAME = re.compile(r"^aten\.[A-Za-z0-9_]+\.[A-Za-z0-9_]+$")


class RecorderError(Exception):
    """A run cannot be recorded as asked; the message says why and what to do."""


class RandomOpError(RecorderError):
    """The traced step program draws random numbers, so a replay could not reproduce it."""


class UnsupportedGraphError(RecorderError):
    """The traced graph contains something the step-program IR cannot express."""


# --------------------------------------------------------------------------------------------
# Tensors <-> HDF5 datasets


def dtype_name(dtype: torch.dtype) -> str:
    """Returns the file/IR name of a torch dtype ("float32", "bfloat16", ...)."""
    try:
        return _DTYPES[dtype][0]
    except KeyError:
        raise RecorderError(
            f"dtype {dtype} is not supported by Lossbound run files (supported: "
            f"{', '.join(n for n, _ in _DTYPES.values())})") from None


def _tensor_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    if t.dtype == torch.bool:
        return t.to(torch.uint8).numpy()
    dtype_name(t.dtype)  # raises for unsupported dtypes
    return t.numpy()


def tensor_to_dataset(group: h5py.Group, name: str, t: torch.Tensor) -> h5py.Dataset:
    """Stores tensor `t` as dataset `name` of `group` in its own dtype, with a `dtype` attribute.

    bfloat16 is stored as uint16 bit patterns, bool as uint8. Tensors with at least one element
    and one dimension are chunked and compressed with shuffle + gzip; 0-d tensors are 0-d datasets.
    """
    if not isinstance(t, torch.Tensor):
        raise RecorderError(f"'{name}' is a {type(t).__name__}, expected a torch.Tensor")
    data = _tensor_numpy(t)
    if data.ndim > 0 and data.size > 0:
        ds = group.create_dataset(name, data=data, chunks=True, shuffle=True,
                                  compression="gzip", compression_opts=4)
    else:
        ds = group.create_dataset(name, data=data)
    ds.attrs["dtype"] = dtype_name(t.dtype)
    return ds


def dataset_to_tensor(ds: h5py.Dataset) -> torch.Tensor:
    """Reads a tensor dataset written by tensor_to_dataset back into a tensor of its dtype."""
    name = ds.attrs["dtype"]
    if isinstance(name, bytes):
        name = name.decode()
    dtype = _DTYPE_BY_NAME.get(name)
    if dtype is None:
        raise RecorderError(f"{ds.name}: unknown dtype attribute {name!r}")
    data = np.array(ds[()])
    if dtype == torch.bfloat16:
        return torch.from_numpy(data.astype(np.uint16).view(np.int16).copy()).view(torch.bfloat16)
    if dtype == torch.bool:
        return torch.from_numpy(data.astype(np.uint8)).to(torch.bool)
    return torch.from_numpy(np.array(data, dtype=_DTYPES[dtype][1], order="C", copy=True))


# --------------------------------------------------------------------------------------------
# Tracing and the step-program IR


def _spec(t: Any, where: str) -> Optional[Dict[str, Any]]:
    if t is None:
        return None
    if not isinstance(t, torch.Tensor):
        raise UnsupportedGraphError(
            f"{where} produced a {type(t).__name__}, not a tensor; the step-program IR only "
            f"holds tensor values")
    try:
        dtype = dtype_name(t.dtype)
    except RecorderError as e:
        raise UnsupportedGraphError(f"{where}: {e}") from None
    return {"shape": [int(s) for s in t.shape], "dtype": dtype}


def _random_op_message(node: torch.fx.Node, op: str) -> str:
    return (f"the step program contains the random op {op} (node '{node.name}'). A replayed "
            f"step must be deterministic, so Lossbound cannot record it. Make the recorded step "
            f"deterministic: set dropout p=0 (or call model.eval() around the step) for the "
            f"recorded run, and do not draw random numbers inside step_fn (pass any noise in as "
            f"a batch tensor instead).")


def _has_tag(target: Any, tag: str) -> bool:
    return any(getattr(t, "name", "") == tag for t in (getattr(target, "tags", ()) or ()))


def _is_random(target: Any) -> bool:
    packet = getattr(target, "overloadpacket", None)
    base = getattr(packet, "__name__", "")
    if base.rstrip("_") in RANDOM_OPS or base in RANDOM_OPS:
        return True
    return _has_tag(target, "nondeterministic_seeded")


def _writes_in_place(target: Any) -> bool:
    schema = getattr(target, "_schema", None)
    return schema is not None and any(
        a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)


class _Capture(torch.fx.Interpreter):
    """Runs a traced graph once and keeps every node's value (for output shapes and dtypes)."""

    def __init__(self, gm: torch.fx.GraphModule):
        super().__init__(gm)
        self.values: Dict[str, Any] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        result = super().run_node(n)
        self.values[n.name] = result
        return result


def _float_value(x: float) -> Any:
    if math.isnan(x):
        return {"float": "nan"}
    if math.isinf(x):
        return {"float": "inf" if x > 0 else "-inf"}
    return x


# -- what the trace runs under (torch 1.13 and 2.x) ---------------------------------------------

# Fused composite ops that are decomposed while tracing, into the ops they are made of (bmm,
# _softmax, mul, where, ...), so the program holds ops Lossbound models one rounding at a time
# instead of one opaque kernel. Only the entries torch._decomp has on the running torch are used.
# scaled_dot_product_attention itself is decomposed one level higher (see _sdpa_math), because its
# fused CPU/CUDA kernels have fused backward ops (..._backward) that torch._decomp cannot split.
DECOMPOSED_OPS = (
    "scaled_dot_product_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "_safe_softmax",
)


# The fused inference fast path of nn.TransformerEncoderLayer / nn.MultiheadAttention
# (torch.backends.mha): refused, since torch 1.13 cannot turn it off (see _mha_fastpath_off).
FAST_PATH_OPS = frozenset({"_transformer_encoder_layer_fwd", "_native_multi_head_attention",
                           "_nested_tensor_from_mask", "_transformer_decoder_only_layer_fwd"})


def _logsumexp_as_eager(self: torch.Tensor, dim: Any, keepdim: bool = False) -> torch.Tensor:
    """aten.logsumexp as eager computes it (ReduceOps.cpp, logsumexp_out_impl), op by op in the
    input's dtype: the row maxima with ±inf set to 0 (in place through the squeezed view, so the
    shift uses them too), exp of the shifted values, sum, log, add. torch._decomp's own entry
    computes 16-bit inputs in float on PyTorch 2.x, and shifts by an infinite maximum on 1.13.
    (GraniteSWA's attention sinks call it.)"""
    if not (self.is_floating_point() or self.is_complex()):
        self = self.to(torch.get_default_dtype())
    dims = [dim] if isinstance(dim, int) else list(dim)
    if self.numel() == 0:
        return torch.sum(torch.exp(self), dims, keepdim).log()
    maxes = torch.amax(self, dims, keepdim=True)
    maxes = torch.masked_fill(maxes, maxes.abs() == float("inf"), 0)
    squeezed = maxes
    if not keepdim and self.dim() > 0:  # a 0-d input's maximum is 0-d already
        for d in sorted((d % self.dim() for d in dims), reverse=True):
            squeezed = torch.squeeze(squeezed, d)
    return torch.sum(torch.exp(self - maxes), dims, keepdim).log().add(squeezed)


def _decomposition_table() -> Dict[Any, Callable[..., Any]]:
    """The torch._decomp entries for DECOMPOSED_OPS that exist on this torch version, and
    aten.logsumexp as eager computes it."""
    table: Dict[Any, Callable[..., Any]] = {torch.ops.aten.logsumexp.default: _logsumexp_as_eager}
    try:
        from torch._decomp import decomposition_table
    except ImportError:  # pragma: no cover - every supported torch has it
        return table
    for name in DECOMPOSED_OPS:
        try:
            packet = getattr(torch.ops.aten, name)
        except (AttributeError, RuntimeError):
            continue
        for overload in packet.overloads():
            op = getattr(packet, overload)
            if op in decomposition_table:
                table[op] = decomposition_table[op]
    return table


def _sdpa_math() -> Any:
    """Selects the math backend of F.scaled_dot_product_attention while tracing (torch >= 2).

    The math backend is a composite of bmm / _softmax / mul / where ops that autograd
    differentiates op by op, instead of a fused kernel with a fused backward. It computes the same
    function; the traced program models that function's roundings op by op.
    """
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        return sdpa_kernel([SDPBackend.MATH])
    except ImportError:
        pass
    sdp_kernel = getattr(getattr(torch.backends, "cuda", None), "sdp_kernel", None)
    if sdp_kernel is not None and hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        return sdp_kernel(enable_flash=False, enable_math=True, enable_mem_efficient=False)
    return contextlib.nullcontext()


def _lstm_without_onednn() -> Any:
    """Traces nn.LSTM as its linear layers and gates (torch >= 2).

    torch >= 2 traces nn.LSTM, nn.GRU and nn.RNN through its Python decompositions of them (the
    layers' matrix products and gate activations). On the CPU, torch picks oneDNN's fused
    mkldnn_rnn_layer for an LSTM whose sequence does not require grad, even when its weights do;
    the traced backward of that kernel then needs a workspace the trace does not hold. oneDNN is
    switched off for torch.lstm calls only, so convolutions and the rest of the step keep the
    kernels eager runs use. Not on torch 1.13, which has no such decompositions: there a mode
    would also turn off the fused transformer fast path that FAST_PATH_OPS refuses, and the
    trace would no longer say so.
    """
    if int(torch.__version__.split(".")[0]) < 2:
        return contextlib.nullcontext()
    from torch.overrides import TorchFunctionMode

    class LstmWithoutOneDnn(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
            kwargs = kwargs or {}
            if getattr(func, "__name__", "") == "lstm":
                with torch.backends.mkldnn.flags(enabled=False):
                    return func(*args, **kwargs)
            return func(*args, **kwargs)

    return LstmWithoutOneDnn()


def _weight_norm_composite(v: torch.Tensor, g: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """torch._weight_norm(v, g, dim) as ops with rules, following at::_weight_norm's dispatch.

    For dim 0 or the last dim (on torch 1.13 only without float16) eager runs the fused kernel
    (_weight_norm_interface: WeightNormKernel.cpp on the CPU, WeightNorm.cu on CUDA): each slice's
    sum of squares and its square root in the accumulation type (float for 16-bit weights),
    a = g / norm there, then w = v * a rounded once to the weight's dtype. Traced as
    (v.float() * (g.float() / norm_except_dim(v.float(), 2, dim))).to(dtype) for 16-bit weights,
    and in the weight's dtype otherwise: the same operations, the sum of squares in another
    order. The other dims run eager's own composite, v * (g / norm_except_dim(v, 2, dim)). The
    fused backward has no rule; traced as these ops, autograd differentiates them one by one,
    which gives the same gradients with other roundings (the loss, what the analysis bounds, is
    the forward's)."""
    fused = dim in (0, v.dim() - 1) and not (
        int(torch.__version__.split(".")[0]) < 2 and torch.float16 in (v.dtype, g.dtype))
    if fused and v.dtype in (torch.float16, torch.bfloat16):
        vf = v.float()
        return (vf * (g.float() / torch.norm_except_dim(vf, 2, dim))).to(v.dtype)
    return v * (g / torch.norm_except_dim(v, 2, dim))


@contextlib.contextmanager
def _weight_norm_as_ops() -> Iterator[None]:
    """Traces weight normalization (nn.utils.weight_norm and nn.utils.parametrizations.weight_norm:
    wav2vec 2.0's and HuBERT's positional convolution, WaveNet and HiFi-GAN layers) as the ops of
    _weight_norm_composite while tracing: both modules call torch._weight_norm, the first through
    its own import of the name."""
    holders = [torch, sys.modules.get("torch.nn.utils.weight_norm")]
    holders = [h for h in holders if h is not None and hasattr(h, "_weight_norm")]
    before = [h._weight_norm for h in holders]
    for h in holders:
        h._weight_norm = _weight_norm_composite
    try:
        yield
    finally:
        for h, f in zip(holders, before):
            h._weight_norm = f


@contextlib.contextmanager
def _mha_fastpath_off() -> Iterator[None]:
    """Disables nn.MultiheadAttention / TransformerEncoderLayer's fused inference fast path
    (torch >= 2.3 API) while tracing, so those layers trace as their composite ops."""
    mha = getattr(torch.backends, "mha", None)
    if mha is None or not hasattr(mha, "set_fastpath_enabled"):
        yield
        return
    before = mha.get_fastpath_enabled()
    mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        mha.set_fastpath_enabled(before)


def _make_fx_kwargs() -> Dict[str, Any]:
    kwargs: Dict[str, Any] = {"decomposition_table": _decomposition_table()}
    if "_error_on_data_dependent_ops" in inspect.signature(make_fx).parameters:
        # torch >= 2: in "real" tracing mode .item() reads the real value (the trace records an
        # aten._local_scalar_dense node, removed below) instead of refusing.
        kwargs["_error_on_data_dependent_ops"] = False
    return kwargs


@contextlib.contextmanager
def _allow_data_reads(reads: List[str]) -> Iterator[None]:
    """On torch 1.13, lets make_fx read tensor values (.item(), `if tensor:`) as torch >= 2 does
    with _error_on_data_dependent_ops=False; every such read is appended to `reads`."""
    import torch.fx.experimental.proxy_tensor as pt
    if "_error_on_data_dependent_ops" in inspect.signature(make_fx).parameters or \
            not callable(getattr(pt, "proxy_call", None)):
        yield
        return
    original = pt.proxy_call

    def proxy_call(proxy_mode: Any, func: Any, args: Any, kwargs: Any) -> Any:
        try:
            return original(proxy_mode, func, args, kwargs)
        except RuntimeError as e:
            if "get value out of a tracing tensor" not in str(e):
                raise
        # make_fx traces in "real" mode: the arguments are the real tensors.
        reads.append(str(func))
        return func(*args, **kwargs)

    pt.proxy_call = proxy_call
    try:
        yield
    finally:
        pt.proxy_call = original


# -- torch.compile -------------------------------------------------------------------------------

_COMPILE_ADVICE = (
    "The recorder traces the eager step with make_fx; a compiled step runs other kernels (fused, "
    "reordered, with other intermediate precisions), so the traced program would not be the "
    "program that ran. Record this run without torch.compile: call the uncompiled function or "
    "module (a compiled module's original is its ._orig_mod) in step_fn.")


def _optimized_module_type() -> Optional[type]:
    # torch.compile imports torch._dynamo: when it is not loaded, nothing is compiled (and
    # importing it here would cost seconds). torch 1.13 has no torch._dynamo.
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    return getattr(eval_frame, "OptimizedModule", None)


def _scan_step_fn(step_fn: Any) -> Tuple[Optional[str], List[torch.nn.Module]]:
    """Looks through step_fn, its closure and the globals it names (a few levels deep) for
    torch.compile'd functions and modules; returns (what is compiled or None, modules seen)."""
    optimized = _optimized_module_type()
    seen: set = set()
    modules: List[torch.nn.Module] = []

    def compiled_fn(obj: Any) -> bool:
        try:
            return getattr(obj, "_torchdynamo_orig_callable", None) is not None
        except Exception:
            return False

    def visit(obj: Any, where: str, depth: int) -> Optional[str]:
        if depth > 4 or id(obj) in seen or isinstance(obj, (torch.Tensor, types.ModuleType, type,
                                                            str, bytes, int, float)):
            return None
        seen.add(id(obj))
        if compiled_fn(obj) and not isinstance(obj, torch.nn.Module):
            return f"{where} is compiled with torch.compile"
        if isinstance(obj, torch.nn.Module):
            for name, m in obj.named_modules():
                sub = f"{where}.{name}" if name else where
                if optimized is not None and isinstance(m, optimized):
                    return f"{sub} is a torch.compile'd module ({type(m).__name__})"
                if getattr(m, "_compiled_call_impl", None) is not None:
                    return f"{sub} is compiled (nn.Module.compile())"
                if compiled_fn(getattr(m, "forward", None)):
                    return f"{sub}.forward is compiled with torch.compile"
            modules.append(obj)
            return None
        if isinstance(obj, functools.partial):
            for i, x in enumerate([obj.func, *obj.args, *obj.keywords.values()]):
                r = visit(x, where, depth + 1)
                if r:
                    return r
            return None
        if inspect.ismethod(obj):
            return visit(obj.__self__, where, depth + 1) or visit(obj.__func__, where, depth + 1)
        if isinstance(obj, (list, tuple, set, frozenset)):
            for x in list(obj)[:256]:
                r = visit(x, where, depth + 1)
                if r:
                    return r
            return None
        if isinstance(obj, dict):
            for k, x in list(obj.items())[:256]:
                r = visit(x, f"{where}[{k!r}]", depth + 1)
                if r:
                    return r
            return None
        if inspect.isfunction(obj):
            if (getattr(obj, "__module__", None) or "").split(".")[0] == "torch":
                return None
            wrapped = getattr(obj, "__wrapped__", None)
            if wrapped is not None:
                r = visit(wrapped, where, depth + 1)
                if r:
                    return r
            code = obj.__code__
            for name, cell in zip(code.co_freevars, obj.__closure__ or ()):
                try:
                    value = cell.cell_contents
                except ValueError:  # an empty cell
                    continue
                r = visit(value, f"'{name}' (used by {obj.__name__})", depth + 1)
                if r:
                    return r
            names: List[str] = []
            stack = [code]
            while stack:
                c = stack.pop()
                names += c.co_names
                stack += [k for k in c.co_consts if isinstance(k, types.CodeType)]
            for name in dict.fromkeys(names):
                if name in obj.__globals__:
                    r = visit(obj.__globals__[name], f"'{name}' (used by {obj.__name__})",
                              depth + 1)
                    if r:
                        return r
        return None

    return visit(step_fn, "step_fn", 0), modules


def _module_tensors(modules: List[torch.nn.Module]) -> Dict[Tuple[int, int], str]:
    """(storage pointer, byte offset) of every parameter and buffer of `modules` -> its name."""
    found: Dict[Tuple[int, int], str] = {}
    for m in modules:
        for kind, items in (("parameter", m.named_parameters()), ("buffer", m.named_buffers())):
            for name, t in items:
                if t is not None and t.numel() > 0:
                    found.setdefault(_storage_key(t), f"{kind} '{name}' of {type(m).__name__}")
    return found


def _storage_key(t: torch.Tensor) -> Tuple[int, int]:
    storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return storage.data_ptr(), t.storage_offset()


# -- the trace ------------------------------------------------------------------------------


class TraceInfo:
    """What a trace found besides the program: values read from tensors while tracing (the
    program then holds for the traced batch only) and inputs step_fn writes into in place."""

    def __init__(self) -> None:
        self.data_dependent: List[str] = []
        self.mutated_inputs: List[str] = []


def _constant_entry(name: str, t: torch.Tensor, node: torch.fx.Node) -> dict:
    """The IR "constants" entry of a tensor constant captured by the trace."""
    if t.numel() > CONSTANT_LIMIT:
        raise UnsupportedGraphError(
            f"node '{node.name}' is a tensor constant captured by the trace with {t.numel()} "
            f"elements (shape {list(t.shape)}, {t.dtype}); the step-program IR stores captured "
            f"constants of at most {CONSTANT_LIMIT} elements. A bigger tensor that is not "
            f"computed from step_fn's inputs must be an input: pass it in the batch dict (or, "
            f"for a module buffer, in params through functional_call), or build it inside "
            f"step_fn with factory ops (torch.arange, torch.ones, ...)")
    try:
        dtype = dtype_name(t.dtype)
    except RecorderError as e:
        raise UnsupportedGraphError(f"tensor constant '{node.name}': {e}") from None
    flat = t.detach().cpu().reshape(-1)
    if t.dtype.is_floating_point:
        # bf16 / fp16 / fp32 values are exact in binary64, and Python writes the shortest repr
        # that reads back to the same binary64 value: the data is exactly the stored elements.
        data = [_float_value(x) for x in flat.double().tolist()]
    elif t.dtype == torch.bool:
        data = [bool(x) for x in flat.tolist()]
    else:
        data = [int(x) for x in flat.tolist()]
    return {"name": name, "shape": [int(s) for s in t.shape], "dtype": dtype, "data": data}


def _dead_code(graph: torch.fx.Graph) -> None:
    """Removes the call_function and get_attr nodes no output depends on (after
    functionalization nothing has a side effect)."""
    for n in reversed(list(graph.nodes)):
        if n.op in ("call_function", "get_attr") and not n.users:
            graph.erase_node(n)


_AS_STRIDED_OPS = frozenset({"aten.as_strided.default", "aten.as_strided_copy.default",
                             "aten.as_strided_scatter.default"})


def _is_view_op(target: Any) -> bool:
    schema = getattr(target, "_schema", None)
    return schema is not None and any(r.alias_info is not None and not r.alias_info.is_write
                                      for r in schema.returns)


def _check_as_strided_inputs(graph: torch.fx.Graph, originals: List[torch.Tensor],
                             traced: List[torch.Tensor], names: List[str]) -> None:
    """The recorder traces copies of the inputs, and a run file holds their row-major elements.
    An as_strided that step_fn calls on an input, or on a view of one, indexes the storage of the
    caller's tensor in training but the copy's in the trace: when the two are laid out
    differently (the input is itself a strided view with gaps, or starts inside a larger
    storage and the view gives an explicit storage_offset) the program would read other elements
    than the training step. Raises UnsupportedGraphError naming the input and the node."""
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    for n in graph.nodes:
        if n.op != "call_function" or str(n.target) not in _AS_STRIDED_OPS:
            continue
        src = n.args[0]
        while isinstance(src, torch.fx.Node) and src.op == "call_function" and \
                _is_view_op(src.target):
            src = src.args[0]
        if not isinstance(src, torch.fx.Node) or src not in placeholders:
            continue
        i = placeholders.index(src)
        if i >= len(originals):
            continue
        orig, copy = originals[i], traced[i]
        # Without an explicit storage_offset the view starts at the tensor's own first element
        # in both; an explicit one may be absolute (another element of the caller's storage).
        k = 4 if str(n.target) == "aten.as_strided_scatter.default" else 3
        explicit = len(n.args) > k or n.kwargs.get("storage_offset") is not None
        if orig.stride() != copy.stride() or \
                (explicit and orig.storage_offset() != copy.storage_offset()):
            raise UnsupportedGraphError(
                f"node '{n.name}' ({n.target}) indexes the storage of input '{names[i]}', which "
                f"is a view into a larger tensor (strides {list(orig.stride())}, storage offset "
                f"{orig.storage_offset()}); the recorder traces and stores a dense copy (strides "
                f"{list(copy.stride())}, storage offset {copy.storage_offset()}), so the "
                f"program would read other elements than the training step. Pass "
                f"a copy, '{names[i].split(':', 1)[1]}'.clone(), to the step (training and the "
                f"recording then agree)")


def _check_functionalized(keys: List[str], expected: Any, got: Any) -> None:
    """Raises UnsupportedGraphError unless the functionalized program's outputs `got` equal the
    traced graph's `expected` (the same kernels in the same order: equal values, NaN for NaN)."""
    for key, a, b in zip(keys, expected, got):
        same = isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and \
            a.shape == b.shape and a.dtype == b.dtype and \
            bool(((a == b) | (a.isnan() & b.isnan()) if a.is_floating_point() else a == b).all())
        if not same:
            diff = (a.double() - b.double()).abs().max().item() \
                if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and \
                a.shape == b.shape else float("nan")
            raise UnsupportedGraphError(
                f"output '{key}': the functionalized step program computes other values than the "
                f"traced step (largest difference {diff:.3g}). torch {torch.__version__}'s "
                f"functionalization lost a write, typically an in-place op on a view of a "
                f"channels-last or transposed tensor (torch 1.13 drops the backward's write into "
                f"such a tensor). Record with torch >= 2, or make the tensor contiguous before "
                f"the in-place op")


def _check_not_module_state(n: torch.fx.Node, value: torch.Tensor,
                            module_tensors: Dict[Tuple[int, int], str]) -> None:
    """Raises UnsupportedGraphError when the get_attr node n captures a parameter or buffer of
    the step's modules (its value would be frozen into the program)."""
    owner = module_tensors.get(_storage_key(value)) if value.numel() else None
    if isinstance(value, torch.nn.Parameter) or owner is not None or \
            str(n.target).startswith("_param_constant"):
        what = owner or "a module parameter"
        raise UnsupportedGraphError(
            f"node '{n.name}' is {what} captured by the trace as a constant: the module "
            f"was called directly, so its state would be baked into the program instead "
            f"of being read from the checkpoint. Call the model through functional_call"
            f"(model, params, args) (torch.func.functional_call on torch >= 2, "
            f"torch.nn.utils.stateless.functional_call on 1.13) and put its parameters "
            f"and buffers in params")


def _complex_as_real_pairs(gm: torch.fx.GraphModule, values: Dict[str, Any],
                           names: Dict[str, str],
                           module_tensors: Dict[Tuple[int, int], str]) -> Optional[Callable[
                               [Dict[str, Any]], None]]:
    """Rewrites complex values as real pairs with lossbound_complex.py (a second file, needed only
    by programs that compute with complex numbers). Returns None when the graph has no complex
    value, else the check to run on the rewritten graph's values: every replaced op against
    PyTorch's complex kernel (lossbound_complex.check_local_values). names: placeholder node
    name -> program input name."""
    if not any(isinstance(v, torch.Tensor) and v.dtype.is_complex for v in values.values()):
        return None
    for n in gm.graph.nodes:
        v = values.get(n.name)
        if not (isinstance(v, torch.Tensor) and v.dtype.is_complex):
            continue
        if n.op == "placeholder":
            raise UnsupportedGraphError(
                f"input '{names.get(n.name, n.name)}' is a {v.dtype} tensor; run files hold real "
                f"tensors only. Keep torch.view_as_real(x) in params or the batch (for a module "
                f"buffer such as freqs_cis: register view_as_real of it and call "
                f"torch.view_as_complex in forward), or compute it inside the step")
        if n.op == "get_attr":
            _check_not_module_state(n, v, module_tensors)
    try:
        from lossbound_complex import ComplexRewriteError, check_local_values, \
            complex_as_real_pairs
    except ImportError:
        raise UnsupportedGraphError(
            "the step computes with complex numbers (a rotary embedding through torch.polar / "
            "view_as_complex?), which run files hold as real pairs: put lossbound_complex.py, "
            "from Lossbound's samples/pytorch, next to lossbound_recorder.py") from None
    try:
        checks = complex_as_real_pairs(gm, values)
    except ComplexRewriteError as e:
        raise UnsupportedGraphError(str(e)) from None

    def check(rewritten: Dict[str, Any]) -> None:
        try:
            check_local_values(checks, rewritten)
        except ComplexRewriteError as e:
            raise UnsupportedGraphError(str(e)) from None
    return check


def _storage_order(t: torch.Tensor) -> Optional[List[int]]:
    """The order of t's dims in which its elements lie in storage, when t is dense but not
    row-major (channels-last, a transposed copy): its permute by that order is row-major. None
    when t is row-major where a view can tell, or has gaps or overlaps (no order makes it
    dense)."""
    order = sorted(range(t.dim()), key=lambda d: (-t.stride(d), d))
    c, dense = 1, True
    for d in reversed(order):
        dense = dense and (t.shape[d] <= 1 or t.stride(d) == c)
        c *= t.shape[d]
    spanned = [d for d in range(t.dim()) if t.shape[d] > 1]
    row_major = all(t.stride(a) >= t.stride(b) for a, b in zip(spanned, spanned[1:]))
    return order if dense and not row_major else None


def _as_strided_in_storage_order(graph: torch.fx.Graph, values: Dict[str, Any]) -> None:
    """An as_strided view indexes a tensor's storage. Where that tensor is dense in another order
    of its dims (a channels-last or transposed tensor), permute nodes make the view read the
    IR's row-major elements, as _row_major_as_strided requires:
    - as_strided(x, ...) becomes as_strided(permute(x, order), ...);
    - as_strided_scatter(base, src, ...), which indexes its own output (a copy of base laid out
      as torch lays it out), becomes permute(as_strided_scatter(permute(base, order), src, ...),
      inverse order): the scatter writes the storage-ordered copy, then the dims are put back.
    """
    for n in list(graph.nodes):
        op = str(n.target) if n.op == "call_function" else ""
        scatter = op == "aten.as_strided_scatter.default"
        if not scatter and op not in ("aten.as_strided.default", "aten.as_strided_copy.default"):
            continue
        src = n.args[0]
        indexed = values.get(n.name if scatter else getattr(src, "name", None))
        order = _storage_order(indexed) if isinstance(indexed, torch.Tensor) else None
        if order is None or not isinstance(src, torch.fx.Node) or \
                not isinstance(values.get(src.name), torch.Tensor):
            continue
        with graph.inserting_before(n):
            permuted = graph.call_function(torch.ops.aten.permute.default, (src, order))
        values[permuted.name] = values[src.name].permute(order)
        n.replace_input_with(src, permuted)
        if scatter:
            inverse = sorted(range(len(order)), key=lambda d: order[d])
            with graph.inserting_after(n):
                back = graph.call_function(torch.ops.aten.permute.default, (n, inverse))
            n.replace_all_uses_with(back, delete_user_cb=lambda user: user is not back)
            values[back.name] = indexed
            values[n.name] = indexed.permute(order)
            n.meta.pop("tensor_meta", None)  # the trace's shape is now the permute's


def _row_major_as_strided(n: torch.fx.Node, op: str, args: List[Any], kwargs: Dict[str, Any],
                          values: Dict[str, Any]) -> None:
    """Rewrites an as_strided / as_strided_copy / as_strided_scatter node in place (args,
    kwargs) to the IR semantics "as_strided over the row-major elements of the input".

    torch indexes the input's storage, which the IR does not describe. The indexed tensor is the
    input for as_strided(_copy) and, for as_strided_scatter, the copy of the base that torch
    writes through (the node's own value: a clone of the base, whose strides and storage offset
    differ between torch versions). It must be row-major dense wherever the view can tell (its
    strides equal the contiguous strides on every dim of size > 1): then its storage element
    storage_offset + j is its row-major element j. storage_offset is rewritten relative to that
    tensor's own storage offset and always written; the view must stay inside its elements.
    Raises UnsupportedGraphError naming the node, the strides and why otherwise.
    """
    scatter = op == "aten.as_strided_scatter.default"
    k = 2 if scatter else 1  # position of size; stride and storage_offset follow
    where = f"node '{n.name}' ({op})"
    if scatter:
        t, what = values.get(n.name), "the copy of the base it writes into"
    else:
        src = n.args[0]
        t = values.get(src.name) if isinstance(src, torch.fx.Node) else None
        what = f"its input '{getattr(src, 'name', src)}'"
    if not isinstance(t, torch.Tensor) or len(n.args) < k + 2:
        raise UnsupportedGraphError(f"{where}: expected a traced tensor and size, stride "
                                    f"arguments")
    size = [int(v) for v in n.args[k]]
    stride = [int(v) for v in n.args[k + 1]]
    off = n.args[k + 2] if len(n.args) > k + 2 else n.kwargs.get("storage_offset")
    off = t.storage_offset() if off is None else int(off)
    shape, strides = list(t.shape), list(t.stride())
    contiguous, c = [0] * len(shape), 1
    for d in reversed(range(len(shape))):
        contiguous[d] = c
        c *= shape[d]
    geometry = f"size {size}, stride {stride}, storage_offset {off}"
    if any(e > 1 and s != cs for e, s, cs in zip(shape, strides, contiguous)):
        raise UnsupportedGraphError(
            f"{where} ({geometry}) indexes the storage of {what}, shape {shape}, strides "
            f"{strides}, which is not row-major (row-major strides {contiguous} on the dims of "
            f"size > 1): the step-program IR describes tensors by their row-major elements only, "
            f"so this view cannot be expressed. Make the tensor contiguous (.contiguous()) "
            f"before the view, or use contiguous memory format for the model and batch")
    rel = off - t.storage_offset()
    numel = t.numel()
    if len(size) != len(stride) or any(e < 0 for e in size) or any(s < 0 for s in stride):
        raise UnsupportedGraphError(f"{where}: malformed view geometry ({geometry})")
    if all(e > 0 for e in size):
        last = rel + sum((e - 1) * s for e, s in zip(size, stride))
        if rel < 0 or last >= numel:
            raise UnsupportedGraphError(
                f"{where} ({geometry}) reads storage elements {rel}..{last} relative to {what} "
                f"(shape {shape}, strides {strides}, storage offset {t.storage_offset()}), "
                f"which has {numel} elements: the view reaches outside the tensor, which the "
                f"step-program IR cannot express")
    kwargs.pop("storage_offset", None)
    del args[k + 2:]
    args.append(rel)


def trace_step_program(step_fn: Callable[[Dict[str, torch.Tensor], Dict[str, torch.Tensor]],
                                         Mapping[str, torch.Tensor]],
                       params: Mapping[str, torch.Tensor],
                       batch: Mapping[str, torch.Tensor]) -> Tuple[dict, Dict[str, torch.Tensor]]:
    """Traces step_fn(params, batch) with make_fx and returns (IR dict, traced output values).

    The inputs are copied first (params keep their requires_grad flag), so tracing never changes
    the caller's tensors. Raises RandomOpError for random ops and UnsupportedGraphError for
    anything the IR cannot express, naming the node; RecorderError for a torch.compile'd step.
    """
    program, outputs, _ = _trace(step_fn, params, batch)
    return program, outputs


def _trace(step_fn: Callable[..., Mapping[str, torch.Tensor]], params: Mapping[str, torch.Tensor],
           batch: Mapping[str, torch.Tensor]) -> Tuple[dict, Dict[str, torch.Tensor], TraceInfo]:
    """trace_step_program, plus the TraceInfo of the trace.

    Two passes. (1) make_fx traces step_fn on the real tensors, autograd included: the graph of
    the forward pass, the loss and the backward ops of torch.autograd.grad. (2) That graph (pure
    aten calls, no autograd left) is run again under functionalize and traced once more: in-place
    writes become out-of-place ops (fill_ on a slice -> slice_scatter, ...), so the program has no
    mutation and no write through a view can be lost. functionalize cannot wrap step_fn directly:
    its functional tensors do not carry requires_grad, so torch.autograd.grad inside step_fn
    fails (torch 1.13: "element 0 of tensors does not require grad"; 2.x: the same or
    "`inputs` argument to `grad()` cannot be empty").
    """
    info = TraceInfo()
    compiled, modules = _scan_step_fn(step_fn)
    if compiled:
        raise RecorderError(f"{compiled}. {_COMPILE_ADVICE}")
    p_in = {k: v.detach().clone().requires_grad_(v.requires_grad) for k, v in params.items()}
    b_in = {k: v.detach().clone() for k, v in batch.items()}
    out_keys: List[str] = []

    def flat_step(p: Dict[str, torch.Tensor], b: Dict[str, torch.Tensor]) -> List[torch.Tensor]:
        out = step_fn(p, b)
        if not isinstance(out, Mapping):
            raise RecorderError(f"step_fn must return a dict of name -> tensor, got "
                                f"{type(out).__name__}")
        if "loss" not in out:
            raise RecorderError("step_fn must return a dict with the key 'loss'")
        out_keys.clear()
        values = []
        for key, val in out.items():
            if not isinstance(key, str):
                raise RecorderError(f"step_fn returned a non-string key {key!r}")
            if not isinstance(val, torch.Tensor):
                raise RecorderError(f"step_fn output '{key}' is a {type(val).__name__}, expected "
                                    f"a tensor")
            out_keys.append(key)
            values.append(val)
        return values

    fx_kwargs = _make_fx_kwargs()
    try:
        with torch.enable_grad(), _sdpa_math(), _mha_fastpath_off(), _lstm_without_onednn(), \
                _weight_norm_as_ops(), _allow_data_reads(info.data_dependent):
            gm1 = make_fx(flat_step, **fx_kwargs)(p_in, b_in)
    except RecorderError:
        raise
    except Exception as e:
        text = str(e)
        if "dynamo-optimized function" in text:
            raise RecorderError(f"step_fn calls a function or module compiled with "
                                f"torch.compile. {_COMPILE_ADVICE}") from e
        if "get value out of a tracing tensor" in text:
            raise UnsupportedGraphError(
                f"step_fn reads a tensor's value in Python (.item(), int(t), `if t:`) and this "
                f"torch cannot trace that ({text.splitlines()[0]})") from e
        raise

    # Values read in Python (torch >= 2 records them as aten._local_scalar_dense nodes): the
    # read value is baked into the graph as a constant, nothing uses the node.
    for n in list(gm1.graph.nodes):
        if n.op == "call_function" and _is_random(n.target):
            raise RandomOpError(_random_op_message(n, str(n.target)))
        if n.op == "call_function" and _has_tag(n.target, "data_dependent_output"):
            if n.users:
                raise UnsupportedGraphError(
                    f"node '{n.name}' ({n.target}) reads a tensor's value and the traced graph "
                    f"uses it symbolically; the step-program IR cannot express that")
            info.data_dependent.append(f"{n.target} (node '{n.name}')")
            gm1.graph.erase_node(n)
    gm1.recompile()

    _check_as_strided_inputs(gm1.graph, list(params.values()) + list(batch.values()),
                             list(p_in.values()) + list(b_in.values()),
                             [f"param:{k}" for k in p_in] + [f"batch:{k}" for k in b_in])

    # Pass 2: functionalize the traced graph.
    flat_in = [v.detach().clone() for v in p_in.values()] + \
              [v.detach().clone() for v in b_in.values()]

    def replay(*args: torch.Tensor) -> Any:
        return torch.fx.Interpreter(gm1).run(*args)

    with _sdpa_math(), _mha_fastpath_off(), _allow_data_reads(info.data_dependent):
        try:
            gm = make_fx(_functionalize(replay), **fx_kwargs)(*[t.clone() for t in flat_in])
        except RecorderError:
            raise
        except RuntimeError as e:  # the step itself ran: the traced graph did, in pass 1
            raise UnsupportedGraphError(
                f"torch {torch.__version__} could not functionalize the traced step "
                f"({str(e).splitlines()[0] if str(e) else type(e).__name__}). torch 1.13 fails "
                f"so on an as_strided view that reaches outside the tensor it views (beyond a "
                f"slice); the step-program IR cannot express that either. Keep such views inside "
                f"their tensor, or record with torch >= 2 for a message naming the node") from e

    names = [f"param:{k}" for k in p_in] + [f"batch:{k}" for k in b_in]
    values_in = list(p_in.values()) + list(b_in.values())
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(names):
        raise UnsupportedGraphError(f"the traced graph has {len(placeholders)} inputs, expected "
                                    f"{len(names)} (params + batch)")
    rename: Dict[str, str] = {n.name: nm for n, nm in zip(placeholders, names)}

    # functionalize writes a mutated input back at the end (copy_ into the placeholder). Those
    # writes are not part of the program: its results are what step_fn returns.
    for n in list(graph.nodes):
        if n.op == "call_function" and _writes_in_place(n.target) and not n.users and \
                isinstance(n.args[0], torch.fx.Node) and n.args[0].name in rename:
            info.mutated_inputs.append(rename[n.args[0].name])
            graph.erase_node(n)
    for n in graph.nodes:
        if n.op == "call_function" and _writes_in_place(n.target):
            raise UnsupportedGraphError(
                f"node '{n.name}' ({n.target}) still writes into a tensor in place after "
                f"functionalization; the step-program IR has no mutation")
    _dead_code(graph)
    gm.recompile()

    # Run the traced graph once on detached copies: every node's real output shapes and dtypes.
    cap = _Capture(gm)
    with torch.no_grad():
        results = cap.run(*[t.clone() for t in flat_in])
    traced_out = dict(zip(out_keys, results))
    # The traced graph, run again, must compute what the functionalized program computes: torch
    # 1.13's functionalize can drop a write through a view of a tensor that is not row-major (the
    # backward of an in-place op on a slice of a channels-last tensor), and the program would then
    # hold wrong gradients with nothing to show it.
    with torch.no_grad():
        expected = torch.fx.Interpreter(gm1).run(*[t.clone() for t in flat_in])
    _check_functionalized(out_keys, expected, results)
    module_tensors = _module_tensors(modules)
    check_pairs = _complex_as_real_pairs(gm, cap.values, rename, module_tensors)
    if check_pairs:  # each replaced op computes PyTorch's complex value up to rounding
        cap = _Capture(gm)
        with torch.no_grad():
            traced_out = dict(zip(out_keys, cap.run(*[t.clone() for t in flat_in])))
        check_pairs(cap.values)
    _as_strided_in_storage_order(graph, cap.values)

    getitems: Dict[str, Tuple[str, int]] = {}
    multi = {n.name for n in graph.nodes if isinstance(cap.values.get(n.name), (tuple, list))}
    constants: List[dict] = []

    def ref(n: torch.fx.Node, user: torch.fx.Node) -> Dict[str, Any]:
        if n.name in getitems:
            src, idx = getitems[n.name]
            return {"ref": src, "index": idx}
        if n.name in rename:
            return {"ref": rename[n.name]}
        if n.name in multi:
            raise UnsupportedGraphError(f"node '{user.name}' uses the whole tuple returned by "
                                        f"'{n.name}'; the IR only references single tensors")
        return {"ref": n.name}

    def arg(v: Any, node: torch.fx.Node) -> Any:
        if isinstance(v, torch.fx.Node):
            return ref(v, node)
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int):
            if not -2**63 <= v < 2**63:
                raise UnsupportedGraphError(f"node '{node.name}' ({node.target}): the integer "
                                            f"{v} does not fit in int64")
            return int(v)
        if isinstance(v, float):
            return _float_value(v)
        if isinstance(v, (list, tuple)):
            return [arg(x, node) for x in v]
        if isinstance(v, torch.dtype):
            return {"dtype": dtype_name(v)}
        if isinstance(v, torch.device):
            return {"device": str(v)}
        if isinstance(v, torch.layout):
            return {"layout": str(v).replace("torch.", "")}
        if isinstance(v, torch.memory_format):
            return {"memory_format": str(v).replace("torch.", "")}
        raise UnsupportedGraphError(
            f"node '{node.name}' ({node.target}) has an argument of type {type(v).__name__} "
            f"({v!r}) that the step-program IR cannot express")

    nodes: List[dict] = []
    outputs: List[dict] = []
    constant_names: set = set()
    for n in graph.nodes:
        if n.op == "placeholder":
            continue
        if n.op == "get_attr":
            value = functools.reduce(getattr, str(n.target).split("."), gm)
            if not isinstance(value, torch.Tensor):
                raise UnsupportedGraphError(f"node '{n.name}' captures a "
                                            f"{type(value).__name__}, not a tensor")
            _check_not_module_state(n, value, module_tensors)
            name = str(n.target)
            if name in constant_names:  # the same constant read again (forward and backward)
                rename[n.name] = name
                continue
            if name != n.name and (name in rename.values() or
                                   any(m.name == name for m in graph.nodes)):
                raise UnsupportedGraphError(f"tensor constant '{name}' (node '{n.name}') has the "
                                            f"name of another value of the program")
            constants.append(_constant_entry(name, value, n))
            constant_names.add(name)
            rename[n.name] = name
            continue
        if n.op == "output":
            flat = n.args[0]
            if len(flat) != len(out_keys):
                raise UnsupportedGraphError(f"the traced graph returns {len(flat)} values for "
                                            f"{len(out_keys)} step_fn outputs")
            for key, v in zip(out_keys, flat):
                if not isinstance(v, torch.fx.Node):
                    raise UnsupportedGraphError(f"step_fn output '{key}' is not a traced tensor")
                outputs.append({"name": key, "ref": ref(v, n)})
            continue
        if n.op != "call_function":
            raise UnsupportedGraphError(f"node '{n.name}' is a {n.op} node; make_fx graphs "
                                        f"should only call aten ops")
        if n.target is operator.getitem:
            src, idx = n.args
            if not isinstance(src, torch.fx.Node) or src.name in getitems or \
                    src.op != "call_function" or not isinstance(idx, int):
                raise UnsupportedGraphError(f"node '{n.name}': getitem on {src} cannot be "
                                            f"expressed as a reference with an index")
            getitems[n.name] = (src.name, idx)
            continue
        op = str(n.target)
        if not isinstance(n.target, torch._ops.OpOverload) or not _OP_NAME.match(op):
            raise UnsupportedGraphError(f"node '{n.name}' calls {op}, which is not an aten op "
                                        f"overload")
        if _is_random(n.target):
            raise RandomOpError(_random_op_message(n, op))
        if op.split(".")[1] in FAST_PATH_OPS:
            raise UnsupportedGraphError(
                f"node '{n.name}' ({op}) is the fused inference fast path of "
                f"nn.TransformerEncoderLayer / nn.MultiheadAttention: one kernel for a whole "
                f"layer, which Lossbound does not model. torch 1.13 takes it when the step runs "
                f"without gradients; compute the loss with gradients enabled (return the "
                f"gradients too), or record with torch >= 2.3, where the recorder turns the fast "
                f"path off while tracing")
        args = [arg(a, n) for a in n.args]
        kwargs = {k: arg(v, n) for k, v in n.kwargs.items()}
        if op in _AS_STRIDED_OPS:
            _row_major_as_strided(n, op, args, kwargs, cap.values)
        val = cap.values.get(n.name)
        where = f"node '{n.name}' ({op})"
        if isinstance(val, (tuple, list)):
            outs = [_spec(v, where) for v in val]
        else:
            outs = [_spec(val, where)]
            tm = n.meta.get("tensor_meta")
            if tm is not None and (list(tm.shape) != outs[0]["shape"] or tm.dtype != val.dtype):
                raise UnsupportedGraphError(f"{where}: traced metadata {tuple(tm.shape)} "
                                            f"{tm.dtype} disagrees with the value it computes")
        # Ops whose output shape depends on tensor values (masked_select, nonzero, indexing with
        # a boolean mask): the program holds for the traced batch only.
        # (aten.index.Tensor carries the tag for its boolean-mask form only.)
        if (_has_tag(n.target, "dynamic_output_shape") and not op.startswith("aten.index.")) or (
                op.startswith("aten.index.") and any(
                    isinstance(i, torch.fx.Node) and isinstance(cap.values.get(i.name),
                                                                torch.Tensor)
                    and cap.values[i.name].dtype in (torch.bool, torch.uint8)
                    for i in (n.args[1] if len(n.args) > 1 and
                              isinstance(n.args[1], (list, tuple)) else ()))):
            info.data_dependent.append(f"{op} (node '{n.name}')")
        nodes.append({
            "name": n.name,
            "op": op,
            "args": args,
            "kwargs": kwargs,
            "outputs": outs,
        })

    program = {
        "format": IR_FORMAT,
        "ir_version": IR_VERSION,
        "torch_version": torch.__version__,
        "inputs": [dict(name=nm, **_spec(t, nm)) for nm, t in zip(names, values_in)],
        "constants": constants,
        "nodes": nodes,
        "outputs": outputs,
    }
    validate_program(program)
    return program, traced_out, info


def program_json(program: dict) -> str:
    """The canonical JSON text of a program (what is stored and hashed)."""
    return json.dumps(program, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def program_id(text: str) -> str:
    """First 16 hex digits of the SHA-256 of the UTF-8 graph JSON."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def validate_program(p: Any) -> None:
    """Checks a program dict (IR version 1 or 2) against docs/run-file-format.md; raises
    ValueError saying where."""
    def fail(msg: str) -> None:
        raise ValueError(f"step program: {msg}")

    if not isinstance(p, dict):
        fail("not a JSON object")
    for key in ("format", "ir_version", "torch_version", "inputs", "nodes", "outputs"):
        if key not in p:
            fail(f"missing key '{key}'")
    if p["format"] != IR_FORMAT:
        fail(f"format is {p['format']!r}, expected {IR_FORMAT!r}")
    version = p["ir_version"]
    if not isinstance(version, int) or isinstance(version, bool) or version not in IR_VERSIONS:
        fail(f"ir_version is {version!r}, this recorder reads versions "
             f"{', '.join(map(str, IR_VERSIONS))}")
    if version >= 2 and "constants" not in p:
        fail("missing key 'constants' (required from ir_version 2 on)")
    if version < 2 and "constants" in p:
        fail("key 'constants' in an ir_version 1 program (constants exist from version 2 on)")
    if not isinstance(p["torch_version"], str):
        fail("torch_version is not a string")

    def is_int(x: Any) -> bool:
        return isinstance(x, int) and not isinstance(x, bool)

    def check_spec(s: Any, where: str) -> None:
        if not isinstance(s, dict) or set(s) - {"name"} != {"shape", "dtype"}:
            fail(f"{where}: expected {{shape, dtype}}, found {s!r}")
        if not isinstance(s["shape"], list) or not all(
                is_int(d) and d >= 0 for d in s["shape"]):
            fail(f"{where}: bad shape {s['shape']!r}")
        if s["dtype"] not in _DTYPE_BY_NAME:
            fail(f"{where}: unknown dtype {s['dtype']!r}")

    arity: Dict[str, List[Any]] = {}  # name -> output specs
    if not isinstance(p["inputs"], list):
        fail("inputs is not a list")
    for i, inp in enumerate(p["inputs"]):
        where = f"inputs[{i}]"
        if not isinstance(inp, dict) or not isinstance(inp.get("name"), str):
            fail(f"{where}: no name")
        nm = inp["name"]
        if not re.match(r"^(param|batch):[^/]+$", nm):
            fail(f"{where}: name {nm!r} is not param:<name> or batch:<name>")
        if nm in arity:
            fail(f"{where}: duplicate name {nm!r}")
        check_spec(inp, where)
        arity[nm] = [inp]

    constants = p.get("constants", [])
    if not isinstance(constants, list):
        fail("constants is not a list")
    for i, c in enumerate(constants):
        where = f"constants[{i}]"
        if not isinstance(c, dict) or set(c) != {"name", "shape", "dtype", "data"}:
            fail(f"{where}: expected keys name, shape, dtype, data")
        nm = c["name"]
        if not isinstance(nm, str) or not nm or nm.startswith(("param:", "batch:")):
            fail(f"{where}: bad name {nm!r} (non-empty, not starting with param: or batch:)")
        if nm in arity:
            fail(f"{where}: duplicate name {nm!r}")
        where = f"constant '{nm}'"
        check_spec({"shape": c["shape"], "dtype": c["dtype"]}, where)
        _check_constant_data(c, where, fail)
        arity[nm] = [{"shape": c["shape"], "dtype": c["dtype"]}]

    def check_ref(v: dict, where: str) -> None:
        if set(v) - {"ref", "index"}:
            fail(f"{where}: reference with unexpected keys {sorted(v)}")
        if not isinstance(v["ref"], str) or v["ref"] not in arity:
            fail(f"{where}: reference to unknown or later value {v.get('ref')!r}")
        idx = v.get("index", 0)
        if not isinstance(idx, int) or isinstance(idx, bool) or \
                not 0 <= idx < len(arity[v["ref"]]):
            fail(f"{where}: index {idx!r} out of range for {v['ref']!r}")
        if arity[v["ref"]][idx] is None:
            fail(f"{where}: output {idx} of {v['ref']!r} is not a tensor")

    tags = {"float": {"inf", "-inf", "nan"}, "dtype": set(_DTYPE_BY_NAME), "device": None,
            "layout": None, "memory_format": None}

    def check_value(v: Any, where: str) -> None:
        if is_int(v) and not -2**63 <= v < 2**63:
            fail(f"{where}: integer {v} does not fit in int64")
        if v is None or isinstance(v, (bool, int, str)):
            return
        if isinstance(v, float):
            if not math.isfinite(v):
                fail(f"{where}: non-finite float not tagged")
            return
        if isinstance(v, list):
            for j, x in enumerate(v):
                check_value(x, f"{where}[{j}]")
            return
        if isinstance(v, dict):
            if "ref" in v:
                check_ref(v, where)
                return
            if len(v) == 1:
                (k, x), = v.items()
                if k in tags and isinstance(x, str) and (tags[k] is None or x in tags[k]):
                    return
            fail(f"{where}: unknown tagged value {v!r}")
        fail(f"{where}: value of type {type(v).__name__} is not allowed")

    if not isinstance(p["nodes"], list):
        fail("nodes is not a list")
    for i, n in enumerate(p["nodes"]):
        where = f"nodes[{i}]"
        if not isinstance(n, dict) or set(n) != {"name", "op", "args", "kwargs", "outputs"}:
            fail(f"{where}: expected keys name, op, args, kwargs, outputs")
        if not isinstance(n["name"], str) or not n["name"] or n["name"] in arity:
            fail(f"{where}: missing or duplicate name {n.get('name')!r}")
        if n["name"].startswith(("param:", "batch:")):
            fail(f"{where}: node name {n['name']!r} starts with param: or batch:")
        where = f"node '{n['name']}'"
        if not isinstance(n["op"], str) or not _OP_NAME.match(n["op"]):
            fail(f"{where}: op {n['op']!r} is not aten.<op>.<overload>")
        if not isinstance(n["args"], list) or not isinstance(n["kwargs"], dict):
            fail(f"{where}: args must be a list and kwargs an object")
        for j, a in enumerate(n["args"]):
            check_value(a, f"{where} args[{j}]")
        for k, a in n["kwargs"].items():
            check_value(a, f"{where} kwargs[{k!r}]")
        if not isinstance(n["outputs"], list) or not n["outputs"]:
            fail(f"{where}: outputs must be a non-empty list")
        for j, s in enumerate(n["outputs"]):
            if s is not None:
                check_spec(s, f"{where} outputs[{j}]")
        arity[n["name"]] = n["outputs"]

    if not isinstance(p["outputs"], list):
        fail("outputs is not a list")
    seen = set()
    for i, o in enumerate(p["outputs"]):
        if not isinstance(o, dict) or set(o) != {"name", "ref"} or not isinstance(o["name"], str):
            fail(f"outputs[{i}]: expected {{name, ref}}")
        if o["name"] in seen:
            fail(f"outputs[{i}]: duplicate output name {o['name']!r}")
        seen.add(o["name"])
        if not isinstance(o["ref"], dict) or "ref" not in o["ref"]:
            fail(f"outputs[{i}]: ref must be a reference object")
        check_ref(o["ref"], f"output '{o['name']}'")
    if "loss" not in seen:
        fail("no output named 'loss'")
    loss_ref = next(o["ref"] for o in p["outputs"] if o["name"] == "loss")
    spec = arity[loss_ref["ref"]][loss_ref.get("index", 0)]
    if spec["shape"] != [] or spec["dtype"] not in ("float64", "float32", "bfloat16", "float16"):
        fail(f"output 'loss' must be a 0-d floating tensor, found {spec['shape']} "
             f"{spec['dtype']}")


_INT_RANGES = {"int64": (-2**63, 2**63 - 1), "int32": (-2**31, 2**31 - 1),
               "int16": (-2**15, 2**15 - 1), "int8": (-2**7, 2**7 - 1), "uint8": (0, 255)}


def _check_constant_data(c: dict, where: str, fail: Callable[[str], None]) -> None:
    """The data of a constants entry: numel values of its dtype, floats exact in that dtype."""
    numel = math.prod(c["shape"])
    if numel > CONSTANT_LIMIT:
        fail(f"{where}: {numel} elements, more than the limit of {CONSTANT_LIMIT}")
    data = c["data"]
    if not isinstance(data, list) or len(data) != numel:
        fail(f"{where}: data must be a flat list of {numel} values (the shape's element count)")
    dtype = c["dtype"]
    if dtype == "bool":
        if not all(isinstance(x, bool) for x in data):
            fail(f"{where}: a bool constant holds true/false only")
        return
    if dtype in _INT_RANGES:
        lo, hi = _INT_RANGES[dtype]
        if not all(isinstance(x, int) and not isinstance(x, bool) and lo <= x <= hi
                   for x in data):
            fail(f"{where}: an {dtype} constant holds integers in [{lo}, {hi}] only (written "
                 f"without '.' or exponent)")
        return
    finite = []
    for x in data:
        if isinstance(x, dict):
            if len(x) != 1 or x.get("float") not in ("inf", "-inf", "nan"):
                fail(f"{where}: unknown tagged value {x!r}")
        elif isinstance(x, float) and math.isfinite(x):
            finite.append(x)
        else:
            fail(f"{where}: a {dtype} constant holds floats (written with '.' or an exponent) "
                 f"and {{\"float\": \"inf\"|\"-inf\"|\"nan\"}}, found {x!r}")
    values = torch.tensor(finite, dtype=torch.float64)
    stored = values.to(_DTYPE_BY_NAME[dtype]).to(torch.float64)
    if not torch.equal(stored, values):
        bad = values[stored != values][0].item()
        fail(f"{where}: {bad!r} is not a {dtype} value")


# --------------------------------------------------------------------------------------------
# The recorder


def _device_description(t: torch.Tensor) -> str:
    dev = t.device
    if dev.type == "cuda":
        idx = dev.index if dev.index is not None else torch.cuda.current_device()
        return f"cuda:{idx} {torch.cuda.get_device_name(idx)}"
    return str(dev)


def _created() -> str:
    """ISO 8601 UTC time of recording; $SOURCE_DATE_EPOCH (reproducible builds) overrides it."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = (datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch
            else datetime.datetime.now(datetime.timezone.utc))
    return when.isoformat(timespec="seconds")


def _create_file(path: str) -> h5py.File:
    """Creates (truncates) an HDF5 file with HDF5 1.10 object formats (libver v110: far smaller
    headers for thousands of small datasets; readable by HDF5 >= 1.10) and no object times."""
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_libver_bounds(h5py.h5f.LIBVER_V110, h5py.h5f.LIBVER_V110)
    fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
    fcpl.set_obj_track_times(False)
    fid = h5py.h5f.create(os.fsencode(path), h5py.h5f.ACC_TRUNC, fcpl=fcpl, fapl=fapl)
    return h5py.File(fid)


def _group(parent: h5py.Group, name: str) -> h5py.Group:
    """Creates a group without modification times, so identical runs give identical files."""
    gcpl = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
    gcpl.set_obj_track_times(False)
    return h5py.Group(h5py.h5g.create(parent.id, name.encode("utf-8"), gcpl=gcpl))


def _check_name(kind: str, name: Any) -> str:
    if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
        raise RecorderError(f"{kind} name {name!r} cannot be an HDF5 dataset name (it must be a "
                            f"non-empty string without '/')")
    return name


def _signature(params: Mapping[str, torch.Tensor], batch: Mapping[str, torch.Tensor]) -> tuple:
    def sig(d: Mapping[str, torch.Tensor]) -> tuple:
        return tuple((k, tuple(v.shape), v.dtype, v.requires_grad, str(v.device))
                     for k, v in d.items())
    return sig(params), sig(batch)


class RunRecorder:
    """Writes one training run to a Lossbound run file. Use it as a context manager.

    path        the .h5 file to create. It is written as `<path>.partial` and renamed when the
                recorder closes without an exception (after an exception the .partial file is left
                for inspection). An existing file is refused unless overwrite=True.
    run_name    a name for the run shown by Lossbound
    role        "reference", "candidate" or anything else
    step_fn     step_fn(params, batch) -> dict with at least "loss": the function the training
                loop calls for every step. It is traced at checkpoints; the traced program must be
                the program that ran, so call this very function in the training loop.
    notes       free text stored in the file
    check_traced_loss  warn when the traced program's loss at a step differs (> 1e-3 relative)
                from the loss logged for that step: a sign that step_fn is not what ran
    """

    def __init__(self, path: str, run_name: str, role: str,
                 step_fn: Callable[[Dict[str, torch.Tensor], Dict[str, torch.Tensor]],
                                   Mapping[str, torch.Tensor]],
                 overwrite: bool = False, notes: str = "", check_traced_loss: bool = True):
        if not callable(step_fn):
            raise RecorderError("step_fn must be callable: step_fn(params, batch) -> dict")
        self.path = os.fspath(path)
        self.partial_path = self.path + ".partial"
        self.overwrite = overwrite
        if os.path.exists(self.path) and not overwrite:
            raise FileExistsError(f"{self.path} already exists; Lossbound run files are never "
                                  f"overwritten unless you pass overwrite=True")
        self.step_fn = step_fn
        self.check_traced_loss = check_traced_loss
        self._steps: List[int] = []
        self._loss: List[float] = []
        self._metrics: Dict[str, List[float]] = {}
        self._checkpoints: set = set()
        self._programs: Dict[tuple, str] = {}  # input signature -> program id
        self._warned: set = set()  # trace warnings already given
        self._device_set = False
        self._traced_loss: Optional[Tuple[int, float]] = None  # (step, loss) of the last trace
        self._file: Optional[h5py.File] = _create_file(self.partial_path)
        f = self._file
        f.attrs["format"] = FORMAT
        f.attrs["format_version"] = np.int64(FORMAT_VERSION)
        f.attrs["run_name"] = str(run_name)
        f.attrs["role"] = str(role)
        f.attrs["framework"] = f"pytorch {torch.__version__}"
        f.attrs["created"] = _created()
        f.attrs["notes"] = str(notes)
        f.attrs["float32_matmul_precision"] = torch.get_float32_matmul_precision()
        f.attrs["num_threads"] = np.int64(torch.get_num_threads())
        f.attrs["recorder"] = f"lossbound_recorder.py (ir_version {IR_VERSION})"
        for name in ("log", "programs", "checkpoints"):
            _group(f, name)

    # -- context manager --------------------------------------------------------------------
    def __enter__(self) -> "RunRecorder":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(success=exc_type is None)

    def close(self, success: bool = True) -> None:
        """Writes the log and finishes the file (renamed from .partial when success)."""
        if self._file is None:
            return
        f, self._file = self._file, None
        try:
            if not self._device_set:
                f.attrs["device"] = "cpu"  # nothing was checkpointed
            self._write_log(f)
        finally:
            f.close()
        if not success:
            warnings.warn(f"recording stopped by an exception; the incomplete run file is left at "
                          f"{self.partial_path}")
            return
        if os.path.exists(self.path) and not self.overwrite:
            raise FileExistsError(f"{self.path} appeared while recording; the run is in "
                                  f"{self.partial_path}")
        os.replace(self.partial_path, self.path)

    def _write_log(self, f: h5py.File) -> None:
        log = f["log"]
        log.create_dataset("step", data=np.asarray(self._steps, dtype=np.int64))
        log.create_dataset("loss", data=np.asarray(self._loss, dtype=np.float64))
        for name, values in self._metrics.items():
            log.create_dataset(name, data=np.asarray(values, dtype=np.float64))
        missing = sorted(self._checkpoints - set(self._steps))
        if missing:
            warnings.warn(f"checkpoints without a logged loss at steps {missing[:10]}: Lossbound "
                          f"needs the logged loss of every analysed step")

    # -- recording --------------------------------------------------------------------------
    def _require_open(self) -> h5py.File:
        if self._file is None:
            raise RecorderError("the recorder is closed")
        return self._file

    def log(self, step: int, loss: Any, **metrics: Any) -> None:
        """Logs the loss the run reported at `step` (and any extra scalar metrics).

        Steps must be strictly increasing. A metric missing at some logged step is stored as NaN.
        """
        self._require_open()
        step = int(step)
        if self._steps and step <= self._steps[-1]:
            raise RecorderError(f"log steps must be strictly increasing: step {step} after "
                                f"{self._steps[-1]}")
        for name in metrics:
            _check_name("metric", name)
            if name in ("step", "loss"):
                raise RecorderError(f"'{name}' is reserved in /log; use another metric name")
        n = len(self._steps)
        self._steps.append(step)
        self._loss.append(float(loss))
        if not math.isfinite(self._loss[-1]):
            warnings.warn(f"step {step}: the logged loss is {self._loss[-1]}; Lossbound can only "
                          f"analyse steps with a finite loss", RuntimeWarning)
        if self._traced_loss is not None and self._traced_loss[0] == step:
            self._compare_traced_loss(step, self._loss[-1], self._traced_loss[1])
        for name, value in metrics.items():
            col = self._metrics.setdefault(name, [math.nan] * n)
            col.append(float(value))
        for name, col in self._metrics.items():
            if len(col) < n + 1:
                col.append(math.nan)

    def checkpoint(self, step: int, params: Mapping[str, torch.Tensor],
                   batch: Mapping[str, torch.Tensor]) -> str:
        """Stores the step program's inputs at `step` and returns the id of its program.

        params: the parameters the step ran on (before the optimizer update); batch: the
        step's inputs. Traces step_fn when the names, shapes, dtypes or devices are new.
        """
        f = self._require_open()
        step = int(step)
        if step in self._checkpoints:
            raise RecorderError(f"step {step} already has a checkpoint")
        for kind, d in (("param", params), ("batch", batch)):
            if not isinstance(d, Mapping) or not d and kind == "param":
                raise RecorderError(f"checkpoint({step}): {kind}s must be a non-empty dict of "
                                    f"name -> tensor")
            for k, v in d.items():
                _check_name(kind, k)
                if not isinstance(v, torch.Tensor):
                    raise RecorderError(f"checkpoint({step}): {kind} '{k}' is a "
                                        f"{type(v).__name__}, expected a tensor")
                dtype_name(v.dtype)
        params, batch = dict(params), dict(batch)
        sig = _signature(params, batch)
        pid = self._programs.get(sig)
        if pid is None:
            pid, data_dependent = self._trace(step, params, batch)
            if not data_dependent:  # a data-dependent trace holds for its own batch only
                self._programs[sig] = pid
        if not self._device_set:
            f.attrs["device"] = _device_description(next(iter(params.values())))
            self._device_set = True
        g = _group(f["checkpoints"], str(step))
        g.attrs["step"] = np.int64(step)
        g.attrs["program"] = pid
        gp, gb = _group(g, "params"), _group(g, "batch")
        for k, v in params.items():
            tensor_to_dataset(gp, k, v)
        for k, v in batch.items():
            tensor_to_dataset(gb, k, v)
        self._checkpoints.add(step)
        return pid

    def _compare_traced_loss(self, step: int, logged: float, traced: float) -> None:
        if self.check_traced_loss and not math.isclose(logged, traced, rel_tol=1e-3,
                                                       abs_tol=1e-12):
            warnings.warn(
                f"step {step}: the traced step program computes loss {traced!r} but the run "
                f"logged {logged!r}. Is step_fn the function the training loop calls, with the "
                f"same params and batch, and is the loss logged before the optimizer update? "
                f"Lossbound's self-check will fail on this run.", RuntimeWarning)

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(message, RuntimeWarning, stacklevel=3)

    def _trace(self, step: int, params: Dict[str, torch.Tensor],
               batch: Dict[str, torch.Tensor]) -> Tuple[str, bool]:
        """Traces step_fn and stores its program; returns (program id, data-dependent)."""
        f = self._require_open()
        program, traced_out, info = _trace(self.step_fn, params, batch)
        text = program_json(program)
        pid = program_id(text)
        traced = float(traced_out["loss"])
        self._traced_loss = (step, traced)
        if self._steps and self._steps[-1] == step:
            self._compare_traced_loss(step, self._loss[-1], traced)
        if info.data_dependent:
            more = ", ..." if len(info.data_dependent) > 5 else ""
            self._warn_once("data", (
                f"step {step}: step_fn reads tensor values while it runs ("
                f"{', '.join(info.data_dependent[:5])}{more}"
                f"): .item(), `if tensor:` or ops whose output shape depends on the data. The "
                f"traced program holds for the batch it was traced on, so the recorder traces "
                f"step_fn at every checkpoint (identical graphs are still stored once)."))
        if info.mutated_inputs:
            self._warn_once("mutation " + " ".join(info.mutated_inputs), (
                f"step {step}: step_fn writes into its inputs in place "
                f"({', '.join(info.mutated_inputs)}; e.g. batch-norm running statistics in "
                f"train mode). The step program leaves those writes out (its results are what "
                f"step_fn returns). Call rec.checkpoint() before running the step, so the "
                f"checkpoint holds the values the step started from."))
        precision = torch.get_float32_matmul_precision()
        if precision != f.attrs["float32_matmul_precision"]:
            warnings.warn(f"float32_matmul_precision changed to {precision!r} during the run")
            f.attrs["float32_matmul_precision"] = precision
        if pid not in f["programs"]:
            g = _group(f["programs"], pid)
            g.attrs["ir_version"] = np.int64(IR_VERSION)
            g.attrs["inputs"] = json.dumps([i["name"] for i in program["inputs"]])
            g.attrs["outputs"] = json.dumps([o["name"] for o in program["outputs"]])
            g.attrs["op_count"] = np.int64(len(program["nodes"]))
            if info.data_dependent:
                g.attrs["data_dependent"] = json.dumps(info.data_dependent)
            g.create_dataset("graph", data=text, dtype=h5py.string_dtype("utf-8"))
        return pid, bool(info.data_dependent)
