#!/usr/bin/env python3
"""Regenerates what docs/ shows from the current code, or checks it.

  scripts/refresh-docs.sh [--check] [--all] [BUILD]      (BUILD: build/)

What docs/ holds that the code produces, and how each is kept true:

  reference  docs/reference/*.md: the dialect and pass references that
             mlir-tblgen generates from the .td files (the build's
             mlir-doc target writes them into BUILD/docs).
  cost       docs/img/llama2-7b-64xh100-cost.{json,png}: --strategy=auto's
             JSON cost report of Llama 2 7B on 64 H100s and its plot
             (scripts/cost_plot.py). The compiler is deterministic, so
             --check compares the report byte for byte.
  demo       docs/Training.md's logs of scripts/demo.sh, between
             '<!-- refresh-docs: NAME -->' and '<!-- refresh-docs: end -->'
             lines, with the date, machine and duration of the run. Times
             vary from run to run; --check runs the demo for 50 steps and
             compares every log line with its numbers masked: a line the
             binary now prints that the docs lack, or one they show that it
             no longer prints, is drift.
  trace      docs/img/fsdp-trace.svg and docs/img/zero3-trace.svg: one FSDP
             and one ZeRO-3 step on 2 CPU ranks from the binary's --trace
             (the last of 3 steps, --trace-steps 3:3), drawn by
             scripts/trace_figure.py; regenerated with --all, and --check
             draws them to see that the pipeline works. With --perfetto-ui
             DIR (never in CI: it needs Chromium), also
             docs/img/zero3-perfetto.png, the ZeRO-3 step of the same run in
             the Perfetto UI (scripts/perfetto_screenshot.py says how).

Without --check it publishes 'reference' and 'cost'; --all also reruns the
demo (600 steps, about 4 minutes on 2 cores) and the trace. With --check it
changes nothing and exits 1 naming every difference (ctest's docs.* tests;
CI runs it).
"""

import argparse
import datetime
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE = ["Dialects/TrainOps.md", "TrainPasses.md", "ConversionPasses.md",
             "PipelinesPasses.md"]
COST_MODEL = ["llama2-7b", "--micro-batch=64", "--precision=bf16"]
COST_AUTO = ["--strategy=auto", "--world-size=64", "--device=h100-80gb"]
COST_FILE = "docs/img/llama2-7b-64xh100-cost"
TRAINING = "docs/Training.md"
# Each figure: its file, the strategy's flags, its title.
TRACES = [
    ("docs/img/fsdp-trace.svg", ["--strategy=fsdp"],
     "FSDP, gpt2 4x256, 2 CPU ranks, one step (--overlap, prefetch depth 1)"),
    ("docs/img/zero3-trace.svg", ["--strategy=zero3", "--prefetch-depth=4"],
     "ZeRO-3, gpt2 4x256, 2 CPU ranks, one step (--overlap, prefetch "
     "depth 4)"),
]
# Traced runs take this many steps and trace only the last (warmed up).
TRACE_STEPS = 3
# --perfetto-ui: the figure whose trace is also shown in the Perfetto UI, and
# the screenshot scripts/perfetto_screenshot.py takes of it.
PERFETTO_OF = "docs/img/zero3-trace.svg"
PERFETTO_SHOT = "docs/img/zero3-perfetto.png"
BEGIN = re.compile(r"^<!-- refresh-docs: ([\w-]+) .*-->$")
END = "<!-- refresh-docs: end -->"


def say(text):
    print(f"refresh-docs: {text}", file=sys.stderr)


def run(cmd, **kwargs):
    """Runs cmd from the source root; a failure is fatal, with its output."""
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                          **kwargs)
    if done.returncode != 0:
        say(f"'{' '.join(cmd)}' failed (status {done.returncode}):\n"
            f"{done.stdout}{done.stderr}")
        sys.exit(2)
    return done


def read(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


def write(path, text):
    with open(os.path.join(ROOT, path), "w") as f:
        f.write(text)


def diff(expected, actual, name):
    lines = difflib.unified_diff(expected.splitlines(), actual.splitlines(),
                                 f"{name} (published)", f"{name} (now)",
                                 lineterm="", n=1)
    return "\n".join(list(lines)[:40])


# --- reference -------------------------------------------------------------

def reference(build, check):
    problems = []
    for doc in REFERENCE:
        generated = os.path.join(build, "docs", doc)
        published = os.path.join("docs/reference", os.path.basename(doc))
        if not os.path.isfile(generated):
            say(f"{generated} is missing; build the 'mlir-doc' target first")
            sys.exit(2)
        with open(generated) as f:
            text = f.read()
        if read(published) == text:
            continue
        if check:
            problems.append(f"{published} is not what the .td files generate:"
                            f"\n{diff(read(published), text, published)}")
        else:
            write(published, text)
            say(f"published {published}")
    return problems


# --- cost ------------------------------------------------------------------

def cost(build, check, work):
    mlir = os.path.join(work, "llama2-7b.mlir")
    report = os.path.join(work, "cost.json")
    run([os.path.join(build, "bin/shard-gen"), *COST_MODEL, "-o", mlir])
    run([os.path.join(build, "bin/shard-opt"), *COST_AUTO,
         "--cost-report=json", f"--cost-report-file={report}", mlir,
         "-o", os.devnull])
    with open(report) as f:
        text = f.read()
    published = COST_FILE + ".json"
    if check:
        old = read(published) if os.path.exists(
            os.path.join(ROOT, published)) else ""
        if old != text:
            return [f"{published} (and its plot {COST_FILE}.png) is not the "
                    f"report the compiler writes now:\n"
                    f"{diff(old, text, published)}"]
        return []
    write(published, text)
    run([sys.executable, "scripts/cost_plot.py", report, COST_FILE + ".png",
         "--checkpointing", "none", "--default-schedule"])
    say(f"regenerated {published} and {COST_FILE}.png")
    return []


# --- demo ------------------------------------------------------------------

def demo_logs(steps):
    """Runs scripts/demo.sh; returns ({block: lines}, seconds). 'demo-train'
    is everything before the evaluation binary is compiled (the tokenizer,
    the compiler's plan report, the training run), 'demo-eval' that
    binary's run. Command echoes ('+ ...') are left out."""
    env = dict(os.environ, STEPS=str(steps))
    start = time.monotonic()
    done = subprocess.run(["scripts/demo.sh"], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        say(f"scripts/demo.sh failed (status {done.returncode}):\n"
            f"{done.stdout}")
        sys.exit(2)
    blocks = {"demo-train": [], "demo-eval": []}
    block = "demo-train"
    for line in done.stdout.splitlines():
        if line.startswith("+ "):
            if "--forward-only" in line:
                block = None
            elif block is None and "gpt-eval" in line:
                block = "demo-eval"
            continue
        if block and not line.startswith("shard-gen:"):
            blocks[block].append(line)
    return blocks, seconds


def masked(line):
    """A log line with its figures masked: numbers, and the plural that
    follows a count, so that a 50-step run and a 600-step run compare."""
    line = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", line)
    return re.sub(r"\bN (\w+?)e?s\b", r"N \1", line)


def blocks_of(text):
    """{name: (start, end)} line ranges of the generated blocks of text."""
    found, lines, name = {}, text.splitlines(), None
    for i, line in enumerate(lines):
        if line == END:
            if name:
                found[name] = (start, i)
            name = None
            continue
        match = BEGIN.match(line)
        if match:
            name, start = match.group(1), i
    return found


def code_lines(lines):
    """The lines of the first fenced code block among lines."""
    fences = [i for i, line in enumerate(lines) if line.startswith("```")]
    if len(fences) < 2:
        return []
    return lines[fences[0] + 1:fences[1]]


def render(name, lines, seconds, steps):
    cores = os.cpu_count()
    minutes, secs = divmod(round(seconds), 60)
    today = datetime.date.today().isoformat()
    if name == "demo-train":
        intro = (f"Run on {today} on the {cores}-core build machine (both "
                 f"ranks share the cores, one OpenBLAS thread each), "
                 f"`scripts/demo.sh` ({steps} steps), {minutes} min {secs} s "
                 f"in all, this evaluation binary included. The tokenizer "
                 f"and the compiler's plan report come first, then the run:")
    else:
        intro = "The evaluation binary's run, from the same log:"
    return [f"<!-- refresh-docs: {name} (scripts/refresh-docs.sh --all "
            f"writes this block from scripts/demo.sh) -->", intro, "",
            "```", *lines, "```", END]


def demo(check):
    text = read(TRAINING)
    spans = blocks_of(text)
    missing = [b for b in ("demo-train", "demo-eval") if b not in spans]
    if missing:
        say(f"{TRAINING} has no block {', '.join(missing)} "
            f"('<!-- refresh-docs: NAME ... -->' ... '{END}')")
        sys.exit(2)
    steps = 50 if check else 600
    logs, seconds = demo_logs(steps)
    lines = text.splitlines()
    if check:
        problems = []
        for name, (start, end) in spans.items():
            shown = {masked(l) for l in code_lines(lines[start:end])}
            printed = {masked(l) for l in logs[name]}
            new = sorted(printed - shown)
            gone = sorted(shown - printed)
            if new or gone:
                problems.append(
                    f"{TRAINING}'s block {name} is not what scripts/demo.sh "
                    f"prints now (numbers masked as N):\n" +
                    "".join(f"  printed, not shown: {l}\n" for l in new) +
                    "".join(f"  shown, not printed: {l}\n" for l in gone))
        return problems
    for name, (start, end) in sorted(spans.items(), key=lambda s: -s[1][0]):
        lines[start:end + 1] = render(name, logs[name], seconds, steps)
    write(TRAINING, "\n".join(lines) + "\n")
    say(f"regenerated the demo's logs in {TRAINING} "
        f"({round(seconds)} s)")
    return []


# --- trace -----------------------------------------------------------------

def trace_model(build, work):
    """Writes the model every trace figure runs; returns its path."""
    mlir = os.path.join(work, "gpt.mlir")
    run([os.path.join(build, "bin/shard-gen"), "gpt2-tiny", "--layers=4",
         "--hidden=256", "--micro-batch=8", "-o", mlir])
    return mlir


def step_trace(build, work, mlir, flags, name):
    """Compiles mlir with flags for 2 ranks, runs TRACE_STEPS steps on 2 CPU
    ranks and returns the path of the trace of the last one."""
    binary = os.path.join(work, name)
    trace_json = os.path.join(work, f"{name}.json")
    run([os.path.join(build, "bin/shard-compile"), *flags,
         "--world-size=2", mlir, "-o", binary])
    mpirun = ["mpirun", "--oversubscribe", "-np", "2"]
    if os.geteuid() == 0:
        mpirun.insert(1, "--allow-run-as-root")
    run(mpirun + [binary, "--steps", str(TRACE_STEPS), "--trace", trace_json,
                  "--trace-steps", f"{TRACE_STEPS}:{TRACE_STEPS}"],
        env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    return trace_json


def trace(build, check, work, perfetto_ui=None):
    mlir = trace_model(build, work)
    for i, (figure, flags, title) in enumerate(TRACES):
        trace_json = step_trace(build, work, mlir, flags, f"trace{i}")
        out = os.path.join(work, f"trace{i}.svg") if check else figure
        run([sys.executable, "scripts/trace_figure.py", trace_json, out,
             "--title", title])
        if not check:
            say(f"regenerated {figure}")
        if perfetto_ui and not check and figure == PERFETTO_OF:
            # The screenshot and the SVG show the same step of one run.
            run([sys.executable, "scripts/perfetto_screenshot.py",
                 "--ui", perfetto_ui, "--trace", trace_json, build])
            say(f"took {PERFETTO_SHOT}")
    return []


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.split("\n")[2:]))
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 on any difference")
    parser.add_argument("--all", action="store_true",
                        help="also rerun the demo and the trace")
    parser.add_argument("--only", choices=["reference", "cost", "demo",
                                           "trace"], action="append",
                        help="only these parts (repeatable)")
    parser.add_argument("--perfetto-ui", metavar="DIR",
                        help="with the trace part (not --check): also take "
                        f"{PERFETTO_SHOT} of the ZeRO-3 trace in the Perfetto "
                        "UI build in DIR (scripts/perfetto_screenshot.py)")
    parser.add_argument("build", nargs="?", default="build")
    args = parser.parse_args()
    build = os.path.abspath(os.path.join(ROOT, args.build)
                            if not os.path.isabs(args.build) else args.build)
    parts = args.only or (["reference", "cost", "demo", "trace"]
                          if args.check or args.all else ["reference", "cost"])
    problems = []
    with tempfile.TemporaryDirectory(prefix="refresh-docs.") as work:
        for part in parts:
            if part == "reference":
                problems += reference(build, args.check)
            elif part == "cost":
                problems += cost(build, args.check, work)
            elif part == "demo":
                problems += demo(args.check)
            else:
                problems += trace(build, args.check, work,
                                  args.perfetto_ui)
    for problem in problems:
        say(problem)
    if problems:
        say("run scripts/refresh-docs.sh --all to regenerate docs/ from the "
            "current code")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
