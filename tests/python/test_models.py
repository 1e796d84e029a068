"""Records one step of models from samples/pytorch/op_survey.py and replays them from the file.

Small models only (the full survey, resnet18 and friends included, is op_survey.py itself). On
torch 2.x with transformers installed, tiny Hugging Face models are recorded too, with their
default (SDPA) attention: the program must hold no fused attention op.
"""

import unittest

import torch

import op_survey

torch.set_num_threads(1)

MODELS = ["conv1d_groupnorm", "llama_block", "transformer_encoder"]
HF_MODELS = ["hf_gpt2_default", "hf_llama_default", "hf_bert_eager"]


def transformers_available():
    try:
        import transformers
        return bool(transformers.__version__)
    except ImportError:
        return False


class ModelTest(unittest.TestCase):
    def check(self, name, autocast=False):
        r = op_survey.survey(name, autocast)
        self.assertEqual(r["warnings"] if not r["data_dependent"] else [w for w in r["warnings"]
                         if "self-check" in w], [])
        self.assertLess(r["replay_rel_error"], 1e-3 if autocast else 1e-6)
        self.assertLess(r["replay64_rel_error"], 1e-1 if autocast else 1e-5)
        fused = [op for op in r["ops"] if "scaled_dot_product" in op or "_safe_softmax" in op
                 or "_native_multi_head" in op or "_transformer_encoder" in op]
        self.assertEqual(fused, [])
        for op in r["ops"]:
            self.assertNotRegex(op, r"_\.")  # no in-place op: the trace is functionalized
        return r

    def test_small_models_record_and_replay(self):
        for name in MODELS:
            with self.subTest(model=name):
                self.check(name)

    def test_llama_block_under_bf16_autocast(self):
        r = self.check("llama_block", autocast=True)
        self.assertIn("aten._to_copy.default", r["ops"])

    def test_complex_rotary_records_as_real_pairs(self):
        # Meta's rotary embedding: a complex64 constant (torch.polar) times view_as_complex(q).
        r = self.check("meta_rotary_block")
        self.assertEqual([op for op in r["ops"] if "complex" in op or "real" in op
                          or "polar" in op or "conj" in op], [])
        self.assertIn("aten.stack.default", r["ops"])
        pairs = [c for c in r["constants"] if c[0].endswith("_real_pairs")]
        self.assertEqual([(shape, dtype) for _, shape, dtype in pairs], [([12, 4, 2], "float32")])

    @unittest.skipUnless(op_survey.TORCH2, "nn.LSTM and nn.GRU record on torch 2.x only")
    def test_recurrent_layers_record_as_linear_layers_and_gates(self):
        for name in ("lstm", "gru"):
            with self.subTest(model=name):
                r = self.check(name)
                # No fused recurrent kernel (oneDNN's mkldnn_rnn_layer, _thnn_fused_lstm_cell):
                # the layers' matrix products and gate activations, each a rule of its own.
                self.assertEqual([op for op in r["ops"] if "rnn" in op or "lstm" in op
                                  or "gru" in op], [])
                self.assertIn("aten.sigmoid.default", r["ops"])
                self.assertIn("aten.tanh.default", r["ops"])

    @unittest.skipUnless(op_survey.TORCH2 and transformers_available(),
                         "Hugging Face transformers needs torch 2.x (the torch2 venv)")
    def test_tiny_hugging_face_models(self):
        for name in HF_MODELS:
            with self.subTest(model=name):
                r = self.check(name)
                self.assertIn("aten.bmm.default", r["ops"])


if __name__ == "__main__":
    unittest.main()
