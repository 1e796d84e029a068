"""The complex -> real-pair rewrite of traced programs (samples/pytorch/lossbound_complex.py).

Each case traces a function of real tensors that computes with complex values in between, lets
the pass rewrite the graph, and compares the rewritten graph's outputs with PyTorch's complex
kernels: equal up to rounding (the pairs round each product where a complex kernel may fuse),
with no complex value left. Ops the pass does not cover are refused by name.
"""

import unittest

import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx

from lossbound_complex import ComplexRewriteError, check_local_values, complex_as_real_pairs

torch.set_num_threads(1)


def pairs(x):
    return torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))


def values_of(gm, args):
    values = {}

    class Capture(torch.fx.Interpreter):
        def run_node(self, n):
            values[n.name] = super().run_node(n)
            return values[n.name]

    out = Capture(gm).run(*args)
    return out, values


def rewrite(fn, *args):
    """(outputs of fn's trace, outputs of the rewritten trace, the local checks, the rewritten
    trace's values by node name)."""
    gm = make_fx(fn)(*args)
    expected, values = values_of(gm, [a.clone() for a in args])
    checks = complex_as_real_pairs(gm, values)
    got, values = values_of(gm, [a.clone() for a in args])
    return expected, got, checks, values


CASES = {
    # name: (function of real tensors, argument shapes)
    "polar_times_view_as_complex": (
        lambda x, t: torch.view_as_real(pairs(x) * torch.polar(torch.ones_like(t), t)).flatten(-2),
        [(3, 5, 8), (5, 4)]),
    "conj_product": (lambda x, y: torch.view_as_real(pairs(x) * pairs(y).conj()),
                     [(4, 6), (4, 6)]),
    "broadcast_product_and_transpose": (
        lambda x, y: torch.view_as_real((pairs(x).transpose(0, 1) * pairs(y)[:, None, :2]) * 3.0),
        [(2, 3, 4), (3, 6)]),
    "add_sub_sum_cat": (
        lambda x, y: torch.view_as_real(torch.cat([pairs(x) + pairs(y), pairs(x) - pairs(y)], -1)
                                        .sum(dim=0) + pairs(y).sum()),
        [(5, 8), (5, 8)]),
    "real_imag_and_real_tensor": (
        lambda x, r: (pairs(x) * r).real * 2 + (pairs(x).unsqueeze(0).permute(0, 2, 1)).imag
        .permute(0, 2, 1).squeeze(0),
        [(3, 8), (3, 4)]),
    "select_expand_clone": (
        lambda x: torch.view_as_real(pairs(x).select(1, 2).unsqueeze(-1).expand(3, 2).clone()),
        [(3, 8)]),
    "reshape_after_transpose_and_0d_sum": (
        lambda x: torch.view_as_real(pairs(x).transpose(0, 1).reshape(-1) * pairs(x)[0, 0].sum()
                                     + pairs(x).t().contiguous().view(-1)),
        [(3, 8)]),
    "index_stack_and_slice_gradients": (  # freqs_cis[positions] (Mistral's reference code)
        lambda x, t, pos: torch.autograd.grad(
            torch.view_as_real(torch.stack([pairs(x)[:, 1:3], pairs(x).select(-1, 0)
                                            .unsqueeze(-1).expand(4, 2)], -1)
                               * torch.polar(torch.ones_like(t), t)[pos][:, None, :2]).pow(2)
            .sum(), x)[0],
        [(4, 8), (6, 4), "positions"]),
    "cancellation": (  # (z·conj z).imag is 0 up to rounding, with or without FMA
        lambda x: (pairs(x) * pairs(x).conj()).imag * 1e6 + (pairs(x) * pairs(x)).real,
        [(4, 14)]),
    "gradient_through_the_product": (
        lambda x, t: torch.autograd.grad(
            (torch.view_as_real(pairs(x) * torch.polar(torch.ones_like(t), t)) ** 2).sum(), x)[0],
        [(6, 8), (6, 4)]),
}


class ComplexPairsTest(unittest.TestCase):
    def test_rewritten_programs_compute_the_complex_values(self):
        g = torch.Generator().manual_seed(3)
        for name, (fn, shapes) in CASES.items():
            with self.subTest(case=name):
                args = [torch.tensor([5, 0, 2, 2]) if s == "positions" else
                        torch.randn(s, generator=g) for s in shapes]
                if name in ("gradient_through_the_product", "index_stack_and_slice_gradients"):
                    args[0].requires_grad_()
                expected, got, checks, values = rewrite(fn, *args)
                self.assertGreater(len(checks), 0)
                check_local_values(checks, values)
                complex_left = [n for n, v in values.items()
                                if isinstance(v, torch.Tensor) and v.dtype.is_complex]
                self.assertEqual(complex_left, [])
                if name == "cancellation":  # outputs magnify FMA's last bits: local checks
                    continue
                expected = expected if isinstance(expected, (list, tuple)) else [expected]
                got = got if isinstance(got, (list, tuple)) else [got]
                for e, r in zip(expected, got):
                    self.assertEqual(e.shape, r.shape)
                    # up to rounding: a few ulps of the values' magnitude
                    e, r = e.detach(), r.detach()
                    torch.testing.assert_close(r, e, rtol=0, atol=8 * 2**-23 * float(
                        e.abs().max()))

    def test_a_wrong_sign_would_be_seen(self):
        # The comparison above can fail: conj and no conj differ far beyond rounding.
        g = torch.Generator().manual_seed(4)
        x, y = torch.randn(4, 6, generator=g), torch.randn(4, 6, generator=g)
        a = torch.view_as_real(pairs(x) * pairs(y).conj())
        b = torch.view_as_real(pairs(x) * pairs(y))
        self.assertGreater(float((a - b).abs().max()), 0.1)

    def test_local_checks_see_one_wrong_element(self):
        # A pair off by far less than the outputs' magnitude, in one element of a product whose
        # result is then scaled down: the local check compares that op with PyTorch's kernel.
        g = torch.Generator().manual_seed(5)
        x, y = torch.randn(4, 6, generator=g), torch.randn(4, 6, generator=g)
        fn = CASES["conj_product"][0]
        _, _, checks, values = rewrite(lambda x, y: fn(x, y) * 1e-3 + 1e3, x, y)
        check_local_values(checks, values)
        product = [c for c in checks if str(c.target) == "aten.mul.Tensor"][0]
        values[product.out] = values[product.out].clone()
        values[product.out].view(-1)[5] += 1e-4
        with self.assertRaisesRegex(ComplexRewriteError, r"aten.mul.Tensor.*element 2"):
            check_local_values(checks, values)

    def test_real_programs_are_left_alone(self):
        gm = make_fx(lambda x: (x * 2).sum())(torch.randn(3))
        before = [str(n.target) for n in gm.graph.nodes]
        _, values = values_of(gm, [torch.randn(3)])
        self.assertEqual(complex_as_real_pairs(gm, values), [])
        self.assertEqual([str(n.target) for n in gm.graph.nodes], before)

    def test_ops_not_covered_are_refused_by_name(self):
        for fn, op in ((lambda x: pairs(x).abs(), "aten.abs"),
                       (lambda x: torch.view_as_real(pairs(x).exp()), "aten.exp"),
                       (lambda x: torch.view_as_real(pairs(x) / pairs(x)[0]), "aten.div")):
            with self.subTest(op=op):
                x = torch.randn(2, 4)
                gm = make_fx(fn)(x)
                _, values = values_of(gm, [x])
                with self.assertRaisesRegex(ComplexRewriteError, op):
                    complex_as_real_pairs(gm, values)

    def test_complex_inputs_and_outputs_are_refused(self):
        z = torch.randn(3, dtype=torch.complex64)
        gm = make_fx(lambda z: torch.view_as_real(z * 2))(z)
        _, values = values_of(gm, [z])
        with self.assertRaisesRegex(ComplexRewriteError, "view_as_real"):
            complex_as_real_pairs(gm, values)
        x = torch.randn(2, 4)
        gm = make_fx(lambda x: pairs(x) * 2)(x)
        _, values = values_of(gm, [x])
        with self.assertRaisesRegex(ComplexRewriteError, "output"):
            complex_as_real_pairs(gm, values)


if __name__ == "__main__":
    unittest.main()
