"""Bring your own PyTorch model: capture one training step with torch.export
and write it as autoshard's `train` dialect plus its initial parameters.

    import autoshard.torch as at
    step = at.export_training_step(model, (x, y), loss=F.cross_entropy,
                                   optimizer=at.AdamW(lr=1e-3))
    step.save("step.mlir", "init.safetensors")
    # shard-compile --strategy=zero3 --world-size=4 step.mlir -o train
    # mpirun -np 4 ./train --load-params init.safetensors --data d.asdata \\
    #     --save-params final.safetensors
    at.load_into(model, "final.safetensors")

docs/PyTorch.md describes what is captured and what is refused.
"""

import dataclasses
import inspect
import re

import torch

from . import _mlir as mlir
from ._importer import ExportError, Importer

__all__ = ["AdamW", "SGD", "TrainingStep", "ExportError",
           "export_training_step", "load_into"]


@dataclasses.dataclass(frozen=True)
class AdamW:
    """torch.optim.AdamW's update (decoupled weight decay), with
    clip_grad_norm_ to `max_grad_norm` when it is set. Parameters whose
    state_dict name contains one of `no_decay` (substrings, as the
    HuggingFace recipes' ["bias", "LayerNorm.weight"]) are not decayed; every
    other parameter is, as in a single torch parameter group."""
    lr: float = 1e-3
    betas: tuple = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    max_grad_norm: float = None
    no_decay: tuple = ()

    def attribute(self):
        b1, b2 = self.betas
        return (f"#train.adamw<lr = {mlir.f64(self.lr)}, "
                f"beta1 = {mlir.f64(b1)}, beta2 = {mlir.f64(b2)}, "
                f"eps = {mlir.f64(self.eps)}, "
                f"weight_decay = {mlir.f64(self.weight_decay)}>")


@dataclasses.dataclass(frozen=True)
class SGD:
    """torch.optim.SGD with momentum (dampening 0, not Nesterov) and L2
    weight decay added to the gradient, as torch does."""
    lr: float = 1e-2
    momentum: float = 0.0
    weight_decay: float = 0.0
    max_grad_norm: float = None
    no_decay: tuple = ()

    def attribute(self):
        return (f"#train.sgd<lr = {mlir.f64(self.lr)}, "
                f"momentum = {mlir.f64(self.momentum)}, "
                f"weight_decay = {mlir.f64(self.weight_decay)}>")


class TrainingStep:
    """One training step captured from a module: the `train` dialect text,
    the initial parameters by state_dict name, and what the binary reads."""

    def __init__(self, text, params, inputs, labels, aliases):
        self.text = text
        #: canonical state_dict name -> initial tensor (f32)
        self.params = params
        #: input names in argument order -> (shape, asdata dtype)
        self.inputs = inputs
        #: the inputs that the loss reads as class labels
        self.labels = labels
        #: canonical name -> the other state_dict names of a tied parameter
        self.aliases = aliases

    def canonical(self, name):
        """The step parameter that state_dict name `name` is (itself, or the
        first name of the parameter it is tied to)."""
        for first, others in self.aliases.items():
            if name in others:
                return first
        return name

    def save(self, mlir_path, params_path):
        """Writes the step (MLIR) and its initial parameters (safetensors,
        under the module's state_dict names: `--load-params` reads them)."""
        from safetensors.torch import save_file
        with open(mlir_path, "w") as f:
            f.write(self.text)
        save_file({k: v.detach().to(torch.float32).contiguous().clone()
                   for k, v in self.params.items()}, params_path)


def _positional_names(fn):
    """Names of fn's positional parameters, and whether it takes *args."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return [], True
    names, star = [], False
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind == p.VAR_POSITIONAL:
            star = True
    return names, star


def _module_arity(module, count):
    """How many of the example inputs the module's forward takes: all when
    it takes *args or as many, else its positional parameters (the rest go
    only to the loss function)."""
    names, star = _positional_names(module.forward)
    return count if star else min(count, len(names))


def _input_names(module, loss, count):
    """The step's input names: the loss function's parameter names after
    its first (the outputs) when it names every input, else the forward's
    then the loss function's; input{i} where neither says."""
    if loss is not None:
        names, _ = _positional_names(loss)
        if len(names) - 1 >= count:
            return names[1:count + 1]
    names = _positional_names(module.forward)[0][:_module_arity(module, count)]
    if loss is not None and len(names) < count:
        extra = _positional_names(loss)[0][1:]
        names += extra[len(names):count]
    while len(names) < count:
        names.append(f"input{len(names)}")
    return names


class _Step(torch.nn.Module):
    """The module as the exported graph calls it: the user's module under
    attribute `m` (the importer strips the prefix), the loss appended."""

    def __init__(self, module, loss, call):
        super().__init__()
        self.m = module
        self._loss = loss
        self._call = call

    def forward(self, *inputs):
        out = self._call(self.m, *inputs)
        if self._loss is not None:
            return self._loss(out, *inputs)
        if isinstance(out, torch.Tensor):
            return out
        loss = getattr(out, "loss", None)
        if loss is None and isinstance(out, dict):
            loss = out.get("loss")
        if loss is None:
            raise ExportError(
                "autoshard.torch: the module's forward returned "
                f"{type(out).__name__} without a .loss; return the scalar "
                "loss, an object with .loss (HuggingFace models given "
                "labels=), or pass loss=fn(outputs, *inputs)")
        return loss


def _units(module):
    """state_dict prefix of each block: the elements of every ModuleList
    (the outermost one when lists nest), as FSDP's auto-wrap policy wraps
    repeated layers."""
    units = []
    for name, child in module.named_modules():
        if isinstance(child, torch.nn.ModuleList):
            for index, _ in enumerate(child):
                prefix = f"{name}.{index}" if name else str(index)
                if not any(prefix.startswith(u + ".") for u in units):
                    units.append(prefix)
    return units


def _unit_of(name, units):
    for u in units:
        if name.startswith(u + "."):
            return u
    return None


def export_training_step(module, example_inputs, *, loss=None,
                         optimizer=AdamW(), precision="f32",
                         input_names=None, _call=None):
    """Captures `module`'s training step with torch.export.

    `example_inputs`: a tuple of tensors whose first dimension is the global
    batch (the batch a strategy splits over ranks); their shapes are the
    step's. The module's forward returns the scalar loss, or an object with
    `.loss`, or `loss(outputs, *example_inputs)` computes it.
    `optimizer`: AdamW(...) or SGD(...). `precision`: "f32", or "bf16"
    (bf16 compute from f32 master weights).

    Raises ExportError naming the ATen op, the module path and the source
    line of anything the step cannot express."""
    if precision not in ("f32", "bf16"):
        raise ValueError(f"precision must be 'f32' or 'bf16', got "
                         f"{precision!r}")
    if not isinstance(optimizer, (AdamW, SGD)):
        raise TypeError("optimizer must be autoshard.torch.AdamW(...) or "
                        "autoshard.torch.SGD(...)")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    if not example_inputs:
        raise ValueError("example_inputs is empty: give the batch tensors")
    for i, t in enumerate(example_inputs):
        if not isinstance(t, torch.Tensor) or t.dim() == 0:
            raise ValueError(f"example_inputs[{i}] must be a tensor whose "
                             f"first dimension is the global batch")
    batch = example_inputs[0].shape[0]
    for i, t in enumerate(example_inputs):
        if t.shape[0] != batch:
            raise ValueError(f"example_inputs[{i}] has {t.shape[0]} rows, "
                             f"example_inputs[0] {batch}: every input's "
                             f"first dimension is the global batch")
    names = list(input_names or
                 _input_names(module, loss, len(example_inputs)))
    if len(set(names)) != len(names):
        raise ValueError(f"input names {names} repeat a name")

    frozen = [n for n, p in module.named_parameters() if not p.requires_grad]
    if frozen:
        raise ExportError(
            f"autoshard.torch: parameters with requires_grad=False "
            f"({', '.join(frozen[:5])}{', ...' if len(frozen) > 5 else ''}) "
            f"are not supported yet: every parameter of the step trains")

    # Tied parameters: one step parameter under the first state_dict name.
    canonical_of, aliases, tensors = {}, {}, {}
    for name, p in module.named_parameters(remove_duplicate=False):
        first = canonical_of.setdefault(id(p), name)
        if first == name:
            tensors[name] = p
        else:
            aliases.setdefault(first, []).append(name)

    was_training = module.training
    module.train()
    if _call is None:
        arity = _module_arity(module, len(example_inputs))
        _call = lambda m, *xs: m(*xs[:arity])  # noqa: E731
    wrapper = _Step(module, loss, _call)
    try:
        ep = torch.export.export(wrapper, example_inputs, strict=False)
    except ExportError:
        raise
    except Exception as e:  # torch's own message names the construct
        raise ExportError(f"autoshard.torch: torch.export failed: "
                          f"{type(e).__name__}: {e}") from e
    finally:
        module.train(was_training)

    sig = ep.graph_signature
    params = {}
    for placeholder, target in sig.inputs_to_parameters.items():
        p = wrapper.get_parameter(target)
        canonical = canonical_of[id(p)]
        params[placeholder] = (canonical, p)
    user_inputs = [spec.arg.name for spec in sig.input_specs
                   if spec.kind == torch.export.graph_signature.InputKind.USER_INPUT]
    if len(user_inputs) != len(example_inputs):
        raise ExportError(f"autoshard.torch: the graph has {len(user_inputs)} "
                          f"inputs for {len(example_inputs)} example inputs "
                          f"(an input that the step does not read, or one "
                          f"passed twice: give distinct tensors)")
    inputs = [(ph, names[i], example_inputs[i])
              for i, ph in enumerate(user_inputs)]

    imp = Importer(ep, params, inputs, precision)
    loss_value = imp.run()
    return _assemble(module, imp, loss_value, optimizer, tensors, aliases,
                     example_inputs, names)


def _assemble(module, imp, loss_value, optimizer, tensors, aliases,
              example_inputs, names):
    units = _units(module)
    # A label is an input that only the loss reads as its target; token
    # ids that the model also embeds (a causal LM given labels=input_ids,
    # shifting them itself) stay an input, so that a token file's batches
    # fill them with the tokens and not with the next ones.
    label_names = set()
    for target in imp.loss_targets:
        label_names |= imp.origins.get(target.name, set())
    label_names -= imp.id_uses
    decay = optimizer.weight_decay

    args = []
    # Arguments in the order the importer met them: %argN.
    by_arg = {}
    for name, value in imp.param_values.items():
        # The initial value is PyTorch's, in the file save() writes: the
        # binary refuses to start without --load-params (or --resume).
        attrs = {"train.name": mlir.string(name),
                 "train.role": "#train.role<param>",
                 "train.init": "#train.init<load>"}
        if aliases.get(name):
            attrs["train.aliases"] = "[" + ", ".join(
                mlir.string(a) for a in aliases[name]) + "]"
        unit = _unit_of(name, units)
        if unit is not None:
            attrs["train.unit"] = mlir.string(unit)
        d = 0.0 if any(s in name for s in optimizer.no_decay) else decay
        attrs["train.weight_decay"] = mlir.f64(d)
        by_arg[value.name] = (value, attrs)
    for name, value in imp.input_values.items():
        role = "label" if name in label_names else "input"
        by_arg[value.name] = (value, {"train.name": mlir.string(name),
                                      "train.role": f"#train.role<{role}>"})
    for arg in imp.arg_values:
        value, attrs = by_arg[arg]
        args.append(f"{arg}: {value.type} {mlir.attr_dict(attrs).strip()}")

    unused = [n for n in tensors if n not in imp.param_values]
    if unused:
        raise ExportError(
            f"autoshard.torch: parameters that the loss does not read: "
            f"{', '.join(unused[:5])}{', ...' if len(unused) > 5 else ''} "
            f"(remove them from the module, or they would never train)")

    func_attrs = {"train.step": None,
                  "train.optimizer": optimizer.attribute()}
    if optimizer.max_grad_norm:
        func_attrs["train.max_grad_norm"] = mlir.f32(optimizer.max_grad_norm)
    header = (f"module {{\n  func.func @train_step(" +
              ", ".join(args) +
              f") -> ({loss_value.type} {{train.name = \"loss\", "
              f"train.role = #train.role<loss>}}) attributes"
              f"{mlir.attr_dict(func_attrs)} {{\n")
    body = "\n".join(imp.lines)
    text = (header + body + f"\n    func.return {loss_value.name} : "
            f"{loss_value.type}\n  }}\n}}\n")
    params = {name: tensors[name].detach() for name in imp.param_values}
    inputs = {name: (tuple(v.shape), v.elem)
              for name, v in imp.input_values.items()}
    return TrainingStep(text, params, inputs, sorted(label_names),
                        {k: v for k, v in aliases.items()
                         if k in imp.param_values})


def load_into(module, path, strict=True):
    """Loads parameters that a training binary saved (`--save-params`,
    `--save-best`, `shard-ckpt consolidate`) into `module` by state_dict
    name; tied parameters, saved once, fill every name they are tied to."""
    from safetensors.torch import load_file
    saved = load_file(path)
    state = {}
    canonical_of = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        first = canonical_of.setdefault(id(p), name)
        source = name if name in saved else first
        if source in saved:
            state[name] = saved[source]
    extra = sorted(set(saved) - set(state) - {
        canonical_of[id(p)] for _, p in
        module.named_parameters(remove_duplicate=False)})
    if extra and strict:
        raise KeyError(f"load_into: {path} holds tensors the module does not "
                       f"have: {', '.join(extra[:5])}")
    missing = module.load_state_dict(state, strict=False)
    if strict and missing.missing_keys:
        params = {n for n, _ in module.named_parameters(remove_duplicate=False)}
        absent = [k for k in missing.missing_keys if k in params]
        if absent:
            raise KeyError(f"load_into: {path} lacks parameters "
                           f"{', '.join(absent[:5])}")
    return module
