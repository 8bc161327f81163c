"""Checks an exported PyTorch model against PyTorch itself.

  torchcheck.py --bin DIR --mpirun CMD --work DIR --model NAME
                [--strategies ddp,zero1,...] [--worlds 1,2,4] [--steps 20]
                [--precision f32|bf16]

For the model NAME (models.py), exports the training step with
autoshard.torch, writes `--steps` random batches with autoshard.data, and
for every strategy and world size compiles it with shard-compile and runs
it on that many MPI ranks:

  - step 1: the loss and every gradient (--save-grads) against PyTorch
    eager on the same parameters and batch (largest absolute difference over
    the tensor's largest magnitude, within --grad-rtol);
  - --steps steps: every logged loss against a plain PyTorch loop
    (torch.optim.AdamW or SGD with param groups, clip_grad_norm_) on the
    same batches, within --loss-rtol;
  - round trip: the parameters the binary saved, loaded into the module
    with load_state_dict(safetensors.torch.load_file(...)) (with
    autoshard.torch.load_into where the module has buffers, which the file
    does not hold), give the loss that the binary computes from them.

Prints one line per run ending in ": ok" or ": FAIL ..." and a last line
"NAME: all runs agree" only when every run passed; exits 1 otherwise.
"""

import argparse
import copy
import dataclasses
import os
import re
import shlex
import subprocess
import sys

import torch
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402  (puts test/e2e/Inputs on the path)
from opcheck import launcher_for as launcher  # noqa: E402

import autoshard.data  # noqa: E402
import autoshard.torch as at  # noqa: E402

STEP_LINE = re.compile(r"^step (\d+) loss (\S+)", re.M)


def run(cmd, what):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {proc.returncode}): "
                           f"{shlex.join(cmd)}\n{proc.stdout[-3000:]}"
                           f"{proc.stderr[-3000:]}")
    return proc.stdout


def losses(log):
    return {int(s): float(v) for s, v in STEP_LINE.findall(log)}


def rel(a, b):
    """max |a - b| / max |b| (0 when both are 0)."""
    a, b = a.double(), b.double()
    scale = b.abs().max().item()
    diff = (a - b).abs().max().item()
    return diff / scale if scale > 0 else diff


def torch_optimizer(spec, module):
    decay, no_decay = [], []
    for name, p in module.named_parameters():
        (no_decay if any(s in name for s in spec.no_decay) else decay).append(p)
    groups = [{"params": decay, "weight_decay": spec.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    if isinstance(spec, at.AdamW):
        return torch.optim.AdamW(groups, lr=spec.lr, betas=spec.betas,
                                 eps=spec.eps)
    return torch.optim.SGD(groups, lr=spec.lr, momentum=spec.momentum)


def reference(case, steps, precision, perturb=False):
    """(first-step loss, {name: grad}, [loss of each step]) of PyTorch.
    With `perturb`, a reference that the checks must reject: gradients
    scaled by 1 + 1e-4 and the learning rate by 1.05."""
    model = copy.deepcopy(case.module)
    model.train()
    grads, history = None, []
    spec = case.optimizer
    if perturb:
        spec = dataclasses.replace(spec, lr=spec.lr * 1.05)
    opt = torch_optimizer(spec, model)
    for s in range(steps):
        case.before_step(model, s)
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16,
                            enabled=precision == "bf16"):
            loss = case.loss(model, case.batches[s])
        loss.backward()
        if grads is None:
            grads = {n: p.grad.detach().clone() * (1 + 1e-4 * perturb)
                     for n, p in model.named_parameters()}
        if case.optimizer.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(model.parameters(),
                                           case.optimizer.max_grad_norm)
        opt.step()
        history.append(loss.item())
    return history[0], grads, history


def check_run(args, case, step, ref, strategy, world):
    work = os.path.join(args.work, f"{strategy}.np{world}")
    os.makedirs(work, exist_ok=True)
    binary = os.path.join(work, "train")
    run([os.path.join(args.bin, "shard-compile"), f"--strategy={strategy}",
         f"--world-size={world}", "--expose-gradients",
         os.path.join(args.work, "step.mlir"), "-o", binary], "shard-compile")
    mpirun = launcher(args.mpirun, os.path.join(work, "tmp"))
    common = ["--threads", "1", "--log-every", "1", "--data",
              os.path.join(args.work, "data.asdata")]
    grads_file = os.path.join(work, "grads.safetensors")
    log = run(mpirun + ["-np", str(world), binary, "--steps", "1",
                        "--load-params", os.path.join(args.work, "init.st"),
                        "--save-grads", grads_file] + common, "step 1")
    loss1 = losses(log).get(1)
    ref_loss, ref_grads, ref_history = ref
    worst = {"loss": abs(loss1 - ref_loss) / abs(ref_loss)}
    saved = load_file(grads_file)
    worst["grads"] = 0.0
    for name, g in ref_grads.items():
        canonical = step.canonical(name)
        worst["grads"] = max(worst["grads"],
                             rel(saved[canonical + ".grad"], g))
    params_file = os.path.join(work, "final.safetensors")
    log = run(mpirun + ["-np", str(world), binary, "--steps",
                        str(args.steps), "--load-params",
                        os.path.join(args.work, "init.st"),
                        "--save-params", params_file] + common,
              f"{args.steps} steps")
    got = losses(log)
    worst["steps"] = max(abs(got[s + 1] - v) / abs(v)
                         for s, v in enumerate(ref_history))
    # Round trip: the saved parameters in the module, against the binary's
    # own loss from them (its step 1 on the first batch).
    model = copy.deepcopy(case.module)
    if any(True for _ in model.buffers()):
        # The file holds parameters; a persistent buffer (nanoGPT's causal
        # mask) is a constant of the step, not saved: load_into checks the
        # parameters as strictly and leaves the module's buffers.
        at.load_into(model, params_file)
    else:
        model.load_state_dict(load_file(params_file))
    model.train()
    case.before_step(model, 0)
    with torch.no_grad(), torch.autocast(
            "cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
        torch_loss = case.loss(model, case.batches[0]).item()
    log = run(mpirun + ["-np", str(world), binary, "--steps", "1",
                        "--load-params", params_file] + common, "round trip")
    worst["roundtrip"] = abs(losses(log)[1] - torch_loss) / abs(torch_loss)
    limits = {"loss": args.grad_rtol, "grads": args.grad_rtol,
              "steps": args.loss_rtol, "roundtrip": args.grad_rtol}
    bad = [f"{k} {v:.2e} > {limits[k]:.0e}" for k, v in worst.items()
           if not v <= limits[k]]
    text = ", ".join(f"{k} {v:.1e}" for k, v in worst.items())
    verdict = "ok" if not bad else "FAIL " + "; ".join(bad)
    print(f"{case.name} {strategy} on {world}: {text}: {verdict}", flush=True)
    return not bad


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--mpirun", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--model", required=True, choices=sorted(models.MODELS))
    p.add_argument("--strategies", default="ddp,zero1,zero2,zero3,fsdp")
    p.add_argument("--worlds", default="1,2,4")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--precision", default="f32", choices=["f32", "bf16"])
    p.add_argument("--grad-rtol", type=float, default=1e-5)
    p.add_argument("--loss-rtol", type=float, default=1e-4)
    p.add_argument("--perturb", action="store_true",
                   help="check against a wrong reference (must FAIL)")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)

    case = models.MODELS[args.model](args.steps, args.work)
    step = case.export(args.precision)
    step.save(os.path.join(args.work, "step.mlir"),
              os.path.join(args.work, "init.st"))
    autoshard.data.write_batches(os.path.join(args.work, "data.asdata"),
                                 case.batches)
    ref = reference(case, args.steps, args.precision, args.perturb)
    ok = True
    for strategy in args.strategies.split(","):
        for world in (int(w) for w in args.worlds.split(",")):
            try:
                ok &= check_run(args, case, step, ref, strategy, world)
            except (RuntimeError, KeyError) as e:
                print(f"{case.name} {strategy} on {world}: FAIL {e}",
                      flush=True)
                ok = False
    if ok:
        print(f"{case.name}: all runs agree")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
