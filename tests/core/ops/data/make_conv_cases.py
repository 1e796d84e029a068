#!/usr/bin/env python3
"""Writes conv_torch_cases.json: fixed convolution cases evaluated by PyTorch in float64.

Each case holds the inputs (input, weight, optional bias, grad_output), the aten.convolution
arguments, and PyTorch's results of aten.convolution.default and
aten.convolution_backward.default (all three outputs). test_conv_ops.cpp compares the point
rules of the engine with them. Run with any PyTorch (checked with Debian's torch 1.13):
    python3 tests/core/ops/data/make_conv_cases.py
"""
import json
import os

import torch

CASES = [
    # name, input shape, weight shape, bias?, stride, padding, dilation, groups[, output_padding
    # of a transposed convolution, whose weight is [C_in, C_out/groups, *kernel]]
    ("conv1d_plain", [2, 3, 9], [4, 3, 3], True, [1], [0], [1], 1),
    ("conv1d_stride_dilation_padding", [1, 2, 11], [3, 2, 3], False, [2], [2], [2], 1),
    ("conv2d_grouped_bias", [2, 4, 6, 5], [6, 2, 3, 2], True, [1, 2], [1, 0], [1, 1], 2),
    ("conv2d_depthwise_stride2", [1, 3, 7, 7], [3, 1, 3, 3], False, [2, 2], [1, 1], [1, 1], 3),
    ("conv2d_dilated_1x1_and_3x3", [2, 2, 8, 6], [4, 2, 3, 3], True, [1, 1], [2, 1], [2, 1], 1),
    ("conv3d_small", [1, 2, 4, 5, 3], [2, 2, 2, 3, 2], True, [1, 2, 1], [1, 1, 0], [1, 1, 2], 1),
    ("convT1d_stride2_outpad", [2, 3, 5], [3, 2, 3], True, [2], [1], [1], 1, [1]),
    ("convT2d_grouped", [1, 4, 4, 3], [4, 3, 3, 2], True, [2, 1], [1, 0], [1, 1], 2, [1, 0]),
    ("convT2d_dilated", [2, 2, 3, 3], [2, 3, 2, 2], False, [1, 1], [0, 1], [2, 1], 1, [0, 0]),
    ("convT3d_small", [1, 2, 2, 3, 2], [2, 2, 2, 2, 2], True, [2, 1, 1], [0, 0, 1], [1, 1, 1], 1,
     [1, 0, 0]),
]


def flat(t):
    return [float(v) for v in t.detach().reshape(-1).tolist()]


def main():
    torch.manual_seed(20240611)
    out = []
    for name, xs, ws, has_bias, stride, padding, dilation, groups, *rest in CASES:
        transposed = bool(rest)
        out_padding = rest[0] if rest else [0] * len(stride)
        channels = ws[1] * groups if transposed else ws[0]
        x = torch.randn(xs, dtype=torch.float64)
        w = torch.randn(ws, dtype=torch.float64)
        b = torch.randn(channels, dtype=torch.float64) if has_bias else None
        y = torch.ops.aten.convolution.default(x, w, b, stride, padding, dilation, transposed,
                                               out_padding, groups)
        gy = torch.randn(y.shape, dtype=torch.float64)
        gi, gw, gb = torch.ops.aten.convolution_backward.default(
            gy, x, w, [channels] if has_bias else None, stride, padding, dilation, transposed,
            out_padding, groups, [True, True, has_bias])
        case = {
            "name": name, "stride": stride, "padding": padding, "dilation": dilation,
            "groups": groups, "transposed": transposed, "output_padding": out_padding,
            "input_shape": list(x.shape), "input": flat(x),
            "weight_shape": list(w.shape), "weight": flat(w),
            "output_shape": list(y.shape), "output": flat(y),
            "grad_output": flat(gy), "grad_input": flat(gi), "grad_weight": flat(gw),
        }
        if has_bias:
            case["bias"] = flat(b)
            case["grad_bias"] = flat(gb)
        out.append(case)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conv_torch_cases.json")
    # One case per line: readable diffs, and floats printed by repr() round-trip exactly.
    with open(path, "w") as f:
        f.write('{"generator": "make_conv_cases.py", "torch_version": %s, "cases": [\n'
                % json.dumps(torch.__version__))
        f.write(",\n".join(json.dumps(c) for c in out))
        f.write("\n]}\n")


if __name__ == "__main__":
    main()
