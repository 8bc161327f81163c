#!/usr/bin/env python3
"""Runs the cases of a strategies table (strategies.cases) for strategies.test.

  strategies.py CASES --tmp PREFIX --mpirun "MPIRUN..." --examples DIR
                [--only NAME ...] [--dry-run]

For each model of the table, the IR is made and a world-size-1 baseline
compiled and trained 3 steps. For each case, its binary is compiled with
the case's strategy, world size and flags, trained 3 steps on as many ranks,
its manifest printed, and its checks run by runs.py against the baseline.
Every case runs even when an earlier one failed; the failures are listed by
case name at the end (exit status 1). Files are PREFIX.NAME.*; --dry-run
prints the commands instead of running them.
"""

import argparse
import os
import shlex
import subprocess
import sys

RUNS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs.py")
STEPS = 3
RTOL = "1e-5"
CHECKS = ("losses", "params", "traffic")


class CaseFailed(Exception):
    pass


def fields(line, count, where):
    parts = [p.strip() for p in line.split("|")]
    if len(parts) != count:
        sys.exit(f"{where}: expected {count} '|'-separated fields, got "
                 f"{len(parts)}")
    return parts


def read_table(path):
    """The table's models (name -> (source, norm)) and cases, in order."""
    models, cases = {}, []
    with open(path) as f:
        for number, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            where = f"{path}:{number}"
            kind, _, rest = line.partition(" ")
            if kind == "model":
                name, source, norm = fields(rest, 3, where)
                if norm not in ("max", "frobenius"):
                    sys.exit(f"{where}: norm '{norm}' is not max or frobenius")
                models[name] = (source, norm)
            elif kind == "case":
                name, model, strategy, world, flags, checks, traffic = fields(
                    rest, 7, where)
                if model not in models:
                    sys.exit(f"{where}: case {name}: no model '{model}' above")
                unknown = set(checks.split()) - set(CHECKS)
                if unknown or not checks.split():
                    sys.exit(f"{where}: case {name}: checks '{checks}' are "
                             f"not among {' '.join(CHECKS)}")
                if any(c["name"] == name for c in cases):
                    sys.exit(f"{where}: case {name} is listed twice")
                cases.append(dict(name=name, model=model, strategy=strategy,
                                  world=int(world), flags=flags.split(),
                                  checks=checks.split(),
                                  traffic=traffic.split()))
            else:
                sys.exit(f"{where}: a line starts with 'model' or 'case'")
    return models, cases


class Runner:
    def __init__(self, args):
        self.prefix = args.tmp
        self.mpirun = shlex.split(args.mpirun)
        self.examples = args.examples
        self.dry_run = args.dry_run

    def path(self, *parts):
        return ".".join((self.prefix,) + parts)

    def run(self, label, command, stdout_path=None):
        shown = " ".join(shlex.quote(c) for c in command)
        if stdout_path:
            shown += " > " + shlex.quote(stdout_path)
        print(f"[{label}] {shown}", flush=True)
        if self.dry_run:
            return
        if stdout_path:
            with open(stdout_path, "w") as out:
                result = subprocess.run(command, stdout=out)
        else:
            result = subprocess.run(command)
        if result.returncode != 0:
            raise CaseFailed(f"'{shown}' exited with status "
                             f"{result.returncode}")

    def train(self, label, ranks, binary, name):
        """Trains `binary` for the steps on `ranks` ranks, saving NAME's
        log and params."""
        self.run(label, self.mpirun + ["-np", str(ranks), binary, "--steps",
                                       str(STEPS), "--save-params",
                                       self.path(name, "st")],
                 self.path(name, "log"))

    def model(self, name, source, norm):
        """The model's IR and its baseline run."""
        label = f"model {name}"
        ir = self.path(name, "mlir")
        if source.startswith("%examples/"):
            ir = os.path.join(self.examples, source[len("%examples/"):])
        else:
            self.run(label, shlex.split(source), ir)
        base = self.path(name, "base")
        self.run(label, ["shard-compile", "--world-size=1", ir, "-o", base])
        self.train(label, 1, base, name + ".base")
        return ir

    def case(self, case, ir, norm):
        label = f"case {case['name']}"
        name, world = case["name"], case["world"]
        binary = self.path(name)
        self.run(label, ["shard-compile", f"--strategy={case['strategy']}",
                         f"--world-size={world}"] + case["flags"] +
                 [ir, "-o", binary])
        self.train(label, world, binary, name)
        manifest = self.path(name, "manifest")
        self.run(label, self.mpirun + ["-np", str(world), binary,
                                       "--print-manifest"], manifest)
        base = case["model"] + ".base"
        python = [sys.executable, RUNS]
        if "losses" in case["checks"]:
            self.run(label, python + ["losses", self.path(base, "log"),
                                      self.path(name, "log"), "--steps",
                                      str(STEPS), "--rtol", RTOL])
        if "params" in case["checks"]:
            norm_flags = ["--norm", norm] if norm != "max" else []
            self.run(label, python + ["params", self.path(base, "st"),
                                      self.path(name, "st"), "--rtol",
                                      RTOL] + norm_flags)
        if "traffic" in case["checks"]:
            self.run(label, python + [
                "traffic", self.path(name, "log"), "--manifest", manifest,
                "--strategy", case["strategy"], "--world", str(world)] +
                case["traffic"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases")
    parser.add_argument("--tmp", required=True)
    parser.add_argument("--mpirun", required=True)
    parser.add_argument("--examples", required=True)
    parser.add_argument("--only", nargs="+", metavar="NAME")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()

    models, cases = read_table(args.cases)
    if args.only:
        missing = set(args.only) - {c["name"] for c in cases}
        if missing:
            sys.exit(f"--only: no case {', '.join(sorted(missing))}")
        cases = [c for c in cases if c["name"] in args.only]
    runner = Runner(args)
    failed = []
    irs = {}
    for name in sorted({c["model"] for c in cases},
                       key=list(models).index):
        source, norm = models[name]
        try:
            irs[name] = runner.model(name, source, norm)
        except CaseFailed as e:
            failed.append(f"model {name} (every case of it): {e}")
    for case in cases:
        if case["model"] not in irs:
            continue
        try:
            runner.case(case, irs[case["model"]], models[case["model"]][1])
            print(f"PASS: case {case['name']}", flush=True)
        except CaseFailed as e:
            print(f"FAIL: case {case['name']}: {e}", flush=True)
            failed.append(f"case {case['name']}: {e}")
    if failed:
        sys.exit("strategies: failed:\n  " + "\n  ".join(failed))
    print(f"strategies: {len(cases)} cases passed")


if __name__ == "__main__":
    main()
