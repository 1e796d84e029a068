"""Checks the committed sample sessions in samples/ (made by samples/pytorch/make_samples.py).

The end-to-end property the C++ engine must also reach: re-executing every recorded step program
in binary64 at every checkpoint reproduces the run's logged loss to within 1e-5 relative.
"""

import glob
import hashlib
import os
import statistics
import unittest

import numpy as np
import torch

from lossbound_replay import RunFile, run_program

SOURCE_DIR = os.environ.get("LOSSBOUND_SOURCE_DIR") or \
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES_DIR = os.path.join(SOURCE_DIR, "samples")
GPT_SAMPLES = ["gradaccum-fixed", "gradaccum-hf-bug", "kernel-path"]
SAMPLES = GPT_SAMPLES + ["cnn-softmax-bug"]
STEPS = {"gradaccum-fixed": 50, "gradaccum-hf-bug": 50, "kernel-path": 50, "cnn-softmax-bug": 20}

torch.set_num_threads(1)


def sample_path(name, role):
    return os.path.join(SAMPLES_DIR, name, f"{role}.h5")


class SamplesTest(unittest.TestCase):
    def test_all_samples_present_and_small(self):
        total = 0
        for name in SAMPLES:
            for role in ("reference", "candidate"):
                path = sample_path(name, role)
                self.assertTrue(os.path.isfile(path), path)
                total += os.path.getsize(path)
        run_files = [p for p in glob.glob(os.path.join(SAMPLES_DIR, "*", "*.h5"))
                     if os.path.basename(p) in ("reference.h5", "candidate.h5")]
        self.assertEqual(total, sum(os.path.getsize(p) for p in run_files), "unexpected samples")
        self.assertLessEqual(total, 10 * 1000 * 1000, "committed samples must stay <= 10 MB")

    def test_layout_and_fp64_replay_reproduces_logged_loss(self):
        for name in SAMPLES:
            for role in ("reference", "candidate"):
                with self.subTest(sample=name, role=role), RunFile(sample_path(name, role)) as run:
                    a = run.attrs
                    self.assertEqual(a["format"], "lossbound-run")
                    self.assertEqual(a["format_version"], 1)
                    self.assertEqual(a["role"], role)
                    self.assertEqual(a["run_name"], f"{name}/{role}")
                    self.assertTrue(a["framework"].startswith("pytorch 1.13"))
                    log = run.log()
                    np.testing.assert_array_equal(log["step"], np.arange(STEPS[name]))
                    self.assertTrue(np.all(np.isfinite(log["loss"])))
                    self.assertEqual(run.checkpoint_steps(), list(range(STEPS[name])))
                    pids = run.program_ids()
                    self.assertEqual(len(pids), 1, "one shape, one program")
                    self.assertEqual(hashlib.sha256(run.graph_text(pids[0]).encode("utf-8"))
                                     .hexdigest()[:16], pids[0])
                    worst = 0.0
                    for step in run.checkpoint_steps():
                        out = run_program(run.program_at(step), run.inputs_at(step),
                                          compute_dtype=torch.float64, outputs=["loss"])
                        logged = run.logged_loss(step)
                        worst = max(worst, abs(float(out["loss"]) - logged) / abs(logged))
                    self.assertLess(worst, 1e-5)

    def test_pairs_share_inputs_batches_and_initial_weights(self):
        for name in SAMPLES:
            with self.subTest(sample=name), RunFile(sample_path(name, "reference")) as ref, \
                    RunFile(sample_path(name, "candidate")) as cand:
                self.assertEqual(ref.program_at(0)["inputs"], cand.program_at(0)["inputs"])
                for step in range(STEPS[name]):
                    rb, cb = ref.batch_at(step), cand.batch_at(step)
                    self.assertEqual(sorted(rb), sorted(cb))
                    for k in rb:
                        self.assertTrue(torch.equal(rb[k], cb[k]), f"step {step} batch {k}")
                    if name in GPT_SAMPLES:
                        labels = rb["labels"]
                        self.assertTrue(bool((labels == -100).any()), "padding present")
                rp, cp = ref.params_at(0), cand.params_at(0)
                for k in rp:
                    self.assertTrue(torch.equal(rp[k], cp[k]), f"initial {k}")

    def test_candidate_formula_gap_at_reference_weights(self):
        gaps = {}
        for name in SAMPLES:
            with RunFile(sample_path(name, "reference")) as ref, \
                    RunFile(sample_path(name, "candidate")) as cand:
                g = []
                for step in range(0, STEPS[name], 5):
                    inputs = ref.inputs_at(step)
                    r = float(run_program(ref.program_at(step), inputs, torch.float64,
                                          ["loss"])["loss"])
                    c = float(run_program(cand.program_at(step), inputs, torch.float64,
                                          ["loss"])["loss"])
                    g.append(abs(c - r) / abs(r))
                gaps[name] = g
        self.assertLess(max(gaps["gradaccum-fixed"]), 1e-12)
        self.assertLess(max(gaps["kernel-path"]), 1e-12)
        self.assertGreater(statistics.median(gaps["gradaccum-hf-bug"]), 1e-4)
        # softmax before cross_entropy: another function, visible from the first step
        self.assertGreater(min(gaps["cnn-softmax-bug"]), 1e-4)
        self.assertGreater(gaps["cnn-softmax-bug"][0], 1e-2)

    def test_cnn_sample_checkpoints_hold_the_buffers_before_the_step(self):
        # train-mode batch norm: the running statistics are inputs, and the checkpoint at step
        # t + 1 holds what step t wrote into them (checkpoints are taken before the step)
        with RunFile(sample_path("cnn-softmax-bug", "reference")) as ref:
            p0, p1 = ref.params_at(0), ref.params_at(1)
            self.assertEqual(int(p0["bn1.num_batches_tracked"]), 0)
            self.assertEqual(int(p1["bn1.num_batches_tracked"]), 1)
            self.assertTrue(torch.equal(p0["bn1.running_mean"], torch.zeros(8)))
            x = ref.batch_at(0)["x"]
            self.assertFalse(torch.equal(p1["bn1.running_mean"], p0["bn1.running_mean"]))
            self.assertEqual(tuple(x.shape), (8, 3, 12, 12))


if __name__ == "__main__":
    unittest.main()
