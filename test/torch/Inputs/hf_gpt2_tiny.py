"""A HuggingFace GPT-2 at shard-gen's gpt2-tiny size (2 layers, 64 wide,
byte vocabulary, 64 positions), random init, exported for a global batch
of 16 sequences of 64 tokens: python3 hf_gpt2_tiny.py STEP.mlir INIT.st"""

import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel

import autoshard.hf
import autoshard.torch as at

torch.manual_seed(0)
config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=256,
                    n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
                    attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
step = autoshard.hf.export_causal_lm(
    GPT2LMHeadModel(config), batch=16, seq=64,
    optimizer=at.AdamW(lr=3e-3, weight_decay=0.1, max_grad_norm=1.0,
                       no_decay=("bias", "ln_")))
step.save(sys.argv[1], sys.argv[2])
