"""Tests of samples/pytorch/lossbound_recorder.py (run with Debian's /usr/bin/python3)."""

import hashlib
import json
import math
import os
import re
import tempfile
import unittest
import warnings

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
try:  # torch >= 2
    from torch.func import functional_call
except ImportError:  # torch 1.13
    from torch.nn.utils.stateless import functional_call

from lossbound_recorder import (FORMAT_VERSION, IR_VERSION, RandomOpError, RecorderError,
                                RunRecorder, UnsupportedGraphError, dataset_to_tensor,
                                trace_step_program, validate_program)
from lossbound_replay import RunFile, run_program

torch.set_num_threads(1)


class TinyNet(nn.Module):
    def __init__(self, dropout=0.0):
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.ln = nn.LayerNorm(8)
        self.fc = nn.Linear(8, 10)
        self.dropout = dropout

    def forward(self, ids):
        x = self.ln(self.emb(ids))
        if self.dropout:
            x = F.dropout(x, p=self.dropout, training=True)
        return self.fc(x)


def make_step(model):
    def step(params, batch):
        logits = functional_call(model, params, (batch["ids"],))
        labels = batch["labels"]
        loss = F.cross_entropy(logits.view(-1, 10), labels.reshape(-1), ignore_index=-100,
                               reduction="sum") / (labels != -100).sum()
        grads = torch.autograd.grad(loss, list(params.values()))
        return {"loss": loss, **{"grad:" + k: g for k, g in zip(params, grads)}}
    return step


def make_params(model):
    return {k: v.detach().clone().requires_grad_() for k, v in model.named_parameters()}


def make_batch(b=3, t=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 10, (b, t), generator=g)
    labels = torch.randint(0, 10, (b, t), generator=g)
    labels[0, -2:] = -100
    return {"ids": ids, "labels": labels}


class TempDirTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="lossbound-test-")
        self.tmp = self._tmp.name
        torch.manual_seed(0)

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name="run.h5"):
        return os.path.join(self.tmp, name)


class TracingTest(TempDirTest):
    def record(self, path, steps=3, batches=None):
        model = TinyNet()
        step_fn = make_step(model)
        params = make_params(model)
        batches = batches or [make_batch(seed=s) for s in range(steps)]
        losses = []
        with RunRecorder(path, run_name="tiny", role="reference", step_fn=step_fn,
                         notes="unit test") as rec:
            for s, batch in enumerate(batches):
                out = step_fn(params, batch)
                losses.append(out["loss"].item())
                rec.log(s, out["loss"].item(), lr=0.1)
                rec.checkpoint(s, params, batch)
                with torch.no_grad():
                    for k, p in params.items():
                        p -= 0.1 * out["grad:" + k]
        return losses

    def test_trace_tiny_step_fn(self):
        path = self.path()
        losses = self.record(path)
        self.assertFalse(os.path.exists(path + ".partial"))
        with h5py.File(path, "r") as f:
            a = f.attrs
            self.assertEqual(a["format"], "lossbound-run")
            self.assertEqual(a["format_version"], FORMAT_VERSION)
            self.assertEqual(a["format_version"].dtype, np.int64)
            self.assertEqual(a["run_name"], "tiny")
            self.assertEqual(a["role"], "reference")
            self.assertEqual(a["framework"], f"pytorch {torch.__version__}")
            self.assertEqual(a["device"], "cpu")
            self.assertEqual(a["notes"], "unit test")
            self.assertIn(a["float32_matmul_precision"], ("highest", "high", "medium"))
            self.assertRegex(a["created"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
            np.testing.assert_array_equal(f["log/step"][()], [0, 1, 2])
            self.assertEqual(f["log/step"].dtype, np.int64)
            self.assertEqual(f["log/loss"].dtype, np.float64)
            np.testing.assert_array_equal(f["log/loss"][()], losses)
            np.testing.assert_array_equal(f["log/lr"][()], [0.1] * 3)
            self.assertEqual(sorted(f["checkpoints"].keys()), ["0", "1", "2"])
            g = f["checkpoints/1"]
            self.assertEqual(g.attrs["step"], 1)
            self.assertEqual(sorted(g["params"].keys()),
                             ["emb.weight", "fc.bias", "fc.weight", "ln.bias", "ln.weight"])
            self.assertEqual(sorted(g["batch"].keys()), ["ids", "labels"])
            self.assertEqual(g["params/fc.weight"].compression, "gzip")
            self.assertTrue(g["params/fc.weight"].shuffle)
        with RunFile(path) as run:
            program = run.program_at(0)
            ops = {n["op"] for n in program["nodes"]}
            for op in ("aten.embedding.default", "aten.native_layer_norm.default",
                       "aten.addmm.default", "aten._log_softmax.default",
                       "aten.nll_loss_forward.default", "aten.nll_loss_backward.default",
                       "aten.native_layer_norm_backward.default",
                       "aten.embedding_dense_backward.default"):
                self.assertIn(op, ops)
            # the stored program re-executed on the stored inputs gives the logged losses
            for s in run.checkpoint_steps():
                out = run_program(run.program_at(s), run.inputs_at(s))
                self.assertAlmostEqual(float(out["loss"]), run.logged_loss(s), delta=1e-6)
                out64 = run_program(run.program_at(s), run.inputs_at(s), torch.float64)
                self.assertEqual(out64["loss"].dtype, torch.float64)
                self.assertLess(abs(float(out64["loss"]) / run.logged_loss(s) - 1), 1e-5)

    def test_dedup_same_shapes_one_program_new_shapes_second(self):
        path = self.path()
        batches = [make_batch(3, 5, 0), make_batch(3, 5, 1), make_batch(3, 5, 2),
                   make_batch(2, 7, 3), make_batch(3, 5, 4)]
        self.record(path, batches=batches)
        with h5py.File(path, "r") as f:
            pids = sorted(f["programs"].keys())
            self.assertEqual(len(pids), 2)
            at = {int(k): g.attrs["program"] for k, g in f["checkpoints"].items()}
            self.assertEqual(at[0], at[1])
            self.assertEqual(at[0], at[2])
            self.assertEqual(at[0], at[4])
            self.assertNotEqual(at[0], at[3])
            for pid in pids:
                g = f["programs"][pid]
                text = g["graph"][()].decode("utf-8")
                self.assertEqual(hashlib.sha256(text.encode("utf-8")).hexdigest()[:16], pid)
                self.assertTrue(re.fullmatch(r"[0-9a-f]{16}", pid))
                program = json.loads(text)
                self.assertEqual(g.attrs["ir_version"], IR_VERSION)
                self.assertEqual(json.loads(g.attrs["inputs"]),
                                 [i["name"] for i in program["inputs"]])
                self.assertEqual(json.loads(g.attrs["outputs"]),
                                 [o["name"] for o in program["outputs"]])
                self.assertEqual(g.attrs["op_count"], len(program["nodes"]))
            self.assertEqual(json.loads(f["programs"][at[3]]["graph"][()])["inputs"][-1],
                             {"name": "batch:labels", "shape": [2, 7], "dtype": "int64"})

    def test_identical_graph_traced_twice_is_stored_once(self):
        model = TinyNet()
        params, batch = make_params(model), make_batch()
        p1, _ = trace_step_program(make_step(model), params, batch)
        p2, _ = trace_step_program(make_step(TinyNet()), make_params(TinyNet()), make_batch(seed=5))
        self.assertEqual(json.dumps(p1), json.dumps(p2))

    def test_tracing_does_not_touch_the_callers_tensors(self):
        model = TinyNet()
        params, batch = make_params(model), make_batch()
        before = {k: v.detach().clone() for k, v in params.items()}
        trace_step_program(make_step(model), params, batch)
        for k, v in params.items():
            self.assertTrue(torch.equal(v, before[k]))
            self.assertIsNone(v.grad)

    def test_traced_loss_mismatch_warns(self):
        model = TinyNet()
        step_fn = make_step(model)
        params, batch = make_params(model), make_batch()
        with RunRecorder(self.path(), run_name="x", role="candidate", step_fn=step_fn) as rec:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                rec.log(0, 123.0)
                rec.checkpoint(0, params, batch)
            self.assertTrue(any("self-check" in str(w.message) for w in caught))


class DtypeTest(TempDirTest):
    def test_round_trips(self):
        g = torch.Generator().manual_seed(3)
        x = torch.randn(4, 5, generator=g)
        tensors = {
            "f32": x,
            "f64": x.double() / 3,
            "bf16": x.to(torch.bfloat16),
            "f16": x.to(torch.float16),
            "i64": torch.arange(-6, 6).view(3, 4) * 1_000_000_007,
            "i32": torch.arange(12, dtype=torch.int32),
            "u8": torch.arange(250, 256, dtype=torch.uint8),
            "bool": x > 0,
            "scalar": torch.tensor(2.5),
            "empty": torch.zeros(0, 3),
            "noncontig": x.t(),
        }
        params = {"w": torch.ones(2, requires_grad=True)}

        def step(p, b):
            return {"loss": (p["w"] * b["f32"].sum()).sum()}

        path = self.path()
        with RunRecorder(path, run_name="dt", role="reference", step_fn=step) as rec:
            rec.log(0, step(params, tensors)["loss"].item())
            rec.checkpoint(0, params, tensors)
        expected = {"f32": ("float32", np.float32), "f64": ("float64", np.float64),
                    "bf16": ("bfloat16", np.uint16), "f16": ("float16", np.float16),
                    "i64": ("int64", np.int64), "i32": ("int32", np.int32),
                    "u8": ("uint8", np.uint8), "bool": ("bool", np.uint8),
                    "scalar": ("float32", np.float32), "empty": ("float32", np.float32),
                    "noncontig": ("float32", np.float32)}
        with h5py.File(path, "r") as f:
            grp = f["checkpoints/0/batch"]
            for name, t in tensors.items():
                ds = grp[name]
                self.assertEqual(ds.attrs["dtype"], expected[name][0], name)
                self.assertEqual(ds.dtype, expected[name][1], name)
                self.assertEqual(ds.shape, tuple(t.shape), name)
                back = dataset_to_tensor(ds)
                self.assertEqual(back.dtype, t.dtype, name)
                self.assertEqual(back.shape, t.shape, name)
                self.assertTrue(torch.equal(back, t), name)
            # bf16 bits are the upper 16 bits of the fp32 value
            bits = grp["bf16"][()]
            f32_bits = tensors["bf16"].float().numpy().view(np.uint32)
            np.testing.assert_array_equal(bits, (f32_bits >> 16).astype(np.uint16))
            self.assertEqual(grp["scalar"].shape, ())
            self.assertEqual(f["checkpoints/0/params/w"].attrs["dtype"], "float32")

    def test_nan_and_inf_values_survive(self):
        t = torch.tensor([math.nan, math.inf, -math.inf, -0.0, 1e-45])
        for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
            with h5py.File(self.path(f"{dtype}.h5"), "w") as f:
                from lossbound_recorder import tensor_to_dataset
                tensor_to_dataset(f, "x", t.to(dtype))
                back = dataset_to_tensor(f["x"])
            src = t.to(dtype)
            self.assertTrue(torch.equal(back.isnan(), src.isnan()))
            self.assertTrue(torch.equal(back[1:], src[1:]))
            self.assertTrue(torch.equal(torch.signbit(back[1:]), torch.signbit(src[1:])))

    def test_unsupported_dtype_is_refused(self):
        step = lambda p, b: {"loss": p["w"].sum()}  # noqa: E731
        with RunRecorder(self.path(), run_name="x", role="r", step_fn=step) as rec:
            with self.assertRaisesRegex(RecorderError, "complex64"):
                rec.checkpoint(0, {"w": torch.ones(2)}, {"z": torch.ones(2, dtype=torch.cfloat)})


class RefusalTest(TempDirTest):
    def test_dropout_is_refused_with_the_op_named(self):
        model = TinyNet(dropout=0.1)
        step_fn = make_step(model)
        path = self.path()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with self.assertRaises(RandomOpError) as cm:
                with RunRecorder(path, run_name="d", role="candidate", step_fn=step_fn) as rec:
                    rec.checkpoint(0, make_params(model), make_batch())
        msg = str(cm.exception)
        self.assertRegex(msg, r"aten\.(native_dropout|bernoulli_?)\.\w+")
        self.assertIn("p=0", msg)
        self.assertIn("model.eval()", msg)
        self.assertFalse(os.path.exists(path), "no finished run file after a refusal")

    def test_dropout_zero_is_fine(self):
        model = TinyNet(dropout=0.0)
        trace_step_program(make_step(model), make_params(model), make_batch())

    def test_rand_in_step_fn_is_refused(self):
        def step(p, b):
            return {"loss": (p["w"] * torch.rand(3)).sum()}
        with self.assertRaisesRegex(RandomOpError, r"aten\.rand\.default"):
            trace_step_program(step, {"w": torch.ones(3, requires_grad=True)}, {})

    def test_randn_like_and_normal_are_refused(self):
        for fn in (lambda w: w + torch.randn_like(w), lambda w: w.clone().normal_(),
                   lambda w: torch.bernoulli(torch.sigmoid(w)), lambda w: w[torch.randperm(3)]):
            with self.assertRaises(RandomOpError):
                trace_step_program(lambda p, b: {"loss": fn(p["w"]).sum()},
                                   {"w": torch.ones(3)}, {})

    def test_existing_file_is_not_overwritten(self):
        path = self.path()
        with open(path, "wb") as f:
            f.write(b"precious")
        step = make_step(TinyNet())
        with self.assertRaisesRegex(FileExistsError, "overwrite=True"):
            RunRecorder(path, run_name="x", role="r", step_fn=step)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"precious")
        with RunRecorder(path, run_name="x", role="r", step_fn=step, overwrite=True) as rec:
            rec.log(0, 1.0)
        with h5py.File(path, "r") as f:
            self.assertEqual(f.attrs["format"], "lossbound-run")

    def test_tensor_constant_is_refused_naming_the_node(self):
        model = TinyNet()

        def step(p, b):  # calls the module directly: its parameters become constants
            return {"loss": model(b["ids"]).sum() * p["s"]}
        with self.assertRaisesRegex(UnsupportedGraphError,
                                    r"_(param|tensor)_constant\d*'.*functional_call"):
            trace_step_program(step, {"s": torch.ones(())}, make_batch())

    def test_unsupported_argument_names_the_node(self):
        def step(p, b):
            return {"loss": (p["w"] * (1 + 2j)).abs().sum()}
        with self.assertRaisesRegex(UnsupportedGraphError, r"node 'mul' \(aten\.mul\.Tensor\)"):
            trace_step_program(step, {"w": torch.ones(3)}, {})

    def test_bad_step_fn_results(self):
        w = {"w": torch.ones(3, requires_grad=True)}
        with self.assertRaisesRegex(RecorderError, "'loss'"):
            trace_step_program(lambda p, b: {"l": p["w"].sum()}, w, {})
        with self.assertRaisesRegex(RecorderError, "dict"):
            trace_step_program(lambda p, b: p["w"].sum(), w, {})
        with self.assertRaisesRegex(ValueError, "0-d floating"):
            trace_step_program(lambda p, b: {"loss": p["w"] * 2}, w, {})

    def test_log_steps_strictly_increasing_and_metrics(self):
        path = self.path()
        with RunRecorder(path, run_name="x", role="r", step_fn=make_step(TinyNet())) as rec:
            rec.log(0, 1.0)
            rec.log(2, torch.tensor(0.5), lr=0.1)
            with self.assertRaisesRegex(RecorderError, "strictly increasing"):
                rec.log(2, 0.4)
            rec.log(5, 0.25, grad_norm=3.0)
        with h5py.File(path, "r") as f:
            np.testing.assert_array_equal(f["log/step"][()], [0, 2, 5])
            np.testing.assert_array_equal(f["log/loss"][()], [1.0, 0.5, 0.25])
            np.testing.assert_array_equal(f["log/lr"][()], [np.nan, 0.1, np.nan])
            np.testing.assert_array_equal(f["log/grad_norm"][()], [np.nan, np.nan, 3.0])

    def test_exception_leaves_only_a_partial_file(self):
        path = self.path()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with self.assertRaises(KeyError):
                with RunRecorder(path, run_name="x", role="r", step_fn=make_step(TinyNet())) as rec:
                    rec.log(0, 1.0)
                    raise KeyError("boom")
        self.assertFalse(os.path.exists(path))
        self.assertTrue(os.path.exists(path + ".partial"))


class SchemaTest(TempDirTest):
    """The IR JSON follows docs/run-file-format.md."""

    def setUp(self):
        super().setUp()
        model = TinyNet()

        def step(params, batch):
            out = make_step(model)(params, batch)
            logits = functional_call(model, params, (batch["ids"],))
            masked = logits.masked_fill(batch["ids"].unsqueeze(-1) == 0, float("-inf"))
            out["aux"] = masked.to(torch.float64).amax()
            return out
        self.program, _ = trace_step_program(step, make_params(model), make_batch())

    def test_top_level(self):
        p = self.program
        self.assertEqual(list(p), ["format", "ir_version", "torch_version", "inputs", "constants",
                                   "nodes", "outputs"])
        self.assertEqual(p["format"], "lossbound-step-program")
        self.assertEqual(p["ir_version"], 2)
        self.assertEqual(p["constants"], [])
        self.assertEqual(p["torch_version"], torch.__version__)
        validate_program(json.loads(json.dumps(p)))

    def test_inputs_named_param_and_batch(self):
        names = [i["name"] for i in self.program["inputs"]]
        self.assertEqual(names, ["param:emb.weight", "param:ln.weight", "param:ln.bias",
                                 "param:fc.weight", "param:fc.bias", "batch:ids",
                                 "batch:labels"])
        self.assertEqual(self.program["inputs"][0],
                         {"name": "param:emb.weight", "shape": [10, 8], "dtype": "float32"})

    def test_nodes(self):
        names = set(i["name"] for i in self.program["inputs"])
        for n in self.program["nodes"]:
            self.assertEqual(list(n), ["name", "op", "args", "kwargs", "outputs"])
            self.assertRegex(n["op"], r"^aten\.\w+\.\w+$")
            self.assertNotIn("getitem", n["op"])
            self.assertNotIn(n["name"], names)
            for ref in _refs(n["args"]) + _refs(list(n["kwargs"].values())):
                self.assertIn(ref["ref"], names, f"{n['name']} uses a later value")
            names.add(n["name"])
            for o in n["outputs"]:
                self.assertEqual(set(o), {"shape", "dtype"})
        ln = next(n for n in self.program["nodes"] if n["op"] == "aten.native_layer_norm.default")
        self.assertEqual(len(ln["outputs"]), 3)
        self.assertEqual(ln["args"][1], [8])
        self.assertEqual(ln["args"][4], 1e-05)
        users = [r for n in self.program["nodes"] for r in _refs(n["args"])
                 if r["ref"] == ln["name"]]
        self.assertEqual({r.get("index") for r in users}, {0, 1, 2})  # getitem folded
        fill = next(n for n in self.program["nodes"] if n["op"] == "aten.masked_fill.Scalar")
        self.assertEqual(fill["args"][2], {"float": "-inf"})
        cast = next(n for n in self.program["nodes"] if n["op"] == "aten._to_copy.default")
        self.assertEqual(cast["kwargs"]["dtype"], {"dtype": "float64"})
        self.assertEqual(cast["outputs"][0]["dtype"], "float64")

    def test_outputs(self):
        outs = self.program["outputs"]
        self.assertEqual(outs[0]["name"], "loss")
        self.assertEqual([o["name"] for o in outs[1:-1]],
                         ["grad:emb.weight", "grad:ln.weight", "grad:ln.bias", "grad:fc.weight",
                          "grad:fc.bias"])
        self.assertEqual(outs[-1]["name"], "aux")
        for o in outs:
            self.assertEqual(set(o), {"name", "ref"})
            self.assertIn("ref", o["ref"])

    def test_validator_rejects_bad_programs(self):
        def broken(fn):
            p = json.loads(json.dumps(self.program))
            fn(p)
            return p
        cases = {
            "dangling": lambda p: p["nodes"][0]["args"].__setitem__(0, {"ref": "nope"}),
            "later": lambda p: p["nodes"][0]["args"].__setitem__(
                0, {"ref": p["nodes"][-1]["name"]}),
            "index": lambda p: p["nodes"][-1]["args"].__setitem__(0, {"ref": p["nodes"][0]["name"],
                                                                     "index": 7}),
            "nan": lambda p: p["nodes"][0]["args"].append(float("nan")),
            "op": lambda p: p["nodes"][0].__setitem__("op", "torch.add"),
            "version": lambda p: p.__setitem__("ir_version", 3),
            "version-float": lambda p: p.__setitem__("ir_version", 2.0),
            "no-constants": lambda p: p.pop("constants"),
            "loss": lambda p: p["outputs"].pop(0),
            "dtype": lambda p: p["inputs"][0].__setitem__("dtype", "float8"),
            "input": lambda p: p["inputs"][0].__setitem__("name", "wte"),
            "tag": lambda p: p["nodes"][0]["args"].append({"complex": "1j"}),
        }
        for name, fn in cases.items():
            with self.assertRaises(ValueError, msg=name):
                validate_program(broken(fn))


def _refs(values):
    out = []
    for v in values:
        if isinstance(v, dict) and "ref" in v:
            out.append(v)
        elif isinstance(v, list):
            out += _refs(v)
    return out


if __name__ == "__main__":
    unittest.main()
