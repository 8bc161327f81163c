"""The models of the PyTorch front end's acceptance tests: a user-style MLP
classifier with LayerNorm and dropout, and HuggingFace GPT-2 and Llama at
small random-initialised configs (no downloads: GPT-2 goes through a
save_pretrained directory that the test writes itself)."""

import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import autoshard.hf
import autoshard.torch as at

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "e2e", "Inputs"))
from opcheck import dropout_keep  # noqa: E402  (train.dropout's mask)

BATCH = 8  # global batch: 2 rows a rank on 4 ranks


class Classifier(nn.Module):
    """What a user writes: Linear, LayerNorm, GELU, Dropout, Linear."""

    def __init__(self, features=24, hidden=48, classes=7, p=0.1):
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.drop = nn.Dropout(p)
        self.fc2 = nn.Linear(hidden, hidden)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        h = self.drop(F.gelu(self.norm(self.fc1(x))))
        return self.head(torch.tanh(self.fc2(h)))


class LogProbClassifier(Classifier):
    """A classifier that returns log-probabilities, as one trained with
    nn.NLLLoss does."""

    def forward(self, x):
        return F.log_softmax(super().forward(x), dim=-1)


class SpelledGeluClassifier(Classifier):
    """The classifier with its exact GELU written out, as BERT-era code
    does: x * 0.5 * (1 + erf(x / sqrt(2)))."""

    def forward(self, x):
        h = self.norm(self.fc1(x))
        h = self.drop(h * 0.5 * (1.0 + torch.erf(h / math.sqrt(2.0))))
        return self.head(torch.tanh(self.fc2(h)))


class TinyViT(nn.Module):
    """A vision transformer's shape: a class token expanded to the batch and
    concatenated with the patch embeddings, learned positions, one
    pre-norm block with bidirectional attention, the head on the class
    token."""

    def __init__(self, patches=6, patch_dim=12, dim=32, heads=4, classes=5):
        super().__init__()
        self.heads = heads
        self.embed = nn.Linear(patch_dim, dim)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, patches + 1, dim) * 0.02)
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        b, n, _ = x.shape
        dim = self.pos.shape[-1]
        h = torch.cat([self.cls.expand(b, -1, -1), self.embed(x)], dim=1)
        h = h + self.pos
        qkv = self.qkv(self.norm1(h)).view(b, n + 1, 3, self.heads,
                                           dim // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        a = F.scaled_dot_product_attention(q, k, v)
        h = h + self.proj(a.transpose(1, 2).reshape(b, n + 1, dim))
        h = h + self.fc2(F.gelu(self.fc1(self.norm2(h))))
        return self.head(self.norm(h)[:, 0])


class NanoGPT(nn.Module):
    """nanoGPT's model as its users copy it: attention written out
    (`q @ k.transpose(-2, -1)`, masked_fill of a registered causal buffer,
    softmax, `@ v`) instead of scaled_dot_product_attention, LayerNorm and
    exact GELU, learned positions."""

    def __init__(self, vocab=64, seq=16, dim=32, heads=4, layers=2):
        super().__init__()
        self.heads = heads
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(seq, dim)
        self.h = nn.ModuleList(NanoBlock(dim, heads, seq)
                               for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        t = idx.shape[1]
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class NanoBlock(nn.Module):
    def __init__(self, dim, heads, seq):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(dim)
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.c_proj = nn.Linear(dim, dim)
        self.ln_2 = nn.LayerNorm(dim)
        self.c_fc = nn.Linear(dim, 4 * dim)
        self.mlp_proj = nn.Linear(4 * dim, dim)
        self.register_buffer("bias", torch.tril(torch.ones(seq, seq))
                             .view(1, 1, seq, seq))

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class Case:
    optimizer = at.AdamW(lr=3e-3, weight_decay=0.1, max_grad_norm=1.0,
                         no_decay=("bias", "norm", "ln_"))

    def before_step(self, model, step):
        """Makes the eager model's dropouts draw train.dropout's masks."""
        streams = [m for m in model.modules() if isinstance(m, nn.Dropout)
                   and m.p > 0]
        for stream, m in enumerate(streams):
            if getattr(m, "_autoshard_hook", None) is not None:
                m._autoshard_hook.remove()

            def hook(module, inputs, output, stream=stream):
                x = inputs[0]
                keep = torch.from_numpy(dropout_keep(
                    tuple(x.shape), module.p, stream, seed=0, step=step))
                scale = float(np.float32(1) / (np.float32(1) -
                                               np.float32(module.p)))
                return torch.where(keep, x * scale, torch.zeros_like(x))
            m._autoshard_hook = m.register_forward_hook(hook)


class MLP(Case):
    """A classifier of x [BATCH, *features] into `classes`."""
    name = "mlp"
    model, features, classes = Classifier, (24,), 7

    def __init__(self, steps, work):
        torch.manual_seed(0)
        self.module = self.model()
        g = torch.Generator().manual_seed(1)
        self.batches = [
            {"x": torch.randn(BATCH, *self.features, generator=g),
             "y": torch.randint(0, self.classes, (BATCH,), generator=g)}
            for _ in range(steps)]

    def loss(self, model, batch):
        return F.cross_entropy(model(batch["x"]), batch["y"])

    def export(self, precision):
        b = self.batches[0]
        return at.export_training_step(
            self.module, (b["x"], b["y"]),
            loss=lambda logits, x, y: F.cross_entropy(logits, y),
            optimizer=self.optimizer, precision=precision)


class MLPNll(MLP):
    """log_softmax in the model and F.nll_loss as the loss, every other
    label -100 (ignored): one of each pair of rows, so that every rank of 1,
    2 or 4 counts as many rows and the ranks' mean is the batch's."""
    name = "mlp-nll"
    model = LogProbClassifier

    def __init__(self, steps, work):
        super().__init__(steps, work)
        for b in self.batches:
            b["y"][1::2] = -100

    def loss(self, model, batch):
        return F.nll_loss(model(batch["x"]), batch["y"])

    def export(self, precision):
        b = self.batches[0]
        return at.export_training_step(
            self.module, (b["x"], b["y"]),
            loss=lambda logp, x, y: F.nll_loss(logp, y),
            optimizer=self.optimizer, precision=precision)


class MLPErf(MLP):
    """The exact GELU spelled out with torch.erf (raised to gelu_erf)."""
    name = "mlp-erf"
    model = SpelledGeluClassifier


class ViT(MLP):
    """The class token takes each rank's rows of the batch (the partitioner
    resizes the expand of a parameter to the batch)."""
    name = "vit"
    model, features, classes = TinyViT, (6, 12), 5


class NanoGPTCase(Case):
    """Next-token prediction with nanoGPT's loss (cross_entropy over the
    flattened logits)."""
    name = "nanogpt"
    vocab, seq = 64, 16

    def __init__(self, steps, work):
        torch.manual_seed(0)
        self.module = NanoGPT(vocab=self.vocab, seq=self.seq)
        g = torch.Generator().manual_seed(1)
        self.batches = []
        for _ in range(steps):
            ids = torch.randint(0, self.vocab, (BATCH, self.seq + 1),
                                generator=g)
            self.batches.append({"x": ids[:, :-1].contiguous(),
                                 "y": ids[:, 1:].contiguous()})

    @staticmethod
    def _loss(logits, x, y):
        return F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))

    def loss(self, model, batch):
        return self._loss(model(batch["x"]), batch["x"], batch["y"])

    def export(self, precision):
        b = self.batches[0]
        return at.export_training_step(
            self.module, (b["x"], b["y"]), loss=self._loss,
            optimizer=self.optimizer, precision=precision)


class CausalLM(Case):
    seq = 16

    def __init__(self, steps, work):
        torch.manual_seed(0)
        self.module = self.build(work)
        vocab = self.module.config.vocab_size
        g = torch.Generator().manual_seed(1)
        self.batches = []
        for _ in range(steps):
            ids = torch.randint(0, vocab, (BATCH, self.seq), generator=g)
            self.batches.append({"input_ids": ids})

    def loss(self, model, batch):
        return model(input_ids=batch["input_ids"],
                     labels=batch["input_ids"], use_cache=False).loss

    def export(self, precision):
        return autoshard.hf.export_causal_lm(
            self.source, batch=BATCH, seq=self.seq, optimizer=self.optimizer,
            precision=precision)


class GPT2(CausalLM):
    name = "gpt2"

    def build(self, work):
        from transformers import GPT2Config, GPT2LMHeadModel
        config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=256,
                            n_positions=32, resid_pdrop=0.0, embd_pdrop=0.0,
                            attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
        model = GPT2LMHeadModel(config)
        # Through a local checkpoint directory, as a user fine-tunes one.
        path = os.path.join(work, "gpt2-checkpoint")
        model.save_pretrained(path)
        self.source = path
        return autoshard.hf.load_causal_lm(path)


class Llama(CausalLM):
    name = "llama"

    def build(self, work):
        from transformers import LlamaConfig, LlamaForCausalLM
        config = LlamaConfig(num_hidden_layers=2, hidden_size=64,
                             num_attention_heads=4, num_key_value_heads=2,
                             intermediate_size=128, vocab_size=256,
                             max_position_embeddings=32, bos_token_id=0,
                             eos_token_id=0)
        model = LlamaForCausalLM(config)
        self.source = model
        return model


class LlamaPrompt(Llama):
    """Separate labels with the first 4 tokens of every sequence masked with
    -100, as a prompt is in instruction tuning (as many counted positions
    on every rank, so the ranks' mean is the batch's)."""
    name = "llama-prompt"

    def __init__(self, steps, work):
        super().__init__(steps, work)
        for b in self.batches:
            labels = b["input_ids"].clone()
            labels[:, :4] = -100
            b["labels"] = labels

    def loss(self, model, batch):
        return model(input_ids=batch["input_ids"], labels=batch["labels"],
                     use_cache=False).loss

    def export(self, precision):
        return autoshard.hf.export_causal_lm(
            self.source, batch=BATCH, seq=self.seq, optimizer=self.optimizer,
            precision=precision, separate_labels=True)


class OtherDecoder(CausalLM):
    """A HuggingFace decoder with no code of its own in the importer."""
    SMALL = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                 intermediate_size=128, vocab_size=256,
                 max_position_embeddings=32, bos_token_id=0, eos_token_id=0)
    ARCHS = {
        "qwen2": ("Qwen2Config", "Qwen2ForCausalLM",
                  dict(num_key_value_heads=2)),
        "mistral": ("MistralConfig", "MistralForCausalLM",
                    dict(num_key_value_heads=2, sliding_window=None)),
        "gemma": ("GemmaConfig", "GemmaForCausalLM",
                  dict(num_key_value_heads=2, head_dim=16,
                       pad_token_id=None)),
        "phi3": ("Phi3Config", "Phi3ForCausalLM",
                 dict(num_key_value_heads=2, pad_token_id=None)),
        "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", {}),
    }

    def build(self, work):
        import transformers
        config_name, model_name, extra = self.ARCHS[self.name]
        config = getattr(transformers, config_name)(**self.SMALL, **extra)
        model = getattr(transformers, model_name)(config)
        self.source = model
        return model


def other(arch):
    return type(arch, (OtherDecoder,), {"name": arch})


MODELS = {"mlp": MLP, "mlp-nll": MLPNll, "mlp-erf": MLPErf, "vit": ViT, "nanogpt": NanoGPTCase, "gpt2": GPT2, "llama": Llama,
          "llama-prompt": LlamaPrompt,
          **{arch: other(arch) for arch in OtherDecoder.ARCHS}}
