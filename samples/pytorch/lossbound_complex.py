"""Complex tensors of a traced step program rewritten as real pairs.

Lossbound run files and the step-program IR hold real tensors only. Rotary position embeddings
written with complex numbers (Meta's original Llama code, Llama 4: torch.polar, view_as_complex,
a complex product, view_as_real) trace to a few aten ops on complex64 values. This pass replaces
each complex value z of shape S by the real tensor view_as_real(z) of shape S + [2] (real part at
index 0 of the last dim, imaginary part at index 1) and each op on complex values by real ops on
those pairs:

- view_as_complex(x) is x, view_as_real(z) is z's pair, clone / alias / resolve_conj keep it;
- polar(r, t) = stack([r * cos(t), r * sin(t)], -1) (ATen's polar kernel computes the same two
  products);
- _conj / conj_physical = stack([re, -im], -1);
- a complex product (a + bi)(c + di) = stack([ac - bd, ad + bc], -1): each product rounded, then
  the sum or difference, as ATen's vectorized complex multiply computes it; a complex times a real
  tensor or scalar multiplies both parts;
- add / sub of complex values add or subtract the pairs; real / imag select a part;
- views, sums and concatenation of complex values act on the pairs with the trailing dim kept
  last.

Any other op that touches a complex value is refused by name (ComplexRewriteError), so a program
never silently computes something else; and once the rewritten program has run,
check_local_values compares every replaced op with PyTorch's complex kernel on the same operands.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List

import torch
import torch.fx

aten = torch.ops.aten


class ComplexRewriteError(Exception):
    """A complex op the real-pair rewrite does not cover; the message names the node."""


_REAL_OF = {torch.complex64: torch.float32, torch.complex128: torch.float64,
            torch.complex32: torch.float16}

# Ops that keep the value (and so the pair) unchanged.
_SAME = {"aten.clone.default", "aten.alias.default", "aten.detach.default",
         "aten.resolve_conj.default", "aten.lift_fresh_copy.default", "aten.contiguous.default",
         "aten.alias_copy.default", "aten.detach_copy.default"}
# Views given a size list: the pair gets [..., 2].
_SIZED = {"aten.view.default", "aten.view_copy.default", "aten._unsafe_view.default",
          "aten.reshape.default", "aten._reshape_alias.default", "aten.expand.default",
          "aten.expand_copy.default", "aten._reshape_alias_copy.default"}
# Ops whose argument 1 is a dim of the complex input (or, for unsqueeze, of the output).
_DIM1 = {"aten.select.int", "aten.select_copy.int", "aten.slice.Tensor",
         "aten.slice_copy.Tensor", "aten.squeeze.dim", "aten.squeeze_copy.dim",
         "aten.unsqueeze.default", "aten.unsqueeze_copy.default", "aten.transpose.int",
         "aten.transpose_copy.int", "aten.flip.default"}


def _is_complex(v: Any) -> bool:
    return isinstance(v, torch.Tensor) and v.dtype.is_complex


class _Ref:
    """An argument of a replaced op in a LocalCheck: the value of node `name`, viewed as complex
    when it is a pair."""

    def __init__(self, name: str, is_pair: bool):
        self.name, self.is_pair = name, is_pair


class LocalCheck:
    """One replaced complex op, to be compared with PyTorch's own kernel on the rewritten
    program's values (check_local_values)."""

    def __init__(self, node: str, target: Any, args: Any, kwargs: Any, out: str,
                 label: str = ""):
        self.node, self.target, self.args, self.kwargs, self.out = node, target, args, kwargs, out
        self.label = label or str(target)


def complex_as_real_pairs(gm: torch.fx.GraphModule, values: Dict[str, Any]) -> List[LocalCheck]:
    """Rewrites gm's graph in place (values: every node's traced value, by name). Returns one
    LocalCheck per complex op replaced (none: the graph is unchanged), for check_local_values
    once the rewritten graph has run. Raises ComplexRewriteError for a complex op it does not
    cover, a complex input or a complex output of the program."""
    graph = gm.graph
    pair: Dict[torch.fx.Node, torch.fx.Node] = {}
    ndim: Dict[torch.fx.Node, int] = {}
    replaced: List[torch.fx.Node] = []
    constants: Dict[str, torch.fx.Node] = {}
    real_result: Dict[torch.fx.Node, torch.fx.Node] = {}
    checks: List[LocalCheck] = []

    def ref(a: torch.fx.Node) -> _Ref:
        if a in pair:
            return _Ref(pair[a].name, True)
        return _Ref(real_result.get(a, a).name, False)

    for n in list(graph.nodes):
        val = values.get(n.name)
        if n.op == "placeholder" and _is_complex(val):
            raise ComplexRewriteError(
                f"input '{n.name}' is a {val.dtype} tensor; run files hold real tensors only. "
                f"Pass it as torch.view_as_real(x) and call torch.view_as_complex in the step")
        if n.op == "get_attr" and _is_complex(val):
            name = f"{n.target}_real_pairs"
            if name not in constants:  # one real constant for every node that reads n.target
                setattr(gm, name, torch.view_as_real(val.resolve_conj()).clone())
                with graph.inserting_before(n):
                    constants[name] = graph.get_attr(name)
            pair[n] = constants[name]
            ndim[n] = val.dim()
            replaced.append(n)
            checks.append(LocalCheck(n.name, lambda v=val: v, (), {}, constants[name].name,
                                     "a captured complex constant"))
            continue
        if n.op == "output":
            bad = [a for a in n.all_input_nodes if a in pair]
            if bad:
                raise ComplexRewriteError(
                    f"step output '{bad[0].name}' is a complex tensor; return "
                    f"torch.view_as_real(...) of it")
            continue
        if n.op != "call_function":
            continue
        inputs = [a for a in n.all_input_nodes if a in pair]
        if not inputs and not _is_complex(val):
            continue
        with graph.inserting_before(n):
            out = _rewrite(graph, n, str(n.target), pair, ndim)
        if isinstance(out, torch.fx.Node) and not _is_complex(val):
            n.replace_all_uses_with(out)  # a real result (view_as_real, real, imag)
            real_result[n] = out
        else:
            checks.append(LocalCheck(n.name, n.target, torch.fx.node.map_arg(n.args, ref),
                                     torch.fx.node.map_arg(n.kwargs, ref), out.name))
            pair[n] = out
            ndim[n] = val.dim()
        replaced.append(n)

    if replaced:
        _views_as_reshape(graph)
    for n in reversed(replaced):
        if n.users:
            users = ", ".join(f"'{u.name}' ({u.target})" for u in n.users)
            raise ComplexRewriteError(f"the complex value '{n.name}' ({n.target}) is used by "
                                      f"{users}, which the real-pair rewrite does not cover")
        graph.erase_node(n)
    graph.lint()
    gm.recompile()
    return checks if replaced else []


def check_local_values(checks: List[LocalCheck], values: Dict[str, Any]) -> None:
    """Compares every replaced op's pair, as the rewritten program computed it, with PyTorch's
    complex kernel applied to the same (rewritten) operands. Raises ComplexRewriteError unless
    each element agrees within the rounding either may commit: 4·eps·(|a|·|b|) for a product
    (two roundings each way, with or without FMA), 4·eps·(|a| + |b|) for add/sub, 4·eps·|r| for
    polar (cos and sin within an ulp or two), (2n + 4)·eps·Σ|z| for a sum of n terms, exact for
    every other op (views, conj, cat). Local checks are sharp where a check of the program's
    outputs is not: a rewrite error may cancel or be tiny next to the outputs' magnitudes."""
    def arg(r: Any, magnitude: bool = False) -> Any:
        if not isinstance(r, _Ref):
            return abs(r) if magnitude and isinstance(r, (int, float, complex)) else r
        v = values[r.name]
        if r.is_pair:
            v = torch.view_as_complex(v.contiguous())
        return v.abs() if magnitude else v

    for c in checks:
        op = c.label
        args = torch.fx.node.map_aggregate(c.args, arg)
        kwargs = torch.fx.node.map_aggregate(c.kwargs, arg)
        with torch.no_grad():
            want = c.target(*args, **kwargs)
            got = torch.view_as_complex(values[c.out].contiguous())
            eps = torch.finfo(got.real.dtype).eps
            mags = [arg(a, True) for a in c.args if isinstance(a, (_Ref, int, float, complex))]
            if op == "aten.mul.Tensor":
                bound = 4 * eps * (mags[0] * mags[1])
            elif op in ("aten.add.Tensor", "aten.sub.Tensor"):
                bound = 4 * eps * (mags[0] + abs(c.kwargs.get("alpha", 1)) * mags[1])
            elif op == "aten.polar.default":
                bound = 4 * eps * mags[0]
            elif op.startswith("aten.sum."):
                terms = max(1, args[0].numel() // max(1, want.numel()))
                bound = (2 * terms + 4) * eps * c.target(arg(c.args[0], True), *args[1:], **kwargs)
            elif op == "aten._to_copy.default":
                bound = 2 * eps * want.abs()
            else:
                bound = torch.zeros(())
            if want.shape != got.shape or want.dtype != got.dtype:
                raise ComplexRewriteError(
                    f"node '{c.node}' ({op}): the real-pair rewrite computes shape "
                    f"{list(got.shape)} {got.dtype}, PyTorch {list(want.shape)} {want.dtype}")
            diff = torch.view_as_real(got - want).abs().amax(-1).double()
            tiny = torch.finfo(got.real.dtype).tiny * 4
            both_nan = got.isnan() & want.isnan()
            bad = ~both_nan & ~(diff <= bound.double() + tiny)
            if bool(bad.any()):
                i = int(bad.flatten().nonzero()[0])
                raise ComplexRewriteError(
                    f"node '{c.node}' ({op}): the real-pair rewrite computes "
                    f"{got.flatten()[i].item()} where PyTorch's complex kernel gives "
                    f"{want.flatten()[i].item()} (element {i}; allowed difference "
                    f"{float(bound.double().expand(bad.shape).flatten()[i]) + tiny:.3g}): not "
                    f"rounding, so the rewrite would record another computation")


def _views_as_reshape(graph: torch.fx.Graph) -> None:
    """The real pairs are not laid out as torch laid out the complex values (a product keeps its
    operands' permuted layout, a pair is row-major), so views traced for torch's strides may not
    apply to them: torch 1.13's _reshape_alias(x, size, stride) would read other elements, and
    view(x, size) may fail. reshape(x, size), what both mean in the IR (row-major elements),
    replaces them."""
    for n in graph.nodes:
        if n.op == "call_function" and str(n.target) in (
                "aten._reshape_alias.default", "aten._reshape_alias_copy.default",
                "aten.view.default", "aten.view_copy.default", "aten._unsafe_view.default"):
            n.target = aten.reshape.default
            n.args = tuple(n.args[:2])


def _rewrite(graph: torch.fx.Graph, n: torch.fx.Node, op: str,
             pair: Dict[torch.fx.Node, torch.fx.Node],
             ndim: Dict[torch.fx.Node, int]) -> torch.fx.Node:
    """The real node that replaces complex op n: its pair, or its value when n is real."""
    call: Callable[..., torch.fx.Node] = \
        lambda f, *args: graph.call_function(f, tuple(args))  # noqa: E731
    args = list(n.args)
    src = args[0] if args else None

    def cplx(a: Any) -> bool:
        return isinstance(a, torch.fx.Node) and a in pair

    def part(p: torch.fx.Node, i: int) -> torch.fx.Node:
        return call(aten.select.int, p, -1, i)

    def stack(re: torch.fx.Node, im: torch.fx.Node) -> torch.fx.Node:
        return call(aten.stack.default, [re, im], -1)

    def dim(d: int, rank: int) -> int:
        if not -rank <= d < rank:
            raise ComplexRewriteError(f"node '{n.name}' ({op}): dim {d} out of range")
        return d % rank

    def refuse(why: str) -> ComplexRewriteError:
        return ComplexRewriteError(
            f"node '{n.name}' ({op}) {why}. The recorder rewrites complex tensors as real pairs "
            f"for rotary embeddings (polar, view_as_complex, complex mul, view_as_real, conj, "
            f"views, indexing, add, sub, sum, cat, stack); this op is not covered")

    if n.kwargs and op not in ("aten.sum.dim_IntList", "aten.add.Tensor", "aten.sub.Tensor",
                               "aten.clone.default", "aten._to_copy.default"):
        raise refuse(f"has keyword arguments {sorted(n.kwargs)}")
    if op == "aten.view_as_complex.default":
        return src
    if op == "aten.view_as_real.default" or op == "aten.view_as_real_copy.default":
        return pair[src]
    if op in ("aten.real.default", "aten.imag.default"):
        return part(pair[src], 0 if op == "aten.real.default" else 1)
    if op == "aten.polar.default":
        r, t = args
        return stack(call(aten.mul.Tensor, r, call(aten.cos.default, t)),
                     call(aten.mul.Tensor, r, call(aten.sin.default, t)))
    if op in _SAME:
        if n.kwargs.get("memory_format") not in (None, torch.contiguous_format,
                                                 torch.preserve_format):
            raise refuse(f"asks for memory format {n.kwargs['memory_format']}")
        return call(aten.clone.default, pair[src])  # a node of its own (checked locally)
    if op == "aten._to_copy.default":
        dtype = n.kwargs.get("dtype")
        if set(n.kwargs) - {"dtype", "layout", "device"} or src not in pair or \
                dtype not in _REAL_OF:
            raise refuse("converts between complex and real dtypes")
        return graph.call_function(aten._to_copy.default, (pair[src],),
                                   {"dtype": _REAL_OF[dtype]})
    if op in ("aten._conj.default", "aten.conj.default", "aten.conj_physical.default",
              "aten._conj_physical.default"):
        p = pair[src]
        return stack(part(p, 0), call(aten.neg.default, part(p, 1)))
    if op in ("aten.neg.default",):
        return call(aten.neg.default, pair[src])
    rank = ndim.get(src, 0) if isinstance(src, torch.fx.Node) else 0
    if op in _SIZED:  # reshape: a pair need not be contiguous where the complex value was
        return call(aten.reshape.default if "expand" not in op else aten.expand.default,
                    pair[src], [int(s) for s in args[1]] + [2])
    if op in ("aten.t.default", "aten.t_copy.default"):
        return call(aten.transpose.int, pair[src], 0, 1) if rank == 2 else pair[src]
    if op in ("aten.permute.default", "aten.permute_copy.default"):
        return call(aten.permute.default, pair[src], [dim(d, rank) for d in args[1]] + [rank])
    if op in _DIM1:
        out_rank = rank + 1 if "unsqueeze" in op else rank
        rest = args[2:]
        if "transpose" in op:
            rest = [dim(rest[0], rank)]
        if op == "aten.flip.default":
            return call(aten.flip.default, pair[src], [dim(d, rank) for d in args[1]])
        return call(n.target, pair[src], dim(args[1], out_rank), *rest)
    if op in ("aten.select_backward.default", "aten.slice_backward.default"):
        # (grad, input_sizes, dim, ...): the gradient of a select / slice, zeros elsewhere
        in_rank = len(args[1])
        return call(n.target, pair[src], [int(v) for v in args[1]] + [2], dim(args[2], in_rank),
                    *args[3:])
    if op in ("aten.index.Tensor", "aten._unsafe_index.Tensor"):
        # index tensors address the leading dims only; the pair dim stays whole
        if any(cplx(i) for i in args[1] if i is not None):
            raise refuse("indexes with a complex tensor")
        return call(n.target, pair[src], list(args[1]))
    if op == "aten.index_select.default":
        return call(n.target, pair[src], dim(args[1], rank), args[2])
    if op == "aten.stack.default":
        parts = args[0]
        if not all(isinstance(a, torch.fx.Node) and a in pair for a in parts):
            raise refuse("stacks complex and real tensors")
        return call(aten.stack.default, [pair[a] for a in parts],
                    dim(args[1] if len(args) > 1 else 0, ndim[parts[0]] + 1))
    if op == "aten.cat.default":
        parts = args[0]
        if not all(isinstance(a, torch.fx.Node) and a in pair for a in parts):
            raise refuse("concatenates complex and real tensors")
        return call(aten.cat.default, [pair[a] for a in parts],
                    dim(args[1] if len(args) > 1 else 0, ndim[parts[0]]))
    if op.startswith("aten.sum.") and rank == 0:
        if n.kwargs.get("dtype") is not None:
            raise refuse("sums into another dtype")
        return call(aten.clone.default, pair[src])  # the sum of one value is that value
    if op == "aten.sum.default" and not n.kwargs:
        return call(aten.sum.dim_IntList, pair[src], list(range(rank)), False)
    if op == "aten.sum.dim_IntList":
        if n.kwargs.get("dtype") is not None:
            raise refuse("sums into another dtype")
        dims = args[1] if len(args) > 1 else n.kwargs.get("dim")
        keep = args[2] if len(args) > 2 else n.kwargs.get("keepdim", False)
        dims = list(range(rank)) if dims is None or len(dims) == 0 else \
            [dim(d, rank) for d in dims]
        return call(aten.sum.dim_IntList, pair[src], dims, bool(keep))
    if op in ("aten.add.Tensor", "aten.sub.Tensor"):
        a, b = args
        alpha = n.kwargs.get("alpha", 1)
        if not (cplx(a) and cplx(b)) or isinstance(alpha, complex):
            raise refuse("adds a complex and a real value")
        return graph.call_function(n.target, (pair[a], pair[b]),
                                   {"alpha": alpha} if alpha != 1 else {})
    if op == "aten.mul.Tensor":
        a, b = args
        if cplx(a) and cplx(b):
            pa, pb = pair[a], pair[b]
            ar, ai, br, bi = part(pa, 0), part(pa, 1), part(pb, 0), part(pb, 1)
            re = call(aten.sub.Tensor, call(aten.mul.Tensor, ar, br),
                      call(aten.mul.Tensor, ai, bi))
            im = call(aten.add.Tensor, call(aten.mul.Tensor, ar, bi),
                      call(aten.mul.Tensor, ai, br))
            return stack(re, im)
        z, r = (a, b) if cplx(a) else (b, a)
        if isinstance(r, complex) or not cplx(z):
            raise refuse("multiplies by a complex constant")
        if isinstance(r, torch.fx.Node):
            r = call(aten.unsqueeze.default, r, -1)
        return call(aten.mul.Tensor, pair[z], r)
    raise refuse("computes on complex values")
