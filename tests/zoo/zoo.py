#!/usr/bin/python3
"""The model zoo: architectures nobody here wrote, recorded and replayed end to end.

    /usr/bin/python3 tests/zoo/zoo.py --cli build/app/lossbound-cli [--only NAME ... | --extra]
                                      [--work DIR] [--keep] [--json FILE]
    /usr/bin/python3 tests/zoo/zoo.py --list

ctest runs the zoo (ZOO below); --extra runs the other architectures instead (EXTRA: more
torchvision models, video ones among them, heads and recurrent layers of torch.nn, and
transformers' image and audio classifiers, HF_VISION and HF_AUDIO: these and the recurrent
layers need PyTorch 2.x and the venv of scripts/torch2-env.sh), which CI's time leaves out; --only picks from both.

For every architecture it records, with samples/pytorch/lossbound_recorder.py, three 10-step (--steps)
training runs from the same initial weights on the same batches (SGD outside the step, a
checkpoint before every step, model.eval() so dropout is off (resnet18_train: its batch norms in
train mode), parameters and buffers passed
through functional_call; every step function returns the loss and the gradients):

  reference   the plain step.
  correct     the same function computed another way (rounding only):
                CNNs and the ViT: channels_last weights and input instead of contiguous (the 1-D
                CNN: its input stored length-major and transposed, the 1-D analogue);
                language models: four micro-batches sliced inside the step, each micro-batch's
                summed token loss divided by the token count of the whole batch, gradients summed.
  buggy       a real bug:
                classifiers: softmax applied before cross_entropy;
                language models: the mean of the four per-micro-batch token means (the gradient
                accumulation bug transformers fixed in October 2024); the sequences have
                different lengths, so the micro-batches hold unequal token counts from step 0.

Then it runs lossbound-cli on the pairs (reference, correct) and (reference, buggy) and checks:
every program's ops are supported (`info`), no step is "not bounded", the self-check holds at
every step, the correct pair exits 0 (no exit) and the buggy pair exits 3 with its first exit at
step 0 (default method first-order, --no-cache, --json). Soundness at step 0 of the correct pair:
the first-order envelope contains [min, max] of the loss of --ensemble N randomized executions of
the candidate program on the reference's state (0 escapes; the per-element executor, an order,
bracketing and blocking drawn for every dot product), and so do the probabilistic envelope
(a confidence statement, 1 - 1e-6) and the interval envelope
from the inputs wherever it is finite; that interval analysis gives the same values on
--backend host-device (the device-resident replay on the host's counting device). Recordings go
to a temporary folder (removed unless --keep). Exit 0 when every check holds, 1 otherwise; every check failure is printed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.stateless import functional_call

SOURCE_DIR = os.environ.get("LOSSBOUND_SOURCE_DIR") or \
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SOURCE_DIR, "samples", "pytorch"))
from lossbound_recorder import RunRecorder  # noqa: E402

Batch = Dict[str, torch.Tensor]
StepFn = Callable[[Batch, Batch], Batch]

STEPS = 10
CALIBRATION_BATCHES = 10  # batches whose mean sets the batch norms' running statistics
LR = 0.01
IGNORE = -100
MICRO = 4           # micro-batches of the language models' accumulation steps
VOCAB = 48          # language models: token 0 is padding
INIT_SEED = 7
DATA_SEED = 11
CALIBRATION_SEED = 12  # batch-norm statistics: other images than the training batches


# ---------------------------------------------------------------------------------------------
# Models that are not in torchvision / torch.nn as such (plain torch, written like their usual
# implementations).


class EncoderLM(nn.Module):
    """nn.TransformerEncoder of pre-norm, batch-first nn.TransformerEncoderLayer with a causal
    mask, between an embedding and a linear head."""

    def __init__(self, width: int = 16, heads: int = 2, layers: int = 2):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, width)
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.1,
                                           batch_first=True, norm_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, VOCAB)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(t)
        return self.head(self.enc(self.emb(ids), mask=mask))


class ConvGN1d(nn.Module):
    """Conv1d + GroupNorm + GELU, a strided Conv1d + SiLU, AdaptiveAvgPool1d and a classifier."""

    def __init__(self, channels: int = 4, width: int = 8, classes: int = 5):
        super().__init__()
        self.c1 = nn.Conv1d(channels, width, 3, padding=1)
        self.gn = nn.GroupNorm(2, width)
        self.c2 = nn.Conv1d(width, width, 3, stride=2)
        self.pool = nn.AdaptiveAvgPool1d(1)
        self.fc = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.gelu(self.gn(self.c1(x)))
        return self.fc(self.pool(F.silu(self.c2(x))).flatten(1))


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class LlamaLM(nn.Module):
    """A Llama-style decoder in plain torch: RMSNorm, rotary position embeddings with cos/sin
    computed inside the step, causal attention written out (matmul + softmax), SwiGLU MLP."""

    def __init__(self, d: int = 16, heads: int = 2, hidden: int = 32, layers: int = 1):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.emb = nn.Embedding(VOCAB, d)
        self.layers = nn.ModuleList(LlamaBlock(d, heads, hidden) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.head = nn.Linear(d, VOCAB, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.hd, 2, dtype=torch.float32) / self.hd))
        ang = torch.outer(torch.arange(t, dtype=torch.float32), inv_freq)
        ang = torch.cat([ang, ang], dim=-1)
        cos, sin = ang.cos(), ang.sin()
        h = self.emb(ids)
        for layer in self.layers:
            h = layer(h, cos, sin)
        return self.head(self.norm(h))


class LlamaBlock(nn.Module):
    def __init__(self, d: int, heads: int, hidden: int):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.gate = nn.Linear(d, hidden, bias=False)
        self.up = nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    @staticmethod
    def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin

    def forward(self, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = h.shape
        x = self.n1(h)
        q, k, v = (lin(x).view(b, t, self.heads, self.hd).transpose(1, 2)
                   for lin in (self.q, self.k, self.v))
        q, k = self.rotate(q, cos, sin), self.rotate(k, cos, sin)
        s = q @ k.transpose(-1, -2) / math.sqrt(self.hd)
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        a = (s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, -1)
        h = h + self.o(a)
        x = self.n2(h)
        return h + self.down(F.silu(self.gate(x)) * self.up(x))


# ---------------------------------------------------------------------------------------------
# Data


def image_batches(n: int, shape: Tuple[int, ...], classes: int, seed: int = 0,
                  count: Optional[int] = None) -> List[Batch]:
    """`count` batches (default: one per step) of n random images and labels."""
    g = torch.Generator().manual_seed(seed or DATA_SEED)
    return [{"x": torch.randn(n, *shape, generator=g),
             "y": torch.randint(0, classes, (n,), generator=g)}
            for _ in range(STEPS if count is None else count)]


def token_batches(n: int, t: int, mask_after: Optional[int] = None) -> List[Batch]:
    """Sequences of 4..t+1 tokens (padded with 0, labels -100 on padding): counting sequences
    with a random start and stride and 10% random tokens, as in the samples. The four
    micro-batches of every step hold four different numbers of labelled tokens (counted after
    the step's own masking of the labels from position `mask_after` on)."""
    g = torch.Generator().manual_seed(DATA_SEED)
    out = []
    for _ in range(STEPS):
        while True:
            ids = torch.zeros(n, t, dtype=torch.int64)
            labels = torch.full((n, t), IGNORE, dtype=torch.int64)
            for i in range(n):
                length = int(torch.randint(4, t + 2, (1,), generator=g))
                s = int(torch.randint(0, VOCAB - 1, (1,), generator=g))
                d = int(torch.randint(1, 4, (1,), generator=g))
                seq = torch.tensor([1 + (s + j * d) % (VOCAB - 1) for j in range(length)])
                noise = torch.rand(length, generator=g) < 0.1
                seq[noise] = torch.randint(1, VOCAB, (int(noise.sum()),), generator=g)
                ids[i, :length - 1] = seq[:-1]
                labels[i, :length - 1] = seq[1:]
            counted = labels[:, :mask_after] if mask_after is not None else labels
            counts = [int((m != IGNORE).sum()) for m in counted.chunk(MICRO)]
            masked = mask_after is not None and bool((labels[:, mask_after:] != IGNORE).any())
            if len(set(counts)) == MICRO and (mask_after is None or masked):
                break
        out.append({"ids": ids, "labels": labels})
    return out


# ---------------------------------------------------------------------------------------------
# Step functions


def _grads(loss: torch.Tensor, params: Batch) -> Dict[str, torch.Tensor]:
    names = [k for k, v in params.items() if v.requires_grad]
    # A parameter the step does not reach (DINOv2's mask token when nothing is masked) has no
    # gradient, and the optimizer skips it.
    gs = torch.autograd.grad(loss, [params[k] for k in names], allow_unused=True)
    return {"grad:" + k: g for k, g in zip(names, gs) if g is not None}


def classify_step(model: nn.Module, variant: str, layout: str) -> StepFn:
    """reference: contiguous; correct: channels-last weights and input; buggy: softmax before
    cross_entropy."""
    def step(params: Batch, batch: Batch) -> Batch:
        x = batch["x"]
        if variant == "correct":
            x = to_channels_last(x, layout)
        logits = functional_call(model, params, (x,))
        if variant == "buggy":
            logits = F.softmax(logits, dim=1)
        loss = F.cross_entropy(logits, batch["y"])
        return {"loss": loss, **_grads(loss, params)}
    return step


def to_channels_last(t: torch.Tensor, layout: str) -> torch.Tensor:
    if layout == "2d" and t.dim() == 4:
        return t.contiguous(memory_format=torch.channels_last)
    if layout == "1d" and t.dim() == 3:  # stored N x L x C, seen as N x C x L
        return t.transpose(1, 2).contiguous().transpose(1, 2)
    return t


def lm_step(model: nn.Module, variant: str, mask_after: Optional[int],
            smoothing: float) -> StepFn:
    """reference: the whole batch, summed token loss / labelled token count; correct: four
    micro-batches, each summed token loss / the whole batch's count, gradients summed; buggy: the
    mean of the four micro-batch token means."""
    def token_sum(params: Batch, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        logits = functional_call(model, params, (ids,))
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE,
                               reduction="sum", label_smoothing=smoothing)

    def step(params: Batch, batch: Batch) -> Batch:
        ids, labels = batch["ids"], batch["labels"]
        if mask_after is not None:
            labels = labels.clone()
            labels[:, mask_after:] = IGNORE
        total = (labels != IGNORE).sum()
        if variant == "reference":
            loss = token_sum(params, ids, labels) / total
            return {"loss": loss, **_grads(loss, params)}
        size = ids.shape[0] // MICRO
        loss, grads = None, None
        for i in range(MICRO):
            mi, ml = ids[i * size:(i + 1) * size], labels[i * size:(i + 1) * size]
            s = token_sum(params, mi, ml)
            li = s / (ml != IGNORE).sum() / MICRO if variant == "buggy" else s / total
            gi = _grads(li, params)
            loss = li if loss is None else loss + li
            # a parameter one micro-batch does not reach has no gradient from it
            grads = gi if grads is None else {k: grads[k] + gi[k] if k in grads and k in gi
                                              else grads.get(k, gi.get(k))
                                              for k in {**grads, **gi}}
        return {"loss": loss, **grads}
    return step


# ---------------------------------------------------------------------------------------------
# The zoo


@dataclass
class Arch:
    build: Callable[[], nn.Module]
    kind: str                     # "classify" or "lm"
    batches: Callable[..., List[Batch]]
    layout: str = "2d"            # classifiers: channels-last form of the correct candidate
    mask_after: Optional[int] = None
    smoothing: float = 0.0
    about: str = ""
    ensemble: int = 50            # randomized executions for the step-0 soundness check
    train: bool = False           # batch norm in train mode (batch statistics) instead of eval
    notes: List[str] = field(default_factory=list)
    torch2: bool = False          # needs PyTorch >= 2 (run zoo.py with the torch2 venv's python)


def _tv(name: str, **kw) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        import torchvision
        return getattr(torchvision.models, name)(**kw)
    return build


def _resnet18(div: int) -> Callable[[], nn.Module]:
    """torchvision's resnet18 (its ResNet class, BasicBlock, layers [2, 2, 2, 2], its forward and
    initialisation) with every width divided by `div` (div 1: resnet18 itself)."""
    def build() -> nn.Module:
        from torchvision.models.resnet import BasicBlock, ResNet

        class NarrowResNet(ResNet):
            def _make_layer(self, block, planes, blocks, stride=1, dilate=False):
                if planes == 64:  # the first stage: the stem's width is 64 // div too
                    self.inplanes = 64 // div
                return super()._make_layer(block, planes // div, blocks, stride, dilate)

        if div == 1:
            return ResNet(BasicBlock, [2, 2, 2, 2], num_classes=10)
        m = NarrowResNet(BasicBlock, [2, 2, 2, 2], num_classes=10)
        w = 64 // div
        m.conv1 = nn.Conv2d(3, w, kernel_size=7, stride=2, padding=3, bias=False)
        nn.init.kaiming_normal_(m.conv1.weight, mode="fan_out", nonlinearity="relu")
        m.bn1 = nn.BatchNorm2d(w)
        m.fc = nn.Linear(512 // div, 10)
        return m
    return build


def _vit() -> nn.Module:
    from torchvision.models.vision_transformer import VisionTransformer
    m = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                          hidden_dim=32, mlp_dim=64, num_classes=10)
    # torchvision zero-initialises the head: all logits 0 at step 0, where softmax before
    # cross_entropy gives exactly the same loss (log 10), so the bug would only show from step 1.
    m.heads.head.reset_parameters()
    return m


def _densenet() -> nn.Module:
    from torchvision.models import DenseNet
    return DenseNet(growth_rate=8, block_config=(2, 2), num_init_features=16, bn_size=2,
                    num_classes=10)


def _mlp_activations() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 32), nn.Tanh(), nn.Linear(32, 64),
                         nn.GELU(approximate="tanh"), nn.Linear(64, 32), nn.Sigmoid(),
                         nn.Linear(32, 10))


def images(n: int, shape: Tuple[int, ...], classes: int) -> Callable[..., List[Batch]]:
    return lambda seed=0, count=None: image_batches(n, shape, classes, seed, count)


ZOO: Dict[str, Arch] = {
    "resnet18": Arch(_resnet18(8), "classify", images(2, (3, 32, 32), 10),
                     about="torchvision resnet18 (ResNet, BasicBlock, [2, 2, 2, 2]) with widths "
                           "8-64 instead of 64-512, num_classes=10, 3x32x32, batch 2"),
    "resnet18_train": Arch(_resnet18(8), "classify", images(2, (3, 32, 32), 10), train=True,
                           about="the narrow resnet18 with its batch norms in train mode (batch "
                                 "statistics), batch 2"),
    "mobilenet_v3_small": Arch(_tv("mobilenet_v3_small", num_classes=10, width_mult=0.25),
                               "classify", images(2, (3, 32, 32), 10),
                               about="torchvision mobilenet_v3_small(num_classes=10, "
                                     "width_mult=0.25), 3x32x32, batch 2"),
    "vit": Arch(_vit, "classify", images(4, (3, 32, 32), 10),
                about="torchvision VisionTransformer(32, patch 8, 2 layers, 2 heads, hidden 32, "
                      "MLP 64), batch 4"),
    "densenet": Arch(_densenet, "classify", images(2, (3, 32, 32), 10),
                     about="torchvision DenseNet(growth_rate=8, block_config=(2, 2), "
                           "num_init_features=16, bn_size=2): AvgPool2d transitions, "
                           "3x32x32, batch 2"),
    "mlp_activations": Arch(_mlp_activations, "classify", images(2, (3, 8, 8), 10),
                            about="nn.Sequential of Linear layers with nn.Tanh, "
                                  "nn.GELU(approximate='tanh') and nn.Sigmoid, 3x8x8, batch 2"),
    "conv1d_groupnorm": Arch(ConvGN1d, "classify", images(6, (4, 32), 5), layout="1d",
                             about="Conv1d + GroupNorm + AdaptiveAvgPool1d, 4x32, batch 6"),
    "transformer_encoder": Arch(EncoderLM, "lm", lambda: token_batches(8, 28, 20), mask_after=20,
                                about="nn.TransformerEncoder (2 pre-norm batch-first layers, "
                                      "width 16, causal mask), 8x28 tokens, labels[:, 20:] = "
                                      "-100 in the step"),
    "llama": Arch(LlamaLM, "lm", lambda: token_batches(8, 24),
                  about="Llama-style decoder (RMSNorm, rotary cos/sin in the step, SwiGLU; "
                        "width 16, 1 layer), 8x24 tokens"),
    "llama_smooth": Arch(LlamaLM, "lm", lambda: token_batches(8, 24), smoothing=0.1,
                         about="the Llama-style decoder with cross_entropy(label_smoothing=0.1)"),
}

# More torchvision architectures, small configurations of their own classes: not in ctest (CI's
# time), run with --only NAME or --extra (all of them); the README quotes their figures.


def _shufflenet() -> nn.Module:
    from torchvision.models import ShuffleNetV2
    return ShuffleNetV2([2, 2, 2], [8, 16, 32, 64, 128], num_classes=10)


def _efficientnet() -> nn.Module:
    from torchvision.models.efficientnet import EfficientNet, MBConvConfig
    return EfficientNet([MBConvConfig(1, 3, 1, 8, 8, 1), MBConvConfig(4, 3, 2, 8, 16, 1),
                         MBConvConfig(4, 5, 2, 16, 24, 1)], dropout=0.2, last_channel=64,
                        num_classes=10)


def _convnext() -> nn.Module:
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    return ConvNeXt([CNBlockConfig(16, 32, 1), CNBlockConfig(32, None, 1)], num_classes=10)


def _swin() -> nn.Module:
    from torchvision.models.swin_transformer import SwinTransformer
    return SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[1, 1], num_heads=[1, 2],
                           window_size=[4, 4], num_classes=10)


def _swin_v2() -> nn.Module:
    from torchvision.models.swin_transformer import SwinTransformer, SwinTransformerBlockV2, \
        PatchMergingV2
    return SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[1, 1], num_heads=[1, 2],
                           window_size=[4, 4], num_classes=10, block=SwinTransformerBlockV2,
                           downsample_layer=PatchMergingV2)


def _maxvit() -> nn.Module:
    from torchvision.models.maxvit import MaxVit
    return MaxVit(input_size=(32, 32), stem_channels=8, partition_size=2, block_channels=[16, 32],
                  block_layers=[1, 1], head_dim=8, stochastic_depth_prob=0.0, num_classes=10)


def _mvit() -> nn.Module:
    from torchvision.models.video.mvit import MSBlockConfig, MViT
    blocks = [MSBlockConfig(num_heads=1, input_channels=16, output_channels=16,
                            kernel_q=[3, 3, 3], kernel_kv=[3, 3, 3], stride_q=[1, 1, 1],
                            stride_kv=[1, 2, 2]),
              MSBlockConfig(num_heads=2, input_channels=16, output_channels=32,
                            kernel_q=[3, 3, 3], kernel_kv=[3, 3, 3], stride_q=[1, 2, 2],
                            stride_kv=[1, 1, 1])]
    return MViT(spatial_size=(32, 32), temporal_size=4, block_setting=blocks, residual_pool=True,
                residual_with_cls_embed=False, rel_pos_embed=True, proj_after_attn=True,
                num_classes=10, patch_embed_kernel=(3, 7, 7), patch_embed_stride=(2, 4, 4),
                patch_embed_padding=(1, 3, 3))


class FpnClassifier(nn.Module):
    """torchvision's FeaturePyramidNetwork over three strided convolutions, the pyramid's
    levels averaged into a linear classifier: nearest upsampling by 2 in its top-down path."""

    def __init__(self) -> None:
        super().__init__()
        from torchvision.ops import FeaturePyramidNetwork
        self.c1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.c3 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.fpn = FeaturePyramidNetwork([8, 16, 32], 8)
        self.head = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from collections import OrderedDict
        f1 = torch.relu(self.c1(x))
        f2 = torch.relu(self.c2(f1))
        f3 = torch.relu(self.c3(f2))
        levels = self.fpn(OrderedDict([("a", f1), ("b", f2), ("c", f3)]))
        return self.head(sum(v.mean(dim=(2, 3)) for v in levels.values()))


def _swin3d() -> nn.Module:
    from torchvision.models.video.swin_transformer import SwinTransformer3d
    return SwinTransformer3d(patch_size=[2, 4, 4], embed_dim=16, depths=[1, 1], num_heads=[1, 2],
                             window_size=[2, 4, 4], stochastic_depth_prob=0.0, num_classes=10)


class SmallS3D(nn.Module):
    """torchvision S3D's own blocks at a small size, in its layout: a temporally separable stem,
    (1, 3, 3) max pooling, a separable Inception block, (3, 3, 3) max pooling, then S3D's head
    (a stride-1 AvgPool3d over the last (2, h, w) volume, a 1x1x1 convolution, a mean)."""

    def __init__(self) -> None:
        super().__init__()
        from functools import partial
        from torchvision.models.video.s3d import SepInceptionBlock3D, TemporalSeparableConv
        norm = partial(nn.BatchNorm3d, eps=0.001, momentum=0.001)
        self.features = nn.Sequential(
            TemporalSeparableConv(3, 16, 7, 2, 3, norm),
            nn.MaxPool3d(kernel_size=(1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1)),
            SepInceptionBlock3D(16, 8, 8, 8, 4, 8, 8, norm),
            nn.MaxPool3d(kernel_size=(3, 3, 3), stride=(2, 2, 2), padding=(1, 1, 1)))
        self.avgpool = nn.AvgPool3d(kernel_size=(2, 4, 4), stride=1)
        self.classifier = nn.Conv3d(32, 10, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.avgpool(self.features(x))).mean((2, 3, 4))


def _regnet() -> nn.Module:
    from torchvision.models.regnet import BlockParams, RegNet
    return RegNet(BlockParams.from_init_params(depth=4, w_0=8, w_a=8.0, w_m=2.0, group_width=8),
                  num_classes=10, stem_width=8)


def _efficientnet_v2() -> nn.Module:
    from torchvision.models.efficientnet import EfficientNet, FusedMBConvConfig, MBConvConfig
    return EfficientNet([FusedMBConvConfig(1, 3, 1, 8, 8, 1), FusedMBConvConfig(4, 3, 2, 8, 16, 1),
                         MBConvConfig(4, 3, 2, 16, 24, 1)], dropout=0.2, last_channel=64,
                        num_classes=10)


class UpsampleDecoder(nn.Module):
    """A decoder's upsampling paths: ConvTranspose2d (stride 2, output_padding), PixelShuffle
    and nearest Upsample, then global pooling and a linear head."""

    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.up = nn.ConvTranspose2d(8, 8, 3, stride=2, padding=1, output_padding=1)
        self.ps = nn.Conv2d(8, 16, 3, padding=1)
        self.shuffle = nn.PixelShuffle(2)
        self.near = nn.Upsample(scale_factor=0.5, mode="nearest")
        self.head = nn.Linear(4, 10)

    def forward(self, x):
        h = torch.relu(self.down(x))
        h = torch.relu(self.up(h))
        h = self.near(self.shuffle(self.ps(h)))
        return self.head(h.mean((2, 3)))


class SegmentationHead(nn.Module):
    """An FCN-style head: a stride-4 encoder, 1x1 classifier, bilinear upsampling back to the
    image (align_corners=False), averaged into class scores."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Conv2d(3, 8, 3, stride=4, padding=1)
        self.cls = nn.Conv2d(8, 10, 1)

    def forward(self, x):
        h = self.cls(torch.relu(self.enc(x)))
        h = nn.functional.interpolate(h, size=x.shape[-2:], mode="bilinear", align_corners=False)
        return h.mean((2, 3))


class RowRecurrent(nn.Module):
    """Reads an image as a sequence of its 32 rows (3x32 values each) with a recurrent layer of
    torch.nn, and classifies from the last step's output."""

    def __init__(self, kind: str):
        super().__init__()
        if kind == "lstm":
            self.rnn = nn.LSTM(96, 16, num_layers=2, bidirectional=True, batch_first=True)
        elif kind == "gru":
            self.rnn = nn.GRU(96, 16, batch_first=True)
        else:
            self.rnn = nn.RNN(96, 16, num_layers=2, nonlinearity="relu", batch_first=True)
        self.head = nn.Linear(16 * (2 if self.rnn.bidirectional else 1), 10)

    def forward(self, x):
        out, _ = self.rnn(x.permute(0, 2, 1, 3).reshape(x.shape[0], 32, 96))
        return self.head(out[:, -1])


def _googlenet() -> nn.Module:
    from torchvision.models import GoogLeNet
    return GoogLeNet(num_classes=10, aux_logits=False, init_weights=True)


EXTRA: Dict[str, Arch] = {
    "shufflenet_v2": Arch(_shufflenet, "classify", images(2, (3, 32, 32), 10),
                          about="torchvision ShuffleNetV2(stages [2, 2, 2], channels 8-128): "
                                "channel shuffle, chunk, max pooling, 3x32x32, batch 2"),
    "squeezenet1_1": Arch(_tv("squeezenet1_1", num_classes=10), "classify",
                          images(2, (3, 32, 32), 10),
                          about="torchvision squeezenet1_1(num_classes=10): ceil-mode max "
                                "pooling, Fire concatenations, 3x32x32, batch 2"),
    "efficientnet": Arch(_efficientnet, "classify", images(2, (3, 32, 32), 10),
                         about="torchvision EfficientNet of three MBConv stages: SiLU, "
                               "squeeze-excitation, stochastic depth (eval), 3x32x32, batch 2"),
    "convnext": Arch(_convnext, "classify", images(2, (3, 32, 32), 10),
                     about="torchvision ConvNeXt(16-32 channels, 1 block per stage): depthwise "
                           "7x7, LayerNorm2d through permutes, layer scale, 3x32x32, batch 2"),
    "swin": Arch(_swin, "classify", images(2, (3, 32, 32), 10),
                 about="torchvision SwinTransformer(embed 16, depths [1, 1], window 4): shifted "
                       "windows (roll), relative position bias by index, 3x32x32, batch 2"),
    "swin_v2": Arch(_swin_v2, "classify", images(2, (3, 32, 32), 10),
                    about="torchvision Swin V2 (embed 16, depths [1, 1], window 4): cosine "
                          "attention (F.normalize: linalg_vector_norm), log-spaced continuous "
                          "position bias (an MLP), res-post-norm, 3x32x32, batch 2"),
    "maxvit": Arch(_maxvit, "classify", images(2, (3, 32, 32), 10),
                   about="torchvision MaxVit(stem 8, blocks 16-32, partition 2, head dim 8): "
                         "MBConv, block and grid attention with relative position bias, "
                         "3x32x32, batch 2"),
    "mvit": Arch(_mvit, "classify", images(2, (3, 4, 32, 32), 10), torch2=True,
                 about="torchvision MViT (video, two multiscale blocks, relative position "
                       "embeddings, pooled attention: max_pool3d), 3x4x32x32 clips, batch 2"),
    "swin3d": Arch(_swin3d, "classify", images(2, (3, 4, 32, 32), 10), torch2=True,
                   about="torchvision SwinTransformer3d (video Swin: embed 16, depths [1, 1], "
                         "window 2x4x4): 3-d shifted windows, 3-d relative position bias, "
                         "3x4x32x32 clips, batch 2"),
    "s3d": Arch(SmallS3D, "classify", images(2, (3, 8, 32, 32), 10),
                about="torchvision S3D's TemporalSeparableConv and SepInceptionBlock3D (16-32 "
                      "channels): 3-d max pooling, S3D's AvgPool3d head, 3x8x32x32 clips, "
                      "batch 2"),
    "fpn": Arch(FpnClassifier, "classify", images(2, (3, 32, 32), 10),
                about="torchvision FeaturePyramidNetwork over three strided convolutions: "
                      "nearest upsampling by 2 (F.interpolate), 3x32x32, batch 2"),
    "regnet": Arch(_regnet, "classify", images(2, (3, 32, 32), 10),
                   about="torchvision RegNet(depth 4, w_0 8, group width 8): grouped "
                         "convolutions, squeeze-excitation, 3x32x32, batch 2"),
    "mobilenet_v2": Arch(_tv("mobilenet_v2", num_classes=10, width_mult=0.25), "classify",
                         images(2, (3, 32, 32), 10),
                         about="torchvision mobilenet_v2(width_mult=0.25): inverted residuals, "
                               "ReLU6 (hardtanh), 3x32x32, batch 2"),
    "mnasnet": Arch(_tv("mnasnet0_5", num_classes=10), "classify", images(2, (3, 32, 32), 10),
                    about="torchvision mnasnet0_5(num_classes=10): depthwise 5x5 stages, "
                          "3x32x32, batch 2"),
    "efficientnet_v2": Arch(_efficientnet_v2, "classify", images(2, (3, 32, 32), 10),
                            about="torchvision EfficientNet of two FusedMBConv stages and one "
                                  "MBConv stage (EfficientNetV2's blocks), 3x32x32, batch 2"),
    "upsample_decoder": Arch(UpsampleDecoder, "classify", images(2, (3, 32, 32), 10),
                             about="ConvTranspose2d (stride 2, output_padding 1), PixelShuffle "
                                   "and nearest Upsample, 3x32x32, batch 2"),
    "segmentation_head": Arch(SegmentationHead, "classify", images(2, (3, 32, 32), 10),
                              about="FCN-style head: stride-4 encoder, 1x1 classifier, bilinear "
                                    "upsampling to 32x32, averaged, batch 2"),
    "lstm": Arch(lambda: RowRecurrent("lstm"), "classify", images(2, (3, 32, 32), 10),
                 torch2=True, about="nn.LSTM(2 layers, bidirectional, hidden 16) over the 32 "
                                    "rows of a 3x32x32 image, batch 2"),
    "gru": Arch(lambda: RowRecurrent("gru"), "classify", images(2, (3, 32, 32), 10),
                torch2=True,
                about="nn.GRU(hidden 16) over the 32 rows of a 3x32x32 image, batch 2"),
    "rnn": Arch(lambda: RowRecurrent("rnn"), "classify", images(2, (3, 32, 32), 10),
                torch2=True, about="nn.RNN(2 layers, ReLU, hidden 16) over the 32 rows of a "
                                   "3x32x32 image, batch 2"),
    "googlenet": Arch(_googlenet, "classify", images(2, (3, 32, 32), 10),
                      about="torchvision GoogLeNet(num_classes=10, aux_logits=False): inception "
                            "blocks of 64-832 channels, 3x32x32, batch 2"),
}


class HfClassifier(nn.Module):
    """A transformers image or audio classifier (AutoModelForImageClassification's and
    AutoModelForAudioClassification's classes) built from a tiny config with random weights
    (nothing is downloaded), returning its logits: SDPA attention where transformers has it, else
    eager. Audio models read a waveform stored as one channel, N x 1 x L."""

    def __init__(self, config: str, model: str, **kw):
        super().__init__()
        import transformers
        transformers.logging.set_verbosity_error()
        cls, make = getattr(transformers, model), getattr(transformers, config)
        try:
            self.m = cls._from_config(make(num_labels=10, **kw), attn_implementation="sdpa")
        except ValueError:  # "does not support an attention implementation through SDPA"
            self.m = cls._from_config(make(num_labels=10, **kw), attn_implementation="eager")

    def forward(self, x):
        if x.dim() == 3:  # a waveform: input_values, N x L
            return self.m(input_values=x[:, 0]).logits
        return self.m(pixel_values=x).logits


_VIT_SIZES = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, image_size=32, patch_size=8)
_STAGES = dict(hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1])
_TEXT_SIZES = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                   intermediate_size=64)
_SWIN_SIZES = dict(image_size=32, patch_size=2, embed_dim=16, depths=[1, 1], num_heads=[1, 2],
                   window_size=4)
# name: (config class, model class, config arguments, what it exercises beyond the zoo's own
# architectures); transformers 5 on
# PyTorch 2.x, 3x32x32 images, batch 2.
HF_VISION: Dict[str, tuple] = {
    "hf_vit": ("ViTConfig", "ViTForImageClassification", _VIT_SIZES, ""),
    "hf_deit": ("DeiTConfig", "DeiTForImageClassification", _VIT_SIZES,
                "class and distillation tokens"),
    "hf_beit": ("BeitConfig", "BeitForImageClassification",
                dict(_VIT_SIZES, use_relative_position_bias=True, use_mean_pooling=True),
                "relative position bias by a constant index, layer scale, mean pooling"),
    "hf_dinov2": ("Dinov2Config", "Dinov2ForImageClassification", _VIT_SIZES,
                  "interpolated position embeddings, layer scale; its mask token unused"),
    "hf_swin": ("SwinConfig", "SwinForImageClassification", _SWIN_SIZES, ""),
    "hf_swinv2": ("Swinv2Config", "Swinv2ForImageClassification", _SWIN_SIZES,
                  "cosine attention, continuous position bias"),
    "hf_focalnet": ("FocalNetConfig", "FocalNetForImageClassification",
                    dict(image_size=32, patch_size=2, embed_dim=16, depths=[1, 1],
                         focal_levels=[2, 2], focal_windows=[3, 3]),
                    "focal modulation: depthwise convolutions, gates"),
    "hf_hiera": ("HieraConfig", "HieraForImageClassification",
                 dict(image_size=[32, 32], patch_size=[3, 3], patch_stride=[2, 2],
                      patch_padding=[1, 1], embed_dim=16, depths=[1, 1], num_heads=[1, 2],
                      query_stride=[2, 2], masked_unit_size=[4, 4], num_query_pool=1),
                 "unrolled mask units, query pooling"),
    "hf_convnext": ("ConvNextConfig", "ConvNextForImageClassification", _STAGES, ""),
    "hf_convnextv2": ("ConvNextV2Config", "ConvNextV2ForImageClassification", _STAGES,
                      "global response normalization"),
    "hf_resnet": ("ResNetConfig", "ResNetForImageClassification",
                  dict(_STAGES, embedding_size=8, layer_type="basic"), ""),
    "hf_regnet": ("RegNetConfig", "RegNetForImageClassification",
                  dict(_STAGES, embedding_size=8, groups_width=8), ""),
    "hf_poolformer": ("PoolFormerConfig", "PoolFormerForImageClassification", _STAGES,
                      "average pooling as the token mixer, group norm"),
    "hf_segformer": ("SegformerConfig", "SegformerForImageClassification",
                     dict(_STAGES, num_attention_heads=[1, 1, 2, 2], decoder_hidden_size=32),
                     "overlapping patches, reduced attention"),
    "hf_pvt_v2": ("PvtV2Config", "PvtV2ForImageClassification",
                  dict(_STAGES, num_attention_heads=[1, 1, 2, 2]),
                  "spatial-reduction attention, depthwise convolutions"),
    "hf_mobilevit": ("MobileViTConfig", "MobileViTForImageClassification",
                     dict(image_size=32, hidden_sizes=[16, 24, 32],
                          neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64]),
                     "unfolded patches through transformer blocks"),
    "hf_mobilenet_v2": ("MobileNetV2Config", "MobileNetV2ForImageClassification",
                        dict(image_size=32, depth_multiplier=0.25),
                        "TensorFlow-style padding"),
    "hf_bit": ("BitConfig", "BitForImageClassification",
               dict(embedding_size=32, hidden_sizes=[32, 64], depths=[1, 1],
                    layer_type="bottleneck", num_groups=8),
               "weight-standardized convolutions, group norm"),
    "hf_swiftformer": ("SwiftFormerConfig", "SwiftFormerForImageClassification",
                       dict(image_size=32, depths=[1, 1, 1, 1], embed_dims=[8, 16, 32, 64]),
                       "additive attention, batch-normed convolutions"),
    "hf_clip": ("CLIPConfig", "CLIPForImageClassification",
                dict(vision_config=_VIT_SIZES, text_config=_TEXT_SIZES),
                "CLIP's vision tower, quick GELU"),
    "hf_siglip": ("SiglipConfig", "SiglipForImageClassification",
                  dict(vision_config=_VIT_SIZES, text_config=_TEXT_SIZES),
                  "SigLIP's vision tower"),
    # Not LeViT: in eval mode it caches its attention biases, a tensor of the previous call's
    # graph, so a second step reuses stale weights (and autograd refuses to backward through it).
}
# Audio classifiers: a 1x800 waveform through the convolutional feature encoder (strides 5, 2, 2),
# its group norm, the positional convolution (weight normalization) and 2 transformer layers.
_AUDIO_SIZES = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=64, conv_dim=[16, 16, 16], conv_stride=[5, 2, 2],
                    conv_kernel=[10, 3, 3], num_conv_pos_embeddings=16,
                    num_conv_pos_embedding_groups=4, classifier_proj_size=16)
HF_AUDIO: Dict[str, tuple] = {
    "hf_wav2vec2": ("Wav2Vec2Config", "Wav2Vec2ForSequenceClassification", _AUDIO_SIZES, ""),
    "hf_hubert": ("HubertConfig", "HubertForSequenceClassification", _AUDIO_SIZES, ""),
    "hf_wavlm": ("WavLMConfig", "WavLMForSequenceClassification",
                 dict(_AUDIO_SIZES, num_buckets=16, max_bucket_distance=64),
                 "gated relative position bias, log-spaced buckets"),
    "hf_data2vec_audio": ("Data2VecAudioConfig", "Data2VecAudioForSequenceClassification",
                          _AUDIO_SIZES, "layer-normed feature encoder, stacked positional "
                                        "convolutions"),
    "hf_sew": ("SEWConfig", "SEWForSequenceClassification", dict(_AUDIO_SIZES, squeeze_factor=2),
               "squeezed sequence: pooling and upsampling around the encoder"),
    "hf_unispeech": ("UniSpeechConfig", "UniSpeechForSequenceClassification", _AUDIO_SIZES, ""),
}
for _name, (_config, _model, _kw, _what) in {**HF_VISION, **HF_AUDIO}.items():
    _audio = _name in HF_AUDIO
    EXTRA[_name] = Arch((lambda c=_config, m=_model, k=_kw: HfClassifier(c, m, **k)),
                        "classify", images(2, (1, 800) if _audio else (3, 32, 32), 10),
                        layout="1d" if _audio else "2d", torch2=True,
                        about=f"transformers {_model}{': ' + _what if _what else ''}; tiny "
                              f"config, random weights, "
                              f"{'a 1x800 waveform' if _audio else '3x32x32'}, batch 2")
ARCHS: Dict[str, Arch] = {**ZOO, **EXTRA}

VARIANTS = ("reference", "correct", "buggy")


def make_step(arch: Arch, model: nn.Module, variant: str) -> StepFn:
    if arch.kind == "classify":
        return classify_step(model, variant, arch.layout)
    return lm_step(model, variant, arch.mask_after, arch.smoothing)


def calibrate_batch_norm(model: nn.Module, batches: List[Batch]) -> None:
    """Sets every batch norm's running statistics to the mean over `batches` (momentum None:
    a cumulative average), as in a trained network. Fresh statistics (mean 0, variance 1) leave
    the eval-mode network unnormalised: activations grow block after block."""
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    with torch.no_grad():
        for b in batches:
            model(b["x"])
    model.eval()


def initial_params(arch: Arch) -> Tuple[nn.Module, Batch]:
    torch.manual_seed(INIT_SEED)
    model = arch.build()
    if arch.kind == "classify":
        # A fixed number of batches, whatever --steps is: 3 batches of 2 images left statistics
        # under which resnet18 and mobilenet diverged within 3 SGD steps.
        calibrate_batch_norm(model, arch.batches(seed=CALIBRATION_SEED,
                                                 count=CALIBRATION_BATCHES))
    model.eval()
    if arch.train:  # batch statistics; running statistics updated with PyTorch's momentum
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.momentum = 0.1
        model.train()
    params = {k: v.detach().clone().requires_grad_() for k, v in model.named_parameters()}
    params.update({k: v.detach().clone() for k, v in model.named_buffers()})
    return model, params


def record(name: str, folder: str) -> Dict[str, float]:
    """Records the three runs of `name` into folder/{reference,correct,buggy}.h5; returns the
    seconds each took."""
    arch = ARCHS[name]
    batches = arch.batches()
    seconds = {}
    for variant in VARIANTS:
        model, params = initial_params(arch)
        if variant == "correct" and arch.kind == "classify" and arch.layout == "2d":
            params = {k: (v.detach().contiguous(memory_format=torch.channels_last)
                          .requires_grad_(v.requires_grad) if v.dim() == 4 else v)
                      for k, v in params.items()}
        step = make_step(arch, model, variant)
        trainable = [p for p in params.values() if p.requires_grad]
        opt = torch.optim.SGD(trainable, lr=LR)
        start = time.perf_counter()
        path = os.path.join(folder, f"{variant}.h5")
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # e.g. traced loss != logged loss
            if arch.train:  # the running statistics' in-place update: not part of the loss
                warnings.filterwarnings("ignore", message=".*writes into its inputs in place",
                                        category=RuntimeWarning)
            with RunRecorder(path, run_name=f"{name}/{variant}", role=variant, step_fn=step,
                             notes=arch.about) as rec:
                for step_no, batch in enumerate(batches):
                    rec.checkpoint(step_no, params, batch)  # the state before the step
                    out = step(params, batch)
                    rec.log(step_no, out["loss"].item(), lr=LR)
                    for k, p in params.items():
                        if p.requires_grad:
                            g = out.get("grad:" + k)
                            p.grad = None if g is None else g.detach()
                    opt.step()
                    opt.zero_grad(set_to_none=True)
        seconds[variant] = time.perf_counter() - start
    return seconds


def torch_step_seconds(name: str, repeats: int = 5) -> float:
    """PyTorch's own time for step 0 of the correct run (forward and backward, fp32, on the
    threads torch is set to use): the median of `repeats` calls after one warm-up call. The
    yardstick bench-zoo's replay times are divided by (bench/zoo_soundness.sh)."""
    arch = ARCHS[name]
    model, params = initial_params(arch)
    if arch.kind == "classify" and arch.layout == "2d":
        params = {k: (v.detach().contiguous(memory_format=torch.channels_last)
                      .requires_grad_(v.requires_grad) if v.dim() == 4 else v)
                  for k, v in params.items()}
    step = make_step(arch, model, "correct")
    batch = arch.batches()[0]
    step(params, batch)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step(params, batch)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


# ---------------------------------------------------------------------------------------------
# Analysis with lossbound-cli


class Checker:
    def __init__(self, name: str):
        self.name = name
        self.failures: List[str] = []

    def check(self, ok: bool, what: str) -> bool:
        if not ok:
            self.failures.append(what)
            print(f"  FAIL {self.name}: {what}", flush=True)
        return ok


def run_cli(cli: str, args: List[str]) -> Tuple[int, str, str, float]:
    start = time.perf_counter()
    p = subprocess.run([cli] + args, capture_output=True, text=True, check=False)
    return p.returncode, p.stdout, p.stderr, time.perf_counter() - start


def analyze(cli: str, ref: str, cand: str, json_path: str, extra: List[str]) -> Tuple[int, dict,
                                                                                      str, float]:
    code, out, err, secs = run_cli(cli, ["analyze", "--reference", ref, "--candidate", cand,
                                         "--no-cache", "--json", json_path] + extra)
    report = {}
    if os.path.exists(json_path):
        with open(json_path, encoding="utf-8") as f:
            report = json.load(f)
    return code, report, out + err, secs


def _num(v) -> float:
    return float(v) if not isinstance(v, str) else float(v.replace("inf", "inf"))


def half_width(step: dict) -> float:
    lo, hi = _num(step["envelope_lo"]), _num(step["envelope_hi"])
    centre = 0.5 * (lo + hi)
    return (hi - lo) / 2 / abs(centre) if math.isfinite(centre) and centre else math.inf


def contains(outer: dict, inner: dict) -> bool:
    return _num(outer["envelope_lo"]) <= _num(inner["envelope_lo"]) and \
        _num(inner["envelope_hi"]) <= _num(outer["envelope_hi"])


def check_arch(cli: str, name: str, folder: str, ensemble: int, c: Checker) -> dict:
    files = {v: os.path.join(folder, f"{v}.h5") for v in VARIANTS}
    result: dict = {"architecture": name, "about": ARCHS[name].about}
    code, out, err, _ = run_cli(cli, ["info"] + list(files.values()))
    c.check(code == 0, f"info exits {code}: {err.strip()}")
    c.check("unsupported ops" not in out,
            "unsupported ops: " + " ".join(line.strip() for line in out.splitlines()
                                           if line.startswith("        ")))
    result["ops"] = sorted({line.split()[0] for line in out.splitlines()
                            if line.startswith("        ")})

    for variant, expect in (("correct", 0), ("buggy", 3)):
        code, rep, text, secs = analyze(cli, files["reference"], files[variant],
                                        os.path.join(folder, f"{variant}.json"), [])
        result[f"{variant}_exit"] = code
        result[f"{variant}_seconds"] = round(secs, 1)
        c.check(code == expect, f"{variant} pair: exit {code}, expected {expect}\n{text}")
        steps = rep.get("steps", [])
        c.check(len(steps) == STEPS, f"{variant} pair: {len(steps)} steps analysed, expected "
                                     f"{STEPS}")
        bad = [s["step"] for s in steps if s["verdict"] == "not bounded"]
        c.check(not bad, f"{variant} pair: not bounded at steps {bad}: "
                         f"{[s['note'] for s in steps if s['verdict'] == 'not bounded'][:1]}")
        fails = [s["step"] for s in steps if not s["self_check"]]
        c.check(not fails, f"{variant} pair: self-check fails at steps {fails}")
        first = rep.get("first_exit")
        result[f"{variant}_first_exit"] = first
        result[f"{variant}_verdicts"] = sorted({s["verdict"] for s in steps})
        if variant == "buggy":
            c.check(first == 0, f"buggy pair: first exit {first}, expected 0")
        if steps:
            s0 = steps[0]
            result[f"{variant}_first_order_rel_half_width"] = half_width(s0)
            point = _num(s0["point_loss"])
            if s0["verdict"] != "not bounded" and point:
                result[f"{variant}_reference_gap"] = abs(_num(s0["reference_loss"]) - point) / \
                    abs(point)
            if variant == "correct":
                result["first_order_step0"] = s0

    # Soundness at step 0: randomized executions of the correct candidate on the reference's
    # state against the first-order and interval envelopes.
    fo = result.get("first_order_step0")
    code, ens, text, secs = analyze(cli, files["reference"], files["correct"],
                                    os.path.join(folder, "ensemble.json"),
                                    ["--steps", "0", "--method", "ensemble", "--ensemble-size",
                                     str(ensemble), "--ensemble-order", "per-element"])
    result["ensemble_seconds"] = round(secs, 1)
    # The ensemble's own self-check (the candidate's logged loss among N randomized executions)
    # may fail for small N (exit 4); only its [min, max] matters here.
    e0 = ens.get("steps", [{}])[0] if ens.get("steps") else None
    c.check(code in (0, 4) and e0 is not None and e0["verdict"] != "not bounded",
            f"ensemble at step 0: exit {code}\n{text}")
    if e0 and fo:
        result["ensemble_rel_half_width"] = half_width(e0)
        result["ensemble"] = [e0["envelope_lo"], e0["envelope_hi"]]
        ok = contains(fo, e0)
        result["first_order_escapes"] = 0 if ok else 1
        c.check(ok, f"soundness: the first-order envelope [{fo['envelope_lo']}, "
                    f"{fo['envelope_hi']}] at step 0 does not contain the {ensemble} randomized "
                    f"executions [{e0['envelope_lo']}, {e0['envelope_hi']}]")
    # The probabilistic envelope is a confidence statement (1 - 1e-6), not a guarantee; an
    # execution outside it would still be a finding worth failing on.
    code, pro, text, _ = analyze(cli, files["reference"], files["correct"],
                                 os.path.join(folder, "probabilistic.json"),
                                 ["--steps", "0", "--method", "probabilistic"])
    p0 = pro.get("steps", [{}])[0] if pro.get("steps") else None
    c.check(code == 0 and p0 is not None, f"probabilistic at step 0: exit {code}\n{text}")
    if p0 and e0:
        result["probabilistic_rel_half_width"] = half_width(p0)
        ok = contains(p0, e0)
        result["probabilistic_escapes"] = 0 if ok else 1
        c.check(ok, f"the probabilistic envelope [{p0['envelope_lo']}, {p0['envelope_hi']}] at "
                    f"step 0 does not contain the randomized executions "
                    f"[{e0['envelope_lo']}, {e0['envelope_hi']}]")
    code, itv, text, secs = analyze(cli, files["reference"], files["correct"],
                                    os.path.join(folder, "interval.json"),
                                    ["--steps", "0", "--method", "interval"])
    result["interval_seconds"] = round(secs, 1)
    i0 = itv.get("steps", [{}])[0] if itv.get("steps") else None
    if i0:
        finite = all(math.isfinite(_num(i0[k])) for k in ("envelope_lo", "envelope_hi"))
        result["interval_finite"] = finite
        result["interval_rel_half_width"] = half_width(i0)
        c.check(code == (0 if finite else 4), f"interval at step 0: exit {code}\n{text}")
        if finite and e0:
            ok = contains(i0, e0)
            result["interval_escapes"] = 0 if ok else 1
            c.check(ok, f"soundness: the interval envelope [{i0['envelope_lo']}, "
                        f"{i0['envelope_hi']}] at step 0 does not contain the randomized "
                        f"executions [{e0['envelope_lo']}, {e0['envelope_hi']}]")
    else:
        c.check(False, f"interval at step 0: no result (exit {code})\n{text}")
    # The device-resident orchestration on the host's counting device (docs/gpu.md) gives the
    # CPU's envelope, self-check and verdict, value for value.
    code, dev, text, _ = analyze(cli, files["reference"], files["correct"],
                                 os.path.join(folder, "interval-host-device.json"),
                                 ["--steps", "0", "--method", "interval", "--backend",
                                  "host-device"])
    d0 = dev.get("steps", [{}])[0] if dev.get("steps") else None
    same = [k for k in ("envelope_lo", "envelope_hi", "self_lo", "self_hi", "verdict", "inside",
                        "self_check", "point_loss") if i0 and d0 and i0.get(k) == d0.get(k)]
    result["host_device_same"] = len(same) == 8
    c.check(len(same) == 8, f"interval at step 0 on --backend host-device differs from the CPU "
                            f"backend (exit {code}): {d0} vs {i0}\n{text}")
    result.pop("first_order_step0", None)
    return result


def main() -> int:
    global STEPS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", help="path of lossbound-cli")
    ap.add_argument("--only", nargs="*", choices=sorted(ARCHS),
                    help="architectures (default: the zoo, without the extra ones)")
    ap.add_argument("--extra", action="store_true",
                    help="run the extra torchvision architectures (not in ctest) instead")
    ap.add_argument("--work", help="record here (default: a temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the recordings")
    ap.add_argument("--ensemble", type=int, default=50,
                    help="randomized executions at step 0 (default 50)")
    ap.add_argument("--steps", type=int, default=STEPS,
                    help=f"training steps per run (default {STEPS}; CI's ctest runs 3)")
    ap.add_argument("--json", help="write the measurements to this file")
    ap.add_argument("--list", action="store_true", help="list the architectures and exit")
    ap.add_argument("--check-list", nargs="*", metavar="NAME",
                    help="exit 1 unless these are exactly the architectures (the ctest list)")
    args = ap.parse_args()
    if args.steps < 1:
        ap.error("--steps must be at least 1")
    STEPS = args.steps
    if args.list:
        for name, arch in ARCHS.items():
            print(f"{name}{' (extra)' if name in EXTRA else ''}: {arch.about}")
        return 0
    if args.check_list is not None:
        if sorted(args.check_list) != sorted(ZOO):
            print(f"tests/zoo/CMakeLists.txt lists {sorted(args.check_list)}, zoo.py has "
                  f"{sorted(ZOO)}")
            return 1
        return 0
    if not args.cli or not os.access(args.cli, os.X_OK):
        ap.error("--cli must name the lossbound-cli executable")
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    work = args.work or tempfile.mkdtemp(prefix="lossbound-zoo-")
    results, failures = {}, 0
    try:
        for name in args.only or list(EXTRA if args.extra else ZOO):
            folder = os.path.join(work, name)
            os.makedirs(folder, exist_ok=True)
            c = Checker(name)
            start = time.perf_counter()
            if ARCHS[name].torch2 and int(torch.__version__.split(".")[0]) < 2:
                # torch 1.13's functional_call does not reach nn.RNN's flat weights, and it has
                # no decomposition of the recurrent layers: not a Lossbound failure.
                print(f"{name}: skipped: needs PyTorch >= 2 (this is {torch.__version__}); run "
                      f"zoo.py with the venv of scripts/torch2-env.sh", flush=True)
                continue
            try:
                rec = record(name, folder)
            except Exception as e:  # a recording failure is a zoo failure, not a crash
                c.check(False, f"recording failed: {type(e).__name__}: {e}")
                failures += 1
                results[name] = {"architecture": name, "error": str(e)}
                continue
            r = check_arch(args.cli, name, folder, args.ensemble, c)
            r["record_seconds"] = round(sum(rec.values()), 1)
            r["torch_step_seconds"] = torch_step_seconds(name)
            r["total_seconds"] = round(time.perf_counter() - start, 1)
            r["failures"] = c.failures
            results[name] = r
            failures += bool(c.failures)
            print(f"{name}: {'ok' if not c.failures else 'FAILED'}; record {r['record_seconds']} s, "
                  f"correct exit {r.get('correct_exit')} ({r.get('correct_seconds')} s), buggy "
                  f"exit {r.get('buggy_exit')} first exit {r.get('buggy_first_exit')} "
                  f"({r.get('buggy_seconds')} s); step 0 rel. half-widths: first-order "
                  f"{r.get('correct_first_order_rel_half_width', math.nan):.2e}, probabilistic "
                  f"{r.get('probabilistic_rel_half_width', math.nan):.2e}, interval "
                  f"{r.get('interval_rel_half_width', math.nan):.2e}, ensemble({args.ensemble}) "
                  f"{r.get('ensemble_rel_half_width', math.nan):.2e}; buggy gap "
                  f"{r.get('buggy_reference_gap', math.nan):.2e}; total {r['total_seconds']} s",
                  flush=True)
    finally:
        if not args.keep and not args.work:
            shutil.rmtree(work, ignore_errors=True)
        elif args.keep or args.work:
            print(f"recordings kept in {work}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    print(f"zoo: {len(results) - failures} of {len(results)} architectures pass")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
