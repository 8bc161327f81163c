"""HuggingFace helpers: export a causal language model (a `transformers`
model object, or a local directory that `save_pretrained` wrote) as a
training step whose parameters carry the model's own state_dict names, so
that the binary's saved parameters load back with `load_state_dict` or
`from_pretrained`-style code.

No network access: a directory must hold config.json and the weights."""

import os

import torch

from . import torch as _at


def load_causal_lm(dir_or_model):
    """The model object: `dir_or_model` itself, or AutoModelForCausalLM
    loaded from a local directory (float32, eager attention)."""
    if isinstance(dir_or_model, torch.nn.Module):
        return dir_or_model
    path = os.fspath(dir_or_model)
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise FileNotFoundError(
            f"autoshard.hf: {path} has no config.json: give a directory "
            f"that save_pretrained wrote (config.json and model.safetensors) "
            f"or the model object")
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, attn_implementation="sdpa",
        local_files_only=True)


def example_batch(model, batch, seq, seed=0):
    """Random token ids [batch, seq] inside the model's vocabulary: the
    shapes the step is compiled for (the values do not matter)."""
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, seq), generator=g)
    labels = torch.randint(0, vocab, (batch, seq), generator=g)
    return ids, labels


def export_causal_lm(dir_or_model, *, batch, seq, optimizer=None,
                     precision="f32", separate_labels=False):
    """Exports a causal LM's training step: input `input_ids` [batch, seq]
    (token ids), loss = the model's own `.loss` with `labels=input_ids`
    (the model shifts them; the last position of each sequence has no next
    token), as HuggingFace trains a language model. A token file
    (`--data train.bin`) feeds it directly.

    With `separate_labels`, the step takes `labels` [batch, seq] as a second
    input (e.g. -100 on prompt tokens that must not count); an asdata file
    then gives both.

    Returns a TrainingStep; `step.save("step.mlir", "init.safetensors")`
    writes the step and the model's current weights."""
    model = load_causal_lm(dir_or_model)
    if optimizer is None:
        optimizer = _at.AdamW()
    config = model.config
    limit = getattr(config, "max_position_embeddings", None) or \
        getattr(config, "n_positions", None)
    if limit is not None and seq > limit:
        raise ValueError(f"autoshard.hf: seq {seq} exceeds the model's "
                         f"{limit} positions")
    ids, labels = example_batch(model, batch, seq)
    if separate_labels:
        def call(m, input_ids, labels):
            return m(input_ids=input_ids, labels=labels, use_cache=False)
        inputs, names = (ids, labels), ("input_ids", "labels")
    else:
        def call(m, input_ids):
            return m(input_ids=input_ids, labels=input_ids, use_cache=False)
        inputs, names = (ids,), ("input_ids",)
    return _at.export_training_step(
        model, inputs, optimizer=optimizer, precision=precision,
        input_names=names, _call=call)
