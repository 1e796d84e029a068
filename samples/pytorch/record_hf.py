#!/usr/bin/env python3
"""Records a Hugging Face transformers model with and without the gradient-accumulation loss bug.

    PY=$(scripts/torch2-env.sh | tail -n 1)      # torch 2.x + transformers (see the README)
    $PY samples/pytorch/record_hf.py --out /tmp/hf-gpt2 [--model gpt2|llama|bert|...] [--steps 10]
        [--style buggy|fixed|both] [--attn sdpa|eager]
    build/app/lossbound-cli analyze --reference /tmp/hf-gpt2/reference.h5 \\
        --candidate /tmp/hf-gpt2/candidate-buggy.h5

Writes, in --out:
  reference.h5        the whole batch (8 sequences) in one forward pass, the model's own token mean
  candidate-buggy.h5  4 micro-batches of 2 sequences, each micro-batch's mean token loss divided
                      by 4, gradients accumulated: the average of per-micro-batch means, the bug
                      transformers fixed in 4.46 (October 2024)
  candidate-fixed.h5  the same 4 micro-batches, each micro-batch's summed token loss divided by
                      num_items_in_batch (the token count of the whole batch): the fix

The model (GPT2LMHeadModel, LlamaForCausalLM, BertForMaskedLM, or a causal LM, masked LM or
encoder-decoder of another family: MORE below) is built from a tiny config
with random weights (nothing is downloaded) and runs in eval mode (dropout off). The sequences
have random lengths and are right-padded (labels -100, attention_mask 0), so the micro-batches
hold unequal token counts from step 0; the masked LMs mask 25% of the real tokens of each sequence (at
least one); the encoder-decoders (T5, BART and their kin: SEQ2SEQ) read the sequence and predict
the next 2 to 16 tokens, their decoder reading the labels shifted right as their
forward(labels=...) does, the loss over every label. Each run trains with AdamW for --steps
steps from the same initial weights on the same batches and records a checkpoint and the logged
loss at every step.

The step function is what the training loop calls and what the recorder traces: the parameters
go through torch.func.functional_call, the loss is the model's loss_function (ForCausalLMLoss or
ForMaskedLMLoss, the latter for the encoder-decoders too: a token mean, or a token sum divided by
num_items_in_batch when it is given, exactly what a causal LM's forward(labels=...,
num_items_in_batch=...) computes), the gradients come from torch.autograd.grad (a parameter the
step does not reach gets none, and the optimizer skips it). Deterministic: fixed seeds, CPU, one
thread.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Callable, Dict, List

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from lossbound_recorder import RunRecorder  # noqa: E402

from torch.func import functional_call  # noqa: E402  (torch >= 2)

Batch = Dict[str, torch.Tensor]

VOCAB = 64
CONTEXT = 16  # padded sequence length
BATCH = 8  # sequences per step
MICRO = 4  # micro-batches of the candidates (BATCH // MICRO sequences each)
LR = 3e-3
IGNORE = -100
INIT_SEED = 0
DATA_SEED = 1
MODELS = ("gpt2", "llama", "bert")
# More families, each a tiny config of its own transformers classes (causal LMs unless masked):
# tried with lossbound-cli on transformers 5 and PyTorch 2.x (README); not in the Hugging Face
# stage of ctest, which runs MODELS.
# The common config arguments (build_model) that the encoder-decoders name otherwise.
_NO_LM_SIZES = {"hidden_size": None, "intermediate_size": None, "num_hidden_layers": None,
                "num_attention_heads": None, "num_key_value_heads": None,
                "max_position_embeddings": None}


def _bart_sizes(**extra) -> dict:
    """Tiny sizes of BART and the families that share its config names."""
    return {**_NO_LM_SIZES, "d_model": 32, "encoder_layers": 2, "decoder_layers": 2,
            "encoder_attention_heads": 4, "decoder_attention_heads": 4, "encoder_ffn_dim": 64,
            "decoder_ffn_dim": 64, "max_position_embeddings": CONTEXT, "pad_token_id": 1,
            "bos_token_id": 0, "eos_token_id": 2, "decoder_start_token_id": 2, **extra}


def _t5_sizes(**extra) -> dict:
    """Tiny sizes of T5 and the families that share its config names."""
    return {**_NO_LM_SIZES, "d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 2,
            "num_heads": 4, "relative_attention_num_buckets": 8,
            "relative_attention_max_distance": CONTEXT, "decoder_start_token_id": 0,
            "pad_token_id": 0, "eos_token_id": 1, **extra}


MORE: Dict[str, tuple] = {
    # name: (config class, model class, config arguments beyond the common ones)
    "mistral": ("MistralConfig", "MistralForCausalLM", {"sliding_window": 8}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 8}),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {"pad_token_id": 0}),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {"head_dim": 8, "sliding_window": 8}),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", {"head_dim": 8, "sliding_window": 8}),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", {"pad_token_id": 0}),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", {"num_key_value_heads": None}),
    "opt": ("OPTConfig", "OPTForCausalLM", {"ffn_dim": 64, "word_embed_proj_dim": 32,
                                            "intermediate_size": None,
                                            "num_key_value_heads": None}),
    "falcon": ("FalconConfig", "FalconForCausalLM", {"intermediate_size": None,
                                                     "num_key_value_heads": None,
                                                     "max_position_embeddings": None}),
    "gpt_bigcode": ("GPTBigCodeConfig", "GPTBigCodeForCausalLM",
                    {"n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": CONTEXT,
                     "hidden_size": None, "num_hidden_layers": None,
                     "num_attention_heads": None, "intermediate_size": None,
                     "num_key_value_heads": None, "max_position_embeddings": None}),
    "distilbert": ("DistilBertConfig", "DistilBertForMaskedLM",
                   {"dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 64, "pad_token_id": 0,
                    "hidden_size": None, "num_hidden_layers": None, "num_attention_heads": None,
                    "intermediate_size": None, "num_key_value_heads": None}),
    "roberta": ("RobertaConfig", "RobertaForMaskedLM",
                {"max_position_embeddings": CONTEXT + 2, "pad_token_id": 1,
                 "num_attention_heads": 2, "num_key_value_heads": None}),
    "stablelm": ("StableLmConfig", "StableLmForCausalLM", {"partial_rotary_factor": 0.5}),
    "starcoder2": ("Starcoder2Config", "Starcoder2ForCausalLM", {"sliding_window": 8}),
    "granite": ("GraniteConfig", "GraniteForCausalLM",
                {"embedding_multiplier": 2.0, "residual_multiplier": 0.5,
                 "attention_multiplier": 0.25, "logits_scaling": 2.0}),
    "cohere": ("CohereConfig", "CohereForCausalLM", {"logit_scale": 0.5}),
    "phi": ("PhiConfig", "PhiForCausalLM", {"partial_rotary_factor": 0.5}),
    "bloom": ("BloomConfig", "BloomForCausalLM",
              {"n_layer": 2, "n_head": 4, "num_hidden_layers": None,
               "num_attention_heads": None, "intermediate_size": None,
               "num_key_value_heads": None, "max_position_embeddings": None}),
    "gptj": ("GPTJConfig", "GPTJForCausalLM",
             {"n_embd": 32, "n_layer": 2, "n_head": 4, "rotary_dim": 4, "n_positions": CONTEXT,
              "hidden_size": None, "num_hidden_layers": None, "num_attention_heads": None,
              "intermediate_size": None, "num_key_value_heads": None,
              "max_position_embeddings": None}),
    "electra": ("ElectraConfig", "ElectraForMaskedLM",
                {"embedding_size": 16, "num_key_value_heads": None}),
    "albert": ("AlbertConfig", "AlbertForMaskedLM",
               {"embedding_size": 16, "num_key_value_heads": None}),
    # Mixtures of experts: top-k routing, sort, histc and grouped products (transformers' default
    # grouped_mm experts).
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                {"num_local_experts": 4, "num_experts_per_tok": 2}),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                  {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                   "shared_expert_intermediate_size": 32}),
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM", {"num_experts": 4, "num_experts_per_tok": 2}),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                   "head_dim": 8}),
    "granitemoe": ("GraniteMoeConfig", "GraniteMoeForCausalLM",
                   {"num_local_experts": 4, "num_experts_per_tok": 2}),
    "phimoe": ("PhimoeConfig", "PhimoeForCausalLM",
               {"num_local_experts": 4, "num_experts_per_tok": 2}),
    "jetmoe": ("JetMoeConfig", "JetMoeForCausalLM",
               {"num_local_experts": 4, "num_experts_per_tok": 2, "kv_channels": 8}),
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM",
                {"num_local_experts": 4, "num_experts_per_tok": 2, "head_dim": 8,
                 "sliding_window": 8}),
    "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM",
                    {"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                     "n_group": 2, "topk_group": 1, "first_k_dense_replace": 1,
                     "n_shared_experts": 1, "kv_lora_rank": 16, "q_lora_rank": 16,
                     "qk_rope_head_dim": 4, "qk_nope_head_dim": 4, "v_head_dim": 8}),
    # Tried on 2026-11-29 with one step each (README): no new rule needed.
    "olmo": ("OlmoConfig", "OlmoForCausalLM", {}),
    "olmo3": ("Olmo3Config", "Olmo3ForCausalLM", {}),
    "apertus": ("ApertusConfig", "ApertusForCausalLM", {}),
    "arcee": ("ArceeConfig", "ArceeForCausalLM", {}),
    "cohere2": ("Cohere2Config", "Cohere2ForCausalLM", {"sliding_window": 8}),
    "helium": ("HeliumConfig", "HeliumForCausalLM", {"head_dim": 8}),
    "glm4": ("Glm4Config", "Glm4ForCausalLM", {"head_dim": 8, "pad_token_id": 0}),
    "seed_oss": ("SeedOssConfig", "SeedOssForCausalLM", {"head_dim": 8}),
    "vaultgemma": ("VaultGemmaConfig", "VaultGemmaForCausalLM",
                   {"head_dim": 8, "sliding_window": 8}),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {"head_dim": 8}),
    "ministral": ("MinistralConfig", "MinistralForCausalLM", {"head_dim": 8, "sliding_window": 8}),
    "diffllama": ("DiffLlamaConfig", "DiffLlamaForCausalLM", {}),
    "doge": ("DogeConfig", "DogeForCausalLM", {}),
    "hunyuan_dense": ("HunYuanDenseV1Config", "HunYuanDenseV1ForCausalLM", {"head_dim": 8}),
    "granitemoehybrid": ("GraniteMoeHybridConfig", "GraniteMoeHybridForCausalLM",
                         {"num_local_experts": 4, "num_experts_per_tok": 2, "mamba_d_state": 4,
                          "mamba_n_heads": 4, "mamba_d_head": 16, "mamba_n_groups": 1,
                          "mamba_chunk_size": 8, "layer_types": ["mamba", "attention"]}),
    "glm4_moe": ("Glm4MoeConfig", "Glm4MoeForCausalLM",
                 {"head_dim": 8, "pad_token_id": 0, "n_routed_experts": 4,
                  "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                  "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1}),
    "hunyuan_moe": ("HunYuanMoEV1Config", "HunYuanMoEV1ForCausalLM",
                    {"head_dim": 8, "num_experts": 4, "moe_topk": 2}),
    "dots1": ("Dots1Config", "Dots1ForCausalLM",
              {"head_dim": 8, "n_routed_experts": 4, "num_experts_per_tok": 2,
               "moe_intermediate_size": 32, "first_k_dense_replace": 1, "n_shared_experts": 1}),
    "nemotron_h": ("NemotronHConfig", "NemotronHForCausalLM",
                   {"head_dim": 8, "mamba_num_heads": 4, "mamba_head_dim": 16, "ssm_state_size": 4,
                    "n_groups": 1, "chunk_size": 8, "hybrid_override_pattern": "M*"}),
    # Rotary embeddings in complex numbers (torch.polar, view_as_complex): the recorder rewrites
    # them as real pairs (lossbound_complex.py). Llama 4 with experts on every other layer.
    "llama4": ("Llama4TextConfig", "Llama4ForCausalLM",
               {"head_dim": 8, "intermediate_size_mlp": 64, "num_local_experts": 4,
                "num_experts_per_tok": 1, "interleave_moe_layer_step": 2,
                "attention_chunk_size": 8, "no_rope_layer_interval": 2}),
    "deepseek_v2": ("DeepseekV2Config", "DeepseekV2ForCausalLM",
                    {"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                     "first_k_dense_replace": 1, "n_shared_experts": 1, "kv_lora_rank": 16,
                     "q_lora_rank": 16, "qk_rope_head_dim": 4, "qk_nope_head_dim": 4,
                     "v_head_dim": 8}),
    # Gated delta rule (linear attention solved chunk by chunk: linalg_solve_triangular) beside
    # full attention, with experts.
    "qwen3_next": ("Qwen3NextConfig", "Qwen3NextForCausalLM",
                   {"head_dim": 8, "num_experts": 4, "num_experts_per_tok": 2,
                    "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32,
                    "linear_num_value_heads": 4, "linear_num_key_heads": 2,
                    "linear_key_head_dim": 8, "linear_value_head_dim": 8,
                    "linear_conv_kernel_dim": 4,
                    "layer_types": ["linear_attention", "full_attention"]}),
    "qwen3_5": ("Qwen3_5TextConfig", "Qwen3_5ForCausalLM",
                {"head_dim": 8, "linear_num_value_heads": 4, "linear_num_key_heads": 2,
                 "linear_key_head_dim": 8, "linear_value_head_dim": 8,
                 "linear_conv_kernel_dim": 4,
                 "layer_types": ["linear_attention", "full_attention"]}),
    "kimi_linear": ("KimiLinearConfig", "KimiLinearForCausalLM",
                    {"linear_head_dim": 8, "linear_num_heads": 4, "linear_conv_kernel_dim": 4,
                     "num_local_experts": 4, "num_experts_per_tok": 2,
                     "moe_intermediate_size": 32, "kv_lora_rank": 16, "q_lora_rank": 16,
                     "qk_rope_head_dim": 4, "qk_nope_head_dim": 4, "v_head_dim": 8,
                     "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
                     "layer_types": ["linear_attention", "full_attention"]}),
    # A state-space model (no attention) and a sinusoidal-position decoder.
    "mamba": ("MambaConfig", "MambaForCausalLM",
              {"state_size": 4, "num_attention_heads": None, "num_key_value_heads": None,
               "intermediate_size": None, "max_position_embeddings": None}),
    "xglm": ("XGLMConfig", "XGLMForCausalLM",
             {"d_model": 32, "num_layers": 2, "ffn_dim": 64, "hidden_size": None,
              "num_hidden_layers": None, "intermediate_size": None, "num_key_value_heads": None}),
    # Older and smaller decoders (eager attention where transformers has no SDPA for them).
    "gpt_neo": ("GPTNeoConfig", "GPTNeoForCausalLM",
                {"num_layers": 2, "num_heads": 4, "attention_types": [[["global", "local"], 1]],
                 "window_size": 8, "num_hidden_layers": None, "num_attention_heads": None,
                 "num_key_value_heads": None}),
    "codegen": ("CodeGenConfig", "CodeGenForCausalLM",
                {"n_embd": 32, "n_layer": 2, "n_head": 4, "rotary_dim": 4, "n_positions": CONTEXT,
                 "n_ctx": CONTEXT, "hidden_size": None, "num_hidden_layers": None,
                 "num_attention_heads": None, "intermediate_size": None,
                 "num_key_value_heads": None, "max_position_embeddings": None}),
    "mpt": ("MptConfig", "MptForCausalLM",
            {"d_model": 32, "n_heads": 4, "n_layers": 2, "expansion_ratio": 2,
             "max_seq_len": CONTEXT, "hidden_size": None, "num_hidden_layers": None,
             "num_attention_heads": None, "intermediate_size": None, "num_key_value_heads": None,
             "max_position_embeddings": None}),
    "biogpt": ("BioGptConfig", "BioGptForCausalLM", {"num_key_value_heads": None}),
    "persimmon": ("PersimmonConfig", "PersimmonForCausalLM",
                  {"num_key_value_heads": None, "qk_layernorm": True}),
    "nemotron": ("NemotronConfig", "NemotronForCausalLM",
                 {"head_dim": 8, "partial_rotary_factor": 0.5}),
    "glm": ("GlmConfig", "GlmForCausalLM", {"head_dim": 8, "pad_token_id": 0}),
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", {"pad_token_id": 0}),
    "ernie4_5": ("Ernie4_5Config", "Ernie4_5ForCausalLM", {"head_dim": 8}),
    "exaone4": ("Exaone4Config", "Exaone4ForCausalLM", {"head_dim": 8, "sliding_window": 8}),
    "bitnet": ("BitNetConfig", "BitNetForCausalLM", {}),
    # Convolution, state-space and linear-recurrence layers, alone or with attention and experts.
    "lfm2": ("Lfm2Config", "Lfm2ForCausalLM", {"layer_types": ["conv", "full_attention"]}),
    "mamba2": ("Mamba2Config", "Mamba2ForCausalLM",
               {"num_heads": 4, "head_dim": 16, "state_size": 4, "n_groups": 1, "expand": 2,
                "chunk_size": 8, "num_attention_heads": None, "num_key_value_heads": None,
                "intermediate_size": None, "max_position_embeddings": None}),
    "falcon_mamba": ("FalconMambaConfig", "FalconMambaForCausalLM",
                     {"state_size": 4, "num_attention_heads": None, "num_key_value_heads": None,
                      "intermediate_size": None, "max_position_embeddings": None}),
    "recurrent_gemma": ("RecurrentGemmaConfig", "RecurrentGemmaForCausalLM",
                        {"lru_width": 32, "num_hidden_layers": 3, "num_key_value_heads": 1,
                         "attention_window_size": 8, "conv1d_width": 4, "head_dim": 8,
                         "block_types": ["recurrent", "recurrent", "attention"],
                         "max_position_embeddings": None}),
    "jamba": ("JambaConfig", "JambaForCausalLM",
              {"num_experts": 4, "num_experts_per_tok": 2, "attn_layer_period": 2,
               "attn_layer_offset": 1, "expert_layer_period": 2, "expert_layer_offset": 1,
               "mamba_d_state": 4, "mamba_dt_rank": 4, "use_mamba_kernels": False,
               "max_position_embeddings": None}),
    "bamba": ("BambaConfig", "BambaForCausalLM",
              {"mamba_d_state": 4, "mamba_n_heads": 4, "mamba_d_head": 16, "mamba_n_groups": 1,
               "mamba_chunk_size": 8, "attn_layer_indices": [1]}),
    "zamba2": ("Zamba2Config", "Zamba2ForCausalLM",
               {"mamba_d_state": 4, "mamba_headdim": 16, "n_mamba_heads": 4,
                "attention_head_dim": 8, "use_mem_rope": True,
                "layers_block_type": ["mamba", "hybrid"], "hybrid_layer_ids": [1],
                "use_shared_attention_adapter": False}),
    # Masked LMs with their own position schemes, and two early causal LMs.
    "deberta_v2": ("DebertaV2Config", "DebertaV2ForMaskedLM",
                   {"relative_attention": True, "position_buckets": 8,
                    "pos_att_type": ["p2c", "c2p"], "max_relative_positions": CONTEXT,
                    "num_key_value_heads": None}),
    "mpnet": ("MPNetConfig", "MPNetForMaskedLM",
              {"max_position_embeddings": CONTEXT + 2, "pad_token_id": 1,
               "num_key_value_heads": None}),
    "roformer": ("RoFormerConfig", "RoFormerForMaskedLM", {"num_key_value_heads": None}),
    "mobilebert": ("MobileBertConfig", "MobileBertForMaskedLM",
                   {"embedding_size": 16, "intra_bottleneck_size": 16, "true_hidden_size": 16,
                    "num_feedforward_networks": 2, "num_key_value_heads": None}),
    "convbert": ("ConvBertConfig", "ConvBertForMaskedLM",
                 {"embedding_size": 32, "head_ratio": 2, "conv_kernel_size": 3,
                  "num_key_value_heads": None}),
    "openai_gpt": ("OpenAIGPTConfig", "OpenAIGPTLMHeadModel",
                   {"n_embd": 32, "n_layer": 2, "n_head": 2, "n_positions": CONTEXT}),
    "ctrl": ("CTRLConfig", "CTRLLMHeadModel",
             {"n_embd": 32, "dff": 64, "n_layer": 2, "n_head": 2, "n_positions": CONTEXT}),
    # Tried on 2026-11-30 (README: "More families"): sliding and global attention, lightning
    # (linear) attention, short convolutions, experts with shared experts and sigmoid routers.
    "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM",
                    {"head_dim": 8, "sliding_window": 8,
                     "layer_types": ["sliding_attention", "full_attention"]}),
    "minimax": ("MiniMaxConfig", "MiniMaxForCausalLM",
                {"head_dim": 8, "num_local_experts": 4, "num_experts_per_tok": 2,
                 "layer_types": ["linear_attention", "full_attention"], "block_size": 4}),
    "lfm2_moe": ("Lfm2MoeConfig", "Lfm2MoeForCausalLM",
                 {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                  "num_dense_layers": 1, "layer_types": ["conv", "full_attention"]}),
    "ernie4_5_moe": ("Ernie4_5_MoeConfig", "Ernie4_5_MoeForCausalLM",
                     {"head_dim": 8, "moe_num_experts": 4, "moe_k": 2,
                      "moe_intermediate_size": 32, "moe_layer_start_index": 1,
                      "moe_num_shared_experts": 1}),
    "granitemoeshared": ("GraniteMoeSharedConfig", "GraniteMoeSharedForCausalLM",
                         {"num_local_experts": 4, "num_experts_per_tok": 2,
                          "shared_intermediate_size": 32}),
    "hunyuan_v1_dense": ("HunYuanDenseV1Config", "HunYuanDenseV1ForCausalLM", {"head_dim": 8}),
    "exaone_moe": ("ExaoneMoeConfig", "ExaoneMoeForCausalLM",
                   {"head_dim": 8, "num_experts": 4, "num_experts_per_tok": 2,
                    "moe_intermediate_size": 32}),
    "nanochat": ("NanoChatConfig", "NanoChatForCausalLM", {}),
    "cohere2_moe": ("Cohere2MoeConfig", "Cohere2MoeForCausalLM",
                    {"num_experts": 4, "num_experts_per_tok": 2}),
    "ministral3": ("Ministral3Config", "Ministral3ForCausalLM", {"head_dim": 8}),
    "afmoe": ("AfmoeConfig", "AfmoeForCausalLM",
              {"head_dim": 8, "num_experts": 4, "num_experts_per_tok": 2,
               "moe_intermediate_size": 32, "num_dense_layers": 1, "num_shared_experts": 1}),
    "minimax_m2": ("MiniMaxM2Config", "MiniMaxM2ForCausalLM",
                   {"head_dim": 8, "num_local_experts": 4, "num_experts_per_tok": 2}),
    "glm4_moe_lite": ("Glm4MoeLiteConfig", "Glm4MoeLiteForCausalLM",
                      {"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                       "first_k_dense_replace": 1, "n_shared_experts": 1, "kv_lora_rank": 16,
                       "q_lora_rank": 16, "qk_rope_head_dim": 4, "qk_nope_head_dim": 4,
                       "v_head_dim": 8, "n_group": 1, "topk_group": 1}),
    "solar_open": ("SolarOpenConfig", "SolarOpenForCausalLM",
                   {"head_dim": 8, "n_routed_experts": 4, "num_experts_per_tok": 2,
                    "moe_intermediate_size": 32, "n_shared_experts": 1,
                    "first_k_dense_replace": 1}),
    "cwm": ("CwmConfig", "CwmForCausalLM", {"head_dim": 8, "sliding_window": 8}),
    "granite_swa": ("GraniteSWAConfig", "GraniteSWAForCausalLM", {"sliding_window": 8}),
    "flex_olmo": ("FlexOlmoConfig", "FlexOlmoForCausalLM",
                  {"num_experts": 4, "num_experts_per_tok": 2, "pad_token_id": 0,
                   "eos_token_id": 1, "bos_token_id": None}),
    "olmo_hybrid": ("OlmoHybridConfig", "OlmoHybridForCausalLM",
                    {"pad_token_id": 0, "eos_token_id": 1, "bos_token_id": None}),
    "jais2": ("Jais2Config", "Jais2ForCausalLM", {"head_dim": 8}),
    "gpt_neox_japanese": ("GPTNeoXJapaneseConfig", "GPTNeoXJapaneseForCausalLM",
                          {"intermediate_multiple_size": 2, "num_key_value_heads": None}),
    "modernbert_decoder": ("ModernBertDecoderConfig", "ModernBertDecoderForCausalLM",
                           {"local_attention": 8, "global_attn_every_n_layers": 2,
                            "pad_token_id": 0, "num_key_value_heads": None}),
    "megatron_bert": ("MegatronBertConfig", "MegatronBertForCausalLM",
                      {"is_decoder": True, "num_key_value_heads": None}),
    # Encoder-decoders (text to text): the decoder reads the labels shifted right, as their
    # forward(labels=...) does, and the loss is over every unshifted label.
    "t5": ("T5Config", "T5ForConditionalGeneration", _t5_sizes()),
    "mt5": ("MT5Config", "MT5ForConditionalGeneration", _t5_sizes()),
    "umt5": ("UMT5Config", "UMT5ForConditionalGeneration", _t5_sizes()),
    "longt5": ("LongT5Config", "LongT5ForConditionalGeneration",
               _t5_sizes(local_radius=4, encoder_attention_type="transient-global",
                         global_block_size=4)),
    "switch_transformers": ("SwitchTransformersConfig", "SwitchTransformersForConditionalGeneration",
                            _t5_sizes(num_experts=4, expert_capacity=8, encoder_sparse_step=2,
                                      decoder_sparse_step=2)),
    "bart": ("BartConfig", "BartForConditionalGeneration", _bart_sizes()),
    "mbart": ("MBartConfig", "MBartForConditionalGeneration", _bart_sizes()),
    "pegasus": ("PegasusConfig", "PegasusForConditionalGeneration", _bart_sizes()),
    "marian": ("MarianConfig", "MarianMTModel", _bart_sizes(decoder_start_token_id=1)),
    "blenderbot": ("BlenderbotConfig", "BlenderbotForConditionalGeneration", _bart_sizes()),
    "blenderbot_small": ("BlenderbotSmallConfig", "BlenderbotSmallForConditionalGeneration",
                         _bart_sizes()),
    "plbart": ("PLBartConfig", "PLBartForConditionalGeneration", _bart_sizes()),
    "m2m_100": ("M2M100Config", "M2M100ForConditionalGeneration", _bart_sizes()),
    "mvp": ("MvpConfig", "MvpForConditionalGeneration", _bart_sizes()),
    "bigbird_pegasus": ("BigBirdPegasusConfig", "BigBirdPegasusForConditionalGeneration",
                        _bart_sizes(attention_type="original_full")),
    "led": ("LEDConfig", "LEDForConditionalGeneration",
            _bart_sizes(max_encoder_position_embeddings=CONTEXT,
                        max_decoder_position_embeddings=CONTEXT, attention_window=[8, 8])),
    "nllb_moe": ("NllbMoeConfig", "NllbMoeForConditionalGeneration",
                 _bart_sizes(num_experts=4, expert_capacity=8, encoder_sparse_step=2,
                             decoder_sparse_step=2)),
}
# masked LMs: 25% of the tokens masked and labelled
MASKED = ("bert", "distilbert", "roberta", "electra", "albert", "deberta_v2", "mpnet", "roformer",
          "mobilebert", "convbert")
# encoder-decoders: the source sequence in, its next tokens out
SEQ2SEQ = ("t5", "mt5", "umt5", "longt5", "switch_transformers", "bart", "mbart", "pegasus",
           "marian", "blenderbot", "blenderbot_small", "plbart", "m2m_100", "mvp",
           "bigbird_pegasus", "led", "nllb_moe")
STYLES = ("buggy", "fixed")


def build_model(kind: str, attn: str) -> torch.nn.Module:
    """A tiny model of family `kind` with random weights, in eval mode (dropout off)."""
    import transformers as tr
    if kind == "gpt2":
        cfg = tr.GPT2Config(vocab_size=VOCAB, n_positions=CONTEXT, n_embd=32, n_layer=2,
                            n_head=2, bos_token_id=0, eos_token_id=0)
        cls = tr.GPT2LMHeadModel
    elif kind == "llama":
        cfg = tr.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                             max_position_embeddings=CONTEXT)
        cls = tr.LlamaForCausalLM
    elif kind == "bert":
        cfg = tr.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=2, intermediate_size=64,
                            max_position_embeddings=CONTEXT)
        cls = tr.BertForMaskedLM
    elif kind in MORE:
        config_name, model_name, extra = MORE[kind]
        args = {"vocab_size": VOCAB, "hidden_size": 32, "intermediate_size": 64,
                "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                "max_position_embeddings": CONTEXT, **extra}
        cfg = getattr(tr, config_name)(**{k: v for k, v in args.items() if v is not None})
        cls = getattr(tr, model_name)
    else:
        raise ValueError(f"unknown model {kind!r} (expected one of "
                         f"{', '.join(MODELS + tuple(MORE))})")
    torch.manual_seed(INIT_SEED)
    try:
        return cls._from_config(cfg, attn_implementation=attn).eval()
    except ValueError as e:  # e.g. Gemma2: no SDPA attention in transformers
        if attn != "sdpa" or "scaled_dot_product_attention" not in str(e):
            raise
        print(f"{cls.__name__} has no SDPA attention in this transformers: recording with "
              f"--attn eager", file=sys.stderr)
        torch.manual_seed(INIT_SEED)
        return cls._from_config(cfg, attn_implementation="eager").eval()


def make_batches(kind: str, steps: int) -> List[Batch]:
    """`steps` batches of BATCH right-padded sequences of random length (4..CONTEXT tokens).

    Causal LMs: counting sequences with a random start and stride (learnable), labels = ids
    (the loss shifts them), -100 on padding. bert: the same sequences with 25% of the real
    tokens replaced by the [MASK] id 0 and labelled, -100 everywhere else.
    """
    g = torch.Generator().manual_seed(DATA_SEED)
    batches = []
    for _ in range(steps):
        ids = torch.zeros(BATCH, CONTEXT, dtype=torch.int64)
        mask = torch.zeros(BATCH, CONTEXT, dtype=torch.int64)
        labels = torch.full((BATCH, CONTEXT), IGNORE, dtype=torch.int64)
        for i in range(BATCH):
            n = int(torch.randint(4, CONTEXT + 1, (1,), generator=g))
            s = int(torch.randint(0, VOCAB - 1, (1,), generator=g))
            d = int(torch.randint(1, 4, (1,), generator=g))
            seq = torch.tensor([1 + (s + j * d) % (VOCAB - 1) for j in range(n)])
            ids[i, :n] = seq
            mask[i, :n] = 1
            if kind in MASKED:
                pick = torch.randperm(n, generator=g)[:max(1, n // 4)]
                labels[i, pick] = seq[pick]
                ids[i, pick] = 0
            elif kind in SEQ2SEQ:
                m = int(torch.randint(2, CONTEXT + 1, (1,), generator=g))
                labels[i, :m] = torch.tensor([1 + (s + (n + j) * d) % (VOCAB - 1)
                                              for j in range(m)])
            else:
                labels[i, :n] = seq
        batch = {"input_ids": ids, "labels": labels}
        if kind in MASKED or kind in SEQ2SEQ:
            batch["attention_mask"] = mask
        batches.append(batch)
    return batches


def num_items(kind: str, labels: torch.Tensor) -> torch.Tensor:
    """The number of tokens the loss averages over: causal LMs predict token t+1 at position t,
    so the first label of each sequence is never a target (what Trainer counts as
    num_items_in_batch)."""
    if kind not in MASKED and kind not in SEQ2SEQ:
        labels = labels[:, 1:]
    return (labels != IGNORE).sum()


def make_step(model: torch.nn.Module, kind: str, style: str) -> Callable[[Batch, Batch], Batch]:
    """The training step of one run: loss and gradients of the parameters that require grad.

    style "reference": the whole batch at once, token mean.
    style "buggy": MICRO micro-batches, loss_i = token mean of micro-batch i / MICRO.
    style "fixed": MICRO micro-batches, loss_i = token sum of micro-batch i / num_items_in_batch.
    The logged loss is sum_i loss_i; the gradients are accumulated over the micro-batches.
    """
    micro = 1 if style == "reference" else MICRO
    if kind in SEQ2SEQ:  # no shift: the decoder's inputs are the labels shifted right
        from transformers.loss.loss_utils import ForMaskedLMLoss as loss_function
    else:
        loss_function = model.loss_function

    def step(params: Batch, batch: Batch) -> Batch:
        trainable = [k for k, v in params.items() if v.requires_grad]
        size = batch["input_ids"].shape[0] // micro
        total = num_items(kind, batch["labels"]) if style == "fixed" else None
        loss, grads = None, None
        for i in range(micro):
            part = {k: v[i * size:(i + 1) * size] for k, v in batch.items()}
            inputs = {k: v for k, v in part.items() if k != "labels"}
            if kind in SEQ2SEQ:
                inputs["decoder_input_ids"] = decoder_inputs(model, part["labels"])
            logits = functional_call(model, params, (), inputs).logits
            li = loss_function(logits=logits, labels=part["labels"],
                               vocab_size=model.config.vocab_size, num_items_in_batch=total)
            if style == "buggy":
                li = li / micro
            # A parameter the step does not reach (LED's global-attention projections without a
            # global mask) has no gradient: the optimizer skips it, as in a Trainer.
            gi = torch.autograd.grad(li, [params[k] for k in trainable], allow_unused=True)
            loss = li if loss is None else loss + li
            grads = list(gi) if grads is None else [
                b if a is None else a if b is None else a + b for a, b in zip(grads, gi)]
        return {"loss": loss,
                **{"grad:" + k: g for k, g in zip(trainable, grads) if g is not None}}
    return step


def decoder_inputs(model: torch.nn.Module, labels: torch.Tensor) -> torch.Tensor:
    """The decoder's inputs of an encoder-decoder: the labels shifted right, -100 as padding,
    what its forward(labels=...) computes (the model's own method, or its module's
    shift_tokens_right)."""
    if hasattr(model, "prepare_decoder_input_ids_from_labels"):
        return model.prepare_decoder_input_ids_from_labels(labels=labels)
    shift = sys.modules[type(model).__module__].shift_tokens_right
    return shift(labels, model.config.pad_token_id, model.config.decoder_start_token_id)


def record(path: str, kind: str, attn: str, style: str, batches: List[Batch]) -> float:
    """Trains one run from the initial weights and records it; returns the seconds it took."""
    start = time.perf_counter()
    model = build_model(kind, attn)
    # Parameters the model freezes (RoFormer's sinusoidal positions) stay frozen: not trained,
    # no gradient in the step.
    params = {k: v.detach().clone().requires_grad_(v.requires_grad)
              for k, v in model.named_parameters()}
    params.update({k: v.detach().clone() for k, v in model.named_buffers()})
    trainable = {k: v for k, v in params.items() if v.requires_grad}
    opt = torch.optim.AdamW(trainable.values(), lr=LR, weight_decay=0.01)
    step = make_step(model, kind, style)
    role = "reference" if style == "reference" else "candidate"
    notes = {"reference": f"whole batch of {BATCH} sequences, token mean",
             "buggy": f"{MICRO} micro-batches, mean of the per-micro-batch token means (the "
                      f"transformers gradient-accumulation bug fixed in 4.46)",
             "fixed": f"{MICRO} micro-batches, summed token loss / num_items_in_batch"}[style]
    with RunRecorder(path, run_name=f"{kind}-{attn}/{style}", role=role, step_fn=step,
                     overwrite=True, notes=f"{type(model).__name__}, {notes}") as rec:
        for step_no, batch in enumerate(batches):
            rec.checkpoint(step_no, params, batch)  # the state the step starts from
            out = step(params, batch)
            rec.log(step_no, out["loss"].item(), lr=LR)
            for k, p in trainable.items():
                p.grad = out.get("grad:" + k)
            opt.step()
            opt.zero_grad(set_to_none=True)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for the run files (created)")
    ap.add_argument("--model", choices=MODELS + tuple(MORE), default="gpt2",
                    help="GPT2LMHeadModel, LlamaForCausalLM or BertForMaskedLM (default: gpt2), "
                         "or a tiny model of another family: " + ", ".join(MORE))
    ap.add_argument("--steps", type=int, default=10,
                    help="training steps per run, each one checkpointed (default: 10)")
    ap.add_argument("--style", choices=STYLES + ("both",), default="both",
                    help="which candidate(s) to record besides the reference (default: both)")
    ap.add_argument("--attn", choices=("sdpa", "eager"), default="sdpa",
                    help="attention implementation (transformers' attn_implementation; default: "
                         "sdpa, transformers' default for these models)")
    args = ap.parse_args()
    if args.steps < 1:
        ap.error("--steps must be at least 1")
    torch.set_num_threads(1)
    # GPT2LMHeadModel has no loss_type, so transformers says once that it uses ForCausalLMLoss
    # (as GPT2LMHeadModel.forward(labels=...) does too); nothing else is logged below errors.
    import transformers
    transformers.logging.set_verbosity_error()
    os.makedirs(args.out, exist_ok=True)
    batches = make_batches(args.model, args.steps)
    styles = ["reference"] + (list(STYLES) if args.style == "both" else [args.style])
    for style in styles:
        name = "reference.h5" if style == "reference" else f"candidate-{style}.h5"
        path = os.path.join(args.out, name)
        seconds = record(path, args.model, args.attn, style, batches)
        print(f"{path}: {args.steps} steps in {seconds:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
