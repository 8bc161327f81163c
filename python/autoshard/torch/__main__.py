"""python3 -m autoshard.torch FILE.py:FACTORY --batch B [--seq T]
       -o step.mlir --params init.safetensors [optimizer options]

FACTORY(batch=B[, seq=T]) returns (module, example_inputs) or
(module, example_inputs, loss): the module whose forward returns the loss
(or an object with .loss), the example batch (first dimension B), and
optionally loss(outputs, *example_inputs). Writes the training step and the
module's initial parameters under their state_dict names."""

import argparse
import importlib.util
import os
import sys

from . import SGD, AdamW, ExportError, export_training_step


def load_factory(spec):
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise SystemExit(f"autoshard.torch: '{spec}' is not FILE.py:FACTORY "
                         f"(e.g. model.py:make)")
    if not os.path.isfile(path):
        raise SystemExit(f"autoshard.torch: {path}: no such file")
    module_spec = importlib.util.spec_from_file_location(
        "autoshard_user_model", path)
    module = importlib.util.module_from_spec(module_spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    module_spec.loader.exec_module(module)
    factory = getattr(module, name, None)
    if not callable(factory):
        raise SystemExit(f"autoshard.torch: {path} defines no function "
                         f"'{name}'")
    return factory


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python3 -m autoshard.torch",
        description="Export a PyTorch module's training step for autoshard.")
    p.add_argument("factory", help="FILE.py:FACTORY")
    p.add_argument("--batch", type=int, required=True,
                   help="global batch (split over the ranks)")
    p.add_argument("--seq", type=int, help="sequence length, passed to the "
                   "factory as seq=")
    p.add_argument("-o", dest="output", required=True, help="step.mlir")
    p.add_argument("--params", required=True, help="init.safetensors")
    p.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--betas", type=float, nargs=2, default=(0.9, 0.999))
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--max-grad-norm", type=float)
    p.add_argument("--no-decay", action="append", default=[],
                   help="a state_dict name substring whose parameters are "
                        "not decayed (repeatable: --no-decay bias)")
    p.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    args = p.parse_args(argv)
    if args.batch <= 0:
        p.error(f"--batch must be positive, got {args.batch}")

    factory = load_factory(args.factory)
    kwargs = {"batch": args.batch}
    if args.seq is not None:
        kwargs["seq"] = args.seq
    made = factory(**kwargs)
    if not isinstance(made, tuple) or len(made) not in (2, 3):
        raise SystemExit(f"autoshard.torch: {args.factory} returned "
                         f"{type(made).__name__}; it must return (module, "
                         f"example_inputs) or (module, example_inputs, loss)")
    module, inputs = made[0], made[1]
    loss = made[2] if len(made) == 3 else None
    if args.optimizer == "adamw":
        opt = AdamW(lr=args.lr, betas=tuple(args.betas), eps=args.eps,
                    weight_decay=args.weight_decay,
                    max_grad_norm=args.max_grad_norm,
                    no_decay=tuple(args.no_decay))
    else:
        opt = SGD(lr=args.lr, momentum=args.momentum,
                  weight_decay=args.weight_decay,
                  max_grad_norm=args.max_grad_norm,
                  no_decay=tuple(args.no_decay))
    try:
        step = export_training_step(module, inputs, loss=loss, optimizer=opt,
                                    precision=args.precision)
    except ExportError as e:
        print(e, file=sys.stderr)
        return 1
    step.save(args.output, args.params)
    roles = ", ".join(f"{n} {list(s)} ({'label' if n in step.labels else 'input'})"
                      for n, (s, _) in step.inputs.items())
    print(f"autoshard.torch: wrote {args.output} ({len(step.params)} "
          f"parameters, {sum(t.numel() for t in step.params.values())} "
          f"elements; inputs {roles}) and {args.params}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
