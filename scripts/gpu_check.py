#!/usr/bin/env python3
"""The one-shot device check of the CUDA backend (issue 7; docs/CudaBackend.md)
in two halves, because the GPU machine has nvcc, CMake, ninja and PyTorch
but no LLVM/MLIR (and perhaps no MPI, OpenBLAS, zlib or GoogleTest).
Called as scripts/gpu-check.sh, which runs this file with python3; standard
library only.

  scripts/gpu-check.sh prepare [--bin DIR] [--inputs DIR]
      On the build machine, with the compiler built: compiles the steps
      the check runs into objects (shard-compile --emit=obj), trains the
      tiny GPT on the CPU backend for the reference loss curve and its
      held-out losses (the tiny step carries its evaluation step), tokenizes
      the corpus, and copies GoogleTest's sources; all into DIR
      (default gpu-inputs, git-ignored: carry it to the GPU machine).

  scripts/gpu-check.sh [run] [--inputs DIR] [--build-dir DIR] [--no-build]
                       [--minimal] [--timeout SECONDS] [--budget SECONDS]
                       [--quick]
      On the GPU machine: builds the runtime alone with the CUDA backend
      (build-gpu), runs the CUDA kernels against the CPU backend's, links
      the prepared objects with the CUDA runtime, trains the tiny GPT for
      50 steps against the CPU loss curve and held-out loss, times GPT-2
      small (bf16, seq 1024) and the same step in PyTorch (eager and
      torch.compile, bench/torch_gpt2.py), our three attention kernels per
      call against PyTorch's attention backends, cuDNN's among them
      (bench/torch_attention.py), and prints a table last.
      --no-build    use --build-dir as it is (CI: the project's own build)
      --minimal     configure as a machine without MPI, OpenBLAS, zlib and
                    GoogleTest would (the latter built from the inputs)
      --timeout S   bound on each stage (default 300; each has its own,
                    lower one too, which scales with S: the build's 240 s
                    at 300 are 960 s at 1200, for a slower machine)
      --budget S    bound on the whole run (default 450): later stages get
                    what is left, and the table always comes last
      --quick       fewer timed steps, no torch.compile
      Its logs are under DIR/gpu-check, or $OUT/gpu-check when $OUT is set
      (the device tool's machine), written there as they are made; the
      table is also in table.txt there. A stage that fails is recorded
      and the run goes on to the table; a failed training run is rerun
      for 2 steps with CUDA_LAUNCH_BLOCKING=1 to name the faulting kernel.

Paths on the command line are relative to the repository's root. Without a
GPU every stage that needs one says so and the check exits 0 having
checked nothing on a device (the table says so). Exit status 1: a check
failed; 2: a bad command line, missing inputs or a failed build.

Every tool runs as a process of its own, its output going straight to its
log, so that a run killed at any point leaves its logs; the build, each
test suite and each training or timing run under timeout(1) (TERM, then
KILL 5 s later).
"""

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
import traceback

# The name the check is called by, in its messages (tests match them).
PROG = "gpu-check.sh"

# The steps of the check. The tiny GPT trains in f32 on the shipped corpus;
# GPT-2 small runs in bf16 (f32 masters and AdamW) at seq 1024.
TINY_BATCH = 16
TINY_STEPS = 50
# Its held-out loss every 25 steps, on 4 batches of the corpus's last 10%.
TINY_EVAL = ["--eval-every", "25", "--eval-steps", "4"]
GPT2_BATCH = 8
GPT2_SEQ = 1024

# Launcher variables left in the environment (a PyTorch pod's RANK, Slurm's
# PMI) would turn the plain processes of the check into a rendezvous or a
# refused mpirun launch: the check runs everything as a world of one.
LAUNCHER_VARIABLES = (
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
    "MASTER_PORT", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_SIZE",
    "PMI_RANK", "PMIX_RANK")
# A world of one runs as a plain process; a runtime built with MPI (CI's
# own build) initialises it as a singleton, and the session may be root,
# which Open MPI refuses unless told.
MPI_AS_ROOT = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
KERNEL_TESTS = ("asrt_cuda_kernels_test", "asrt_cuda_device_test")
ATTENTION_VARIANTS = ("gemm", "wmma")  # ASRT_CUDA_ATTENTION, beside flash


class UsageError(Exception):
    """A bad command line, missing inputs or a failed preparation: exit 2."""


def die(message):
    raise UsageError(message)


# ------------------------------------------------------------ processes

def shell_status(returncode):
    """A child's exit status as a shell reports it: 128 + N for signal N."""
    return 128 - returncode if returncode < 0 else returncode


def signal_note(cmd, pid, returncode):
    """The line a shell prints when a signal ends its child (none for
    SIGINT and SIGPIPE), or ''. It names the signal in a log that would
    otherwise just stop."""
    number = -returncode
    if number <= 0 or number in (signal.SIGINT, signal.SIGPIPE):
        return ""
    try:
        name = signal.strsignal(number)
    except (AttributeError, ValueError):  # strsignal: Python 3.8
        name = None
    return f"{PROG}: {pid} {name or f'signal {number}'}  {' '.join(cmd[:5])}\n"


def call(cmd, stdout=None, stderr=None, env=None, cwd=None, signal_log=None):
    """Runs CMD and returns its status as a shell gives it: 128 + N for
    signal N, said as a shell says it in SIGNAL_LOG (else on our stderr);
    127 or 126 and a shell's message (on STDERR) when it cannot start."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        child = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, env=env, cwd=cwd)
    except OSError as e:
        status, why = 126, e.strerror
        if isinstance(e, FileNotFoundError):
            status = 127
            why = "No such file or directory" if "/" in cmd[0] else "command not found"
        message = f"{PROG}: {cmd[0]}: {why}\n".encode()
        target = stdout if stderr == subprocess.STDOUT else stderr
        if target is None:
            sys.stderr.buffer.write(message)
            sys.stderr.flush()
        elif target is not subprocess.DEVNULL:
            target.write(message)
        return status
    returncode = child.wait()
    note = signal_note(cmd, child.pid, returncode)
    if note and signal_log:
        append_text(signal_log, note)
    elif note:
        sys.stderr.write(note)
    return shell_status(returncode)


def call_logged(cmd, log, append=False, env=None, cwd=None, signal_to_log=False):
    """CMD with its stdout and stderr in LOG, which grows as it runs."""
    with open(log, "ab" if append else "wb") as f:
        return call(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                    signal_log=log if signal_to_log else None)


def output_of(cmd, with_stderr=True):
    """CMD's output, with its stderr or without, as text; a shell's
    message in its place when it cannot be started."""
    sys.stdout.flush()
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT if with_stderr else subprocess.DEVNULL)
    except OSError as e:
        not_found = isinstance(e, FileNotFoundError) and "/" not in cmd[0]
        why = "command not found" if not_found else e.strerror
        return f"{PROG}: {cmd[0]}: {why}\n" if with_stderr else ""
    return r.stdout.decode(errors="replace")


def env_with(**extra):
    return dict(os.environ, **extra)


# ----------------------------------------------------- text and files

def lines_with_ends(text):
    """TEXT's lines as head(1) and tail(1) count them: split at newlines
    only, a last line without one included."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def head(text, n):
    return "".join(lines_with_ends(text)[:n])


def tail(text, n):
    return "".join(lines_with_ends(text)[-n:]) if n else ""


def read_text(path):
    """PATH's text, '' when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def append_text(path, text):
    with open(path, "a") as f:
        f.write(text)


def first_error(log):
    """The first error of LOG (else its last line that is not blank), for
    the table: 200 bytes at most, as cut -c1-200 kept."""
    lines = [line.rstrip("\n") for line in lines_with_ends(read_text(log))]
    found = next((line for line in lines
                  if re.search(r"autoshard runtime error|error:|Error", line)), None)
    if found is None:
        filled = [line for line in lines if line.strip(" \t\v\f\r")]
        found = filled[-1] if filled else ""
    return (found or "(no output)").encode()[:200].decode(errors="ignore")


def find_first(top, name, executable=False):
    """The first regular file NAME under TOP (executable by its owner if
    asked), in find(1)'s order: depth first, each directory as read."""
    try:
        entries = list(os.scandir(top))
    except OSError:
        return None
    for entry in entries:
        path = os.path.join(top, entry.name)
        try:
            if entry.name == name and entry.is_file(follow_symlinks=False) and (
                    not executable or entry.stat(follow_symlinks=False).st_mode & stat.S_IXUSR):
                return path
            if entry.is_dir(follow_symlinks=False):
                found = find_first(path, name, executable)
                if found:
                    return found
        except OSError:
            continue
    return None


def remove_tree(path):
    """rm -rf PATH."""
    if os.path.islink(path) or (os.path.exists(path) and not os.path.isdir(path)):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)


def has_torch():
    return call(["python3", "-c", "import torch"], stderr=subprocess.DEVNULL) == 0


# ------------------------------------------------------------- options

class Options:
    def __init__(self):
        self.mode = "run"
        self.inputs = "gpu-inputs"
        self.bin = "build/bin"
        self.build = "build-gpu"
        self.do_build = True
        self.minimal = False
        self.quick = False
        self.timeout_s = 300
        self.budget_s = 450


def parse_args(argv):
    opts = Options()
    args = list(argv)
    if args and args[0] in ("prepare", "run"):
        opts.mode = args.pop(0)
    directories = {"--inputs": "inputs", "--bin": "bin", "--build-dir": "build"}
    bounds = {"--timeout": "timeout_s", "--budget": "budget_s"}
    switches = {"--no-build": ("do_build", False), "--minimal": ("minimal", True),
                "--quick": ("quick", True)}
    while args:
        arg = args.pop(0)
        if arg in directories:
            if not args:
                die(f"{arg} needs a directory")
            setattr(opts, directories[arg], args.pop(0))
        elif arg in bounds:
            if not args or not re.fullmatch(r"[1-9][0-9]*", args[0]):
                die(f"{arg} needs a positive number of seconds")
            setattr(opts, bounds[arg], int(args.pop(0)))
        elif arg in switches:
            setattr(opts, *switches[arg])
        else:
            die(f"unknown argument '{arg}'; see the comment at the top of scripts/gpu_check.py")
    return opts


# ------------------------------------------------------------- prepare

def prepare(opts):
    inputs = opts.inputs
    for tool in ("shard-gen", "shard-compile"):
        if not os.access(f"{opts.bin}/{tool}", os.X_OK):
            die(f"no {opts.bin}/{tool}: build the compiler first (README), or pass --bin")
    remove_tree(inputs)
    try:
        for sub in ("steps", "tok", "ref"):
            os.makedirs(f"{inputs}/{sub}", exist_ok=True)
    except OSError:
        die(f"cannot create '{inputs}'")

    def run_logged(name, cmd, env=None):
        """Runs CMD, keeps its output, fails loudly."""
        log = f"{inputs}/{name}.log"
        if call_logged(cmd, log, env=env) != 0:
            sys.stderr.write(tail(read_text(log), 20))
            die(f"prepare: '{' '.join(cmd)}' failed (log: {log})")

    steps = f"{inputs}/steps"
    shard_gen, shard_compile = f"{opts.bin}/shard-gen", f"{opts.bin}/shard-compile"
    run_logged("tokenize", ["python3", "scripts/tokenize.py",
                            "data/corpus/kjv-genesis-exodus.txt", f"{inputs}/tok"])
    run_logged("gen-tiny", [shard_gen, "gpt2-tiny", f"--micro-batch={TINY_BATCH}",
                            "-o", f"{steps}/tiny.mlir"])
    run_logged("gen-gpt2", [shard_gen, "gpt2-small", f"--micro-batch={GPT2_BATCH}",
                            "--precision=bf16", "-o", f"{steps}/gpt2-small.mlir"])
    # The tiny GPT carries its evaluation step (--with-eval), so that the
    # held-out losses are compared too.
    run_logged("obj-tiny", [shard_compile, "--strategy=ddp", "--world-size=1", "--emit=obj",
                            "--with-eval", f"{steps}/tiny.mlir", "-o", f"{steps}/tiny.o"])
    run_logged("obj-gpt2-small", [shard_compile, "--strategy=ddp", "--world-size=1",
                                  "--emit=obj", f"{steps}/gpt2-small.mlir",
                                  "-o", f"{steps}/gpt2-small.o"])
    # The reference: the same tiny step on the CPU backend, same data.
    run_logged("exe-tiny-cpu", [shard_compile, "--backend=cpu", "--strategy=ddp",
                                "--world-size=1", "--with-eval", f"{steps}/tiny.mlir",
                                "-o", f"{steps}/tiny-cpu"])
    run_logged("ref-tiny", [f"{steps}/tiny-cpu", "--steps", str(TINY_STEPS), "--log-every", "1",
                            "--data", f"{inputs}/tok/train.bin", *TINY_EVAL,
                            "--eval-data", f"{inputs}/tok/val.bin"],
               env=env_with(OPENBLAS_NUM_THREADS="1", **MPI_AS_ROOT))
    shutil.copyfile(f"{inputs}/ref-tiny.log", f"{inputs}/ref/tiny-cpu.log")
    for name in os.listdir(steps):
        if name == "tiny-cpu" or name.endswith(".mlir"):
            os.unlink(f"{steps}/{name}")
    # GoogleTest's sources, for a machine without GoogleTest (Debian ships
    # them in googletest, which the README's setup installs).
    if not os.path.isdir("/usr/src/googletest"):
        die("no /usr/src/googletest: apt install googletest")
    shutil.copytree("/usr/src/googletest", f"{inputs}/googletest", symlinks=True)
    commit = output_of(["git", "rev-parse", "--short", "HEAD"], with_stderr=False).strip() or "?"
    with open(f"{inputs}/PREPARED", "w") as f:
        f.write(f"prepared {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} from {commit}\n"
                f"tiny: gpt2-tiny, f32, micro-batch {TINY_BATCH}, {TINY_STEPS} steps "
                "on the corpus\n"
                f"gpt2-small: bf16, micro-batch {GPT2_BATCH}, seq {GPT2_SEQ}\n")
    size = output_of(["du", "-sh", inputs], with_stderr=False).split("\t")[0].strip()
    print(f"{PROG}: prepared '{inputs}' ({size}); carry it to the GPU machine and run "
          f"scripts/gpu-check.sh there")
    return 0


# ----------------------------------------------------------------- run

class DeviceCheck:
    """The GPU machine's half: each phase records what failed in the
    results (key=value lines for the table) and the run goes on; `skip`
    holds why the phases after a failed build or link cannot run."""

    def __init__(self, opts):
        self.opts = opts
        self.build = opts.build
        self.skip = ""
        self.kernels_status = self.train_status = 0
        self.driver_mismatch = self.launch_status = 0
        self.no_device = False
        self.link_line = ""
        self.nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"

    # -------------------------------------------------------- bookkeeping

    def open_report(self):
        if not os.path.isfile(f"{self.opts.inputs}/PREPARED"):
            die(f"no prepared inputs in '{self.opts.inputs}': run 'scripts/gpu-check.sh "
                "prepare' on the build machine first")
        self.inputs = os.path.abspath(self.opts.inputs)
        self.start = int(time.time())
        self.deadline = self.start + self.opts.budget_s
        try:
            os.makedirs(self.build, exist_ok=True)
        except OSError:
            die(f"cannot create '{self.build}'")
        # On the device tool's machine whatever lands in $OUT comes back:
        # the logs are written there as they are made, so that they return
        # however the run ends (a time limit's SIGKILL included).
        out = os.environ.get("OUT", "")
        self.report = f"{out if out and os.path.isdir(out) else self.build}/gpu-check"
        remove_tree(self.report)
        try:
            os.makedirs(self.report, exist_ok=True)
        except OSError:
            die(f"cannot create '{self.report}'")
        self.results = f"{self.report}/results.txt"
        open(self.results, "w").close()

    def log(self, name):
        return f"{self.report}/{name}"

    def note(self, key, value):
        append_text(self.results, f"{key}={value}\n")

    def stage_time(self, own):
        """Seconds a stage may take: its own bound (scaled by --timeout /
        300), --timeout, and what is left of --budget (keeping 20 s for the
        table), whichever is least; at least 10."""
        scaled = own * self.opts.timeout_s // 300
        left = self.deadline - int(time.time()) - 20
        return max(min(scaled, self.opts.timeout_s, left), 10)

    def stage(self, own, cmd, log, append=False, env=None, cwd=None, signal_to_log=True):
        """CMD as a stage of the check: under timeout(1) for its time (TERM,
        then KILL 5 s later), its output in LOG, and a signal's end too
        unless told (the synchronous rerun's log keeps the binary's own
        words only: the table quotes its first error)."""
        return call_logged(["timeout", "-k", "5", str(self.stage_time(own))] + cmd, log,
                           append=append, env=env, cwd=cwd, signal_to_log=signal_to_log)

    # ------------------------------------------------------------- phases

    def isolate_from_launchers(self):
        for name in LAUNCHER_VARIABLES:
            value = os.environ.pop(name, "")
            if value:
                append_text(self.log("env.log"), f"unset {name}={value}\n")

    def record_machine(self):
        """The machine, before anything is built: a driver older than the
        toolkit shows here already."""
        cxx = os.environ.get("CXX") or "g++"
        torch_version = ("import torch; print('torch', torch.__version__, "
                         "'cuda', torch.version.cuda)")
        parts = [("nvcc", lambda: output_of([self.nvcc, "--version"])),
                 ("c++", lambda: head(output_of([cxx, "--version"]), 1)),
                 ("cmake", lambda: head(output_of(["cmake", "--version"]), 1)),
                 ("nvidia-smi", lambda: head(output_of(["nvidia-smi"]), 15)),
                 ("python", lambda: output_of(["python3", "-c", torch_version]))]
        # Each part as it comes: a tool that hangs (nvidia-smi on a broken
        # driver) leaves the parts before it.
        for title, version in parts:
            append_text(self.log("env.log"), f"== {title}\n")
            append_text(self.log("env.log"), version())

    def build_runtime(self):
        """Configures and builds the runtime alone with the CUDA backend."""
        self.skip = self.configure_and_build()
        if self.skip:
            sys.stderr.write(f"{PROG}: {self.skip} (logs: {self.report})\n")

    def configure_and_build(self):
        """Why the runtime could not be built, or ''."""
        if not os.access(self.nvcc, os.X_OK):
            return "no nvcc on PATH or in /usr/local/cuda/bin"
        configure_log = self.log("configure.log")
        # A world of one needs no MPI: building without it also builds the
        # launch tests, and spares an MPI that lacks MPI_THREAD_MULTIPLE.
        flags = ["-DCMAKE_BUILD_TYPE=Release", "-DAUTOSHARD_ENABLE_CUDA=ON",
                 "-DAUTOSHARD_CUDA_EMU=OFF",
                 f"-DAUTOSHARD_GTEST_SOURCE_DIR={self.inputs}/googletest",
                 "-DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON"]
        if self.opts.minimal:
            flags += ["-DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON",
                      "-DCMAKE_DISABLE_FIND_PACKAGE_ZLIB=ON", "-DAUTOSHARD_USE_OPENBLAS=OFF"]
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        configure = ["cmake", "-S", "runtime", "-B", self.build] + generator + flags
        if call_logged(configure, configure_log) != 0:
            # nvcc rejects a host compiler newer than it knows; it usually works.
            if "unsupported GNU version" not in read_text(configure_log):
                return f"configuring the runtime failed: {first_error(configure_log)}"
            remove_tree(f"{self.build}/CMakeCache.txt")
            remove_tree(f"{self.build}/CMakeFiles")
            if call_logged(configure + ["-DCMAKE_CUDA_FLAGS=-allow-unsupported-compiler"],
                           configure_log, append=True) != 0:
                return f"configuring the runtime failed: {first_error(configure_log)}"
        # Without MPI the runtime also builds a fake training binary that
        # checks how it joins a job (runtime/tests/launch).
        launch_target = []
        if any("fake_train_nompi" in read_text(f"{self.build}/{name}")
               for name in ("build.ninja", "Makefile")):
            launch_target = ["fake_train_nompi"]
        build_log = self.log("build.log")
        if self.stage(240, [
                "cmake", "--build", self.build, "--parallel", "--target", "asrt_cuda_runtime",
                "asrt_cuda_kernels_test", "asrt_cuda_device_test"] + launch_target,
                build_log) != 0:
            return f"building the CUDA runtime and its tests failed: {first_error(build_log)}"
        return ""

    def find_link_line(self):
        """The link line the runtime's build wrote (runtime/CMakeLists.txt)."""
        self.link_line = find_first(self.build, "cuda-link-line.txt") or ""
        if not self.link_line:
            self.skip = (f"no cuda-link-line.txt under '{self.build}': configure it with the "
                         "CUDA toolkit")

    def run_kernel_tests(self):
        """Kernels against the CPU backend, and the device's own tests: one
        process per test suite, so that a kernel fault (fatal, or a sticky
        CUDA error that fails everything after it) costs one suite, not the
        rest."""
        for name in KERNEL_TESTS:
            log = self.log(f"{name}.log")
            test_bin = find_first(self.build, name, executable=True)
            if not test_bin:
                append_text(log, f"[ CRASHED ] {name}: not built\n")
                self.kernels_status = 1
                continue
            open(log, "w").close()
            listed = output_of([test_bin, "--gtest_list_tests"], with_stderr=False)
            suites = [line.split(" ")[0] for line in listed.split("\n")
                      if re.match(r"[^ ]+\.( |$)", line)]
            if not suites:
                append_text(log, f"[ CRASHED ] {name}: --gtest_list_tests listed nothing\n")
                self.kernels_status = 1
            for suite in suites:
                status = self.stage(90, [
                    test_bin, "--gtest_color=no", f"--gtest_filter={suite}*"], log, append=True)
                if status == 0:
                    continue
                self.kernels_status = 1
                # A suite that did not finish: say where it stopped.
                text = read_text(log)
                if not re.search(r"PASSED|FAILED TEST", tail(text, 3)):
                    started = [line for line in text.split("\n") if line.startswith("[ RUN")]
                    append_text(log, f"[ CRASHED ] {suite} status {status} after: "
                                     f"{started[-1] if started else ''}\n")
        self.summarize_kernel_tests()

    def summarize_kernel_tests(self):
        counts = {"OK": 0, "FAILED": 0, "SKIPPED": 0, "CRASHED": 0}
        reason = ""
        failed = []
        for name in KERNEL_TESTS:
            for line in open(self.log(f"{name}.log"), errors="replace"):
                # A test's own result line ("[  FAILED  ] Suite.Test (3 ms)"),
                # not the summary's list, or a suite that did not finish.
                m = (re.match(r"\[\s+(OK|FAILED|SKIPPED)\s+\] (\S+) \(", line) or
                     re.match(r"\[ (CRASHED) \] (\S+)", line))
                if m:
                    counts[m.group(1)] += 1
                    if m.group(1) in ("FAILED", "CRASHED") and len(failed) < 5:
                        failed.append(m.group(2))
                if not reason and "no CUDA device" in line:
                    reason = line.strip()
        text = (f"{counts['OK']} passed, {counts['FAILED']} failed, "
                f"{counts['SKIPPED']} skipped")
        if counts["CRASHED"]:
            text += f", {counts['CRASHED']} suites crashed"
        if failed:
            text += " (" + ", ".join(failed) + ")"
        self.note("kernels", text)
        if reason:
            self.note("no_device", reason)
        self.no_device = bool(reason)

    def run_launch_tests(self):
        """A runtime without MPI: its launch tests (one process, a
        torchrun-style rendezvous, mpirun refused), which need no GPU."""
        if not find_first(self.build, "fake_train_nompi", executable=True):
            return
        log = self.log("launch.log")
        self.launch_status = self.stage(90, [
            "ctest", "-L", "launch", "--timeout", "60", "--output-on-failure"], log,
            cwd=self.build)
        summary = re.findall(r"[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+",
                             read_text(log))
        self.note("launch", "\n".join(summary) if summary else f"see {log}")

    def check_driver(self):
        """The machine as CUDA and the driver see it, for the table. A GPU
        that nvidia-smi lists but CUDA does not (a driver older than the
        toolkit's runtime: cudaErrorInsufficientDriver) is a failed check,
        not "no device"."""
        release = re.search(r"release [0-9.]*", output_of([self.nvcc, "--version"],
                                                          with_stderr=False))
        release = release.group(0) if release else ""
        gpu_list = ""
        if shutil.which("nvidia-smi"):
            gpu_list = output_of(["nvidia-smi", "--query-gpu=name,driver_version",
                                  "--format=csv,noheader"], with_stderr=False).split("\n")[0]
            if gpu_list:
                self.note("gpu", f"{gpu_list} (driver), nvcc {release}")
        if self.no_device and gpu_list:
            why = "\n".join(line[len("no_device="):] for line in
                            read_text(self.results).split("\n") if line.startswith("no_device="))
            sys.stderr.write(f"{PROG}: nvidia-smi lists '{gpu_list}' but CUDA reports no "
                             f"device: {why}\n")
            if "InsufficientDriver" in why:
                sys.stderr.write(f"{PROG}: the driver is older than the CUDA runtime the build "
                                 f"used (nvcc {release})\n")
            self.driver_mismatch = 1

    def link_steps(self):
        """Links the prepared steps with the CUDA runtime."""
        cxx = os.environ.get("CXX") or next(
            (path for path in map(shutil.which, ("g++", "c++", "clang++")) if path), "")
        items = read_text(self.link_line).split("\n")
        if items and items[-1] == "":
            items.pop()
        os.makedirs(f"{self.build}/steps", exist_ok=True)
        for step in ("tiny", "gpt2-small"):
            log = self.log(f"link-{step}.log")
            link = ([cxx, "-o", self.step_binary(step), f"{self.inputs}/steps/{step}.o",
                     "-Wl,--start-group"] + items +
                    ["-Wl,--end-group", "-lstdc++", "-lpthread", "-lm"])
            if call_logged(link, log) != 0:
                self.skip = f"linking {step} failed: {first_error(log)}"
                sys.stderr.write(f"{PROG}: {self.skip} (log: {log})\n")
                break

    def step_binary(self, name):
        return f"{self.build}/steps/{name}"

    def diagnose(self, name, *args):
        """A failed training run again for 2 steps with every launch
        synchronous, so that the error names the kernel that faulted rather
        than the next synchronising call."""
        blocking_log = self.log(f"{name}-blocking.log")
        self.stage(60, [self.step_binary(name), "--steps", "2", *args], blocking_log,
                   env=env_with(CUDA_LAUNCH_BLOCKING="1"), signal_to_log=False)
        return (f"{first_error(self.log(f'{name}.log'))}; synchronous rerun: "
                f"{first_error(blocking_log)}")

    def expect_no_device(self):
        """Without a GPU the binary must say so and fail, never crash."""
        log = self.log("tiny.log")
        status = call_logged([self.step_binary("tiny"), "--steps", "1"], log)
        if status == 0 or status > 128 or "no CUDA device" not in read_text(log):
            sys.stderr.write(f"{PROG}: the CUDA binary did not end with 'no CUDA device' "
                             f"(status {status}; log: {log})\n")
            self.train_status = 1
        self.note("tiny", f"not run: no CUDA device (the binary said so, status {status})")

    def train_tiny(self):
        """The tiny GPT against the CPU backend's loss curve."""
        log, compare_log = self.log("tiny.log"), self.log("tiny-compare.log")
        train, val = f"{self.inputs}/tok/train.bin", f"{self.inputs}/tok/val.bin"
        reference = f"{self.inputs}/ref/tiny-cpu.log"
        status = self.stage(90, [
            self.step_binary("tiny"), "--steps", str(TINY_STEPS), "--log-every", "1",
            "--data", train, *TINY_EVAL, "--eval-data", val], log)
        if status != 0:
            self.note("tiny", f"failed (status {status}): {self.diagnose('tiny', '--data', train)}")
            self.train_status = 1
        elif call_logged(["python3", "test/e2e/Inputs/runs.py", "losses", reference, log,
                          "--steps", str(TINY_STEPS), "--rtol", "1e-3", "--norm-rtol", "1e-2"],
                         compare_log) == 0 and \
                call_logged(["python3", "test/e2e/Inputs/runs.py", "eval-loss", log, "--after",
                             str(TINY_STEPS), reference, "--rtol", "1e-3"],
                            compare_log, append=True) == 0:
            last = tail(read_text(compare_log), 3).replace("\n", " ")
            self.note("tiny", f"{TINY_STEPS} steps, losses and held-out loss within 1e-3 of the "
                              f"CPU backend's, gradient norms within 1e-2 ({last})")
        else:
            last = tail(read_text(compare_log), 1).rstrip("\n")
            self.note("tiny", f"losses differ from the CPU backend's: {last}")
            self.train_status = 1

    def time_gpt2(self, steps):
        """GPT-2 small: every step is logged so that the table takes the
        median over the steps after the first 3, as bench/torch_gpt2.py
        times its steps after 3 warmup steps (the first step pays cuBLAS's
        and CUDA's one-time setup, which --stats-json's mean_step_ms
        includes)."""
        gpt2 = self.step_binary("gpt2-small")
        status = self.stage(120, [
            gpt2, "--steps", str(steps), "--log-every", "1",
            "--stats-json", self.log("gpt2-small.json")], self.log("gpt2-small.log"))
        self.note("gpt2_status", status)
        if status != 0:
            self.note("gpt2_error", self.diagnose("gpt2-small"))
            return
        # The same step with attention on tensor cores instead of the flash
        # kernels (CUDA cores): as cuBLAS batched GEMMs
        # (ASRT_CUDA_ATTENTION=gemm) and as flash kernels through WMMA
        # (wmma). The fastest becomes the default.
        for attention in ATTENTION_VARIANTS:
            status = self.stage(90, [
                gpt2, "--steps", str(steps), "--log-every", "1"],
                self.log(f"gpt2-small-{attention}.log"),
                env=env_with(ASRT_CUDA_ATTENTION=attention))
            self.note(f"{attention}_status", status)
        # Where the step's device time goes: a few more steps with each op's
        # kernels timed on the device (CUDA events), apart from the timed
        # run; for the other two attentions too, whose per-call times go
        # beside PyTorch's attention kernels' (below).
        status = self.stage(60, [
            gpt2, "--steps", "4", "--device-op-times",
            "--stats-json", self.log("gpt2-small-ops.json")], self.log("gpt2-small-ops.log"))
        self.note("ops_status", status)
        for attention in ATTENTION_VARIANTS:
            self.stage(45, [
                gpt2, "--steps", "4", "--device-op-times",
                "--stats-json", self.log(f"gpt2-small-ops-{attention}.json")],
                self.log(f"gpt2-small-ops-{attention}.log"),
                env=env_with(ASRT_CUDA_ATTENTION=attention))

    def time_torch(self, steps):
        """PyTorch on the same GPU: its attention kernels (flash, cuDNN,
        memory-efficient, math) at GPT-2 small's attention shape, whether
        cuDNN's fused attention would beat ours (issue 7); then the same
        GPT-2 step, eager and torch.compile."""
        if has_torch():
            status = self.stage(60, [
                "python3", "bench/torch_attention.py", "--batch", str(GPT2_BATCH),
                "--heads", "12", "--seq", str(GPT2_SEQ), "--head-dim", "64",
                "--json", self.log("attention.json")], self.log("attention.log"))
            self.note("attention_status", status)
        if has_torch():
            # The JSON is written after each mode: eager's numbers stay if
            # torch.compile fails or runs out of time.
            status = self.stage(240, [
                "python3", "bench/torch_gpt2.py", "--model", "gpt2-small",
                "--batch", str(GPT2_BATCH), "--seq", str(GPT2_SEQ),
                "--mode", "eager" if self.opts.quick else "both", "--steps", str(steps),
                "--warmup", "3", "--json", self.log("torch.json")], self.log("torch.log"))
            self.note("torch_status", status)
        else:
            self.note("torch_status", "no torch")

    def train_and_time(self):
        os.environ.update(MPI_AS_ROOT)
        if self.skip:
            self.note("tiny", f"not run: {self.skip}")
            self.train_status = 1
        elif self.no_device:
            self.expect_no_device()
        else:
            self.train_tiny()
            steps = 8 if self.opts.quick else 20
            self.time_gpt2(steps)
            self.time_torch(steps)

    def write_table(self):
        """Prints the table and writes it to table.txt as it goes; False
        when it could not be made."""
        kv = {}
        for line in read_text(self.results).split("\n")[:-1]:
            key, _, value = line.partition("=")
            kv[key] = value
        seconds = int(time.time()) - self.start
        with open(self.log("table.txt"), "w") as table:
            try:
                for line in table_lines(self.report, kv, seconds, GPT2_BATCH):
                    sys.stdout.write(line + "\n")
                    table.write(line + "\n")
            except Exception:
                sys.stdout.flush()
                traceback.print_exc()
                return False
        sys.stdout.flush()
        return True

    def run(self):
        self.open_report()
        self.isolate_from_launchers()
        self.record_machine()
        if self.opts.do_build:
            self.build_runtime()
        if not self.skip:
            self.find_link_line()
        if not self.skip:
            self.run_kernel_tests()
            self.run_launch_tests()
        self.check_driver()
        if not self.skip:
            self.link_steps()
        self.train_and_time()
        if self.skip:
            self.note("stopped", self.skip)
        if not self.write_table():
            return 1
        if self.skip:
            return 2
        failed = (self.kernels_status, self.train_status, self.driver_mismatch, self.launch_status)
        return 1 if any(failed) else 0


# --------------------------------------------------------------- table

def timed_steps(log):
    """The step lines' own times, after 3 warmup steps (see time_gpt2)."""
    timed = []
    for line in open(log, errors="replace"):
        m = re.match(r"step (\d+) loss \S+ ms (\S+)( |$)", line.strip())
        if m and int(m.group(1)) > 3:
            timed.append(float(m.group(2)))
    return sorted(timed)


def attention_per_call(op):
    """Mean device ms per call, less the slowest (the first's setup)."""
    calls, total = op["device_calls"], op["device_ms"]
    if calls > 1 and "device_max_ms" in op:
        return (total - op["device_max_ms"]) / (calls - 1)
    return total / calls


def table_lines(report, kv, seconds, batch):
    """The check's table, line by line, from the results (KV) and the JSON
    and logs in REPORT."""
    yield f"\nCUDA backend device check ({seconds} s; logs in {report})"
    yield f"  kernels vs CPU backend : {kv.get('kernels', '?')}"
    yield f"  tiny GPT vs CPU curve  : {kv.get('tiny', '?')}"
    if "stopped" in kv:
        yield f"  stopped                : {kv['stopped']}"
    if "launch" in kv:
        yield f"  launch without MPI     : {kv['launch']}"
    if "gpu" in kv:
        yield f"  gpu                    : {kv['gpu']}"
    if "no_device" in kv:
        yield f"  skipped: {kv['no_device']}; nothing was checked on a GPU"
        return
    torch = {}
    if os.path.exists(f"{report}/torch.json"):
        torch = json.load(open(f"{report}/torch.json"))
    seq = GPT2_SEQ
    flops = torch.get("flops_per_token")
    peak = (torch.get("matmul_peak") or {}).get("tflops")
    rows = []
    ours = None
    if kv.get("gpt2_status") == "0" and os.path.exists(f"{report}/gpt2-small.json"):
        stats = json.load(open(f"{report}/gpt2-small.json"))
        mean = stats.get("mean_step_ms")
        timed = timed_steps(f"{report}/gpt2-small.log")
        ms = timed[len(timed) // 2] if timed else mean
        if ms:
            ours = ms
            rows.append(("autoshard (cuda)", ms))
            if timed and mean:
                yield (f"  gpt2-small (autoshard) : median of {len(timed)} steps after 3 warmup; "
                       f"mean of all {stats.get('steps')} steps {mean:.2f} ms")
    elif "gpt2_status" in kv:
        yield (f"  gpt2-small (autoshard) : failed, status {kv.get('gpt2_status')}: "
               f"{kv.get('gpt2_error', '')} (log: {report}/gpt2-small.log)")
    for attention in ATTENTION_VARIANTS:
        status = kv.get(f"{attention}_status")
        if status == "0":
            timed = timed_steps(f"{report}/gpt2-small-{attention}.log")
            if timed:
                rows.append((f"autoshard ({attention})", timed[len(timed) // 2]))
        elif status is not None:
            yield (f"  gpt2-small {attention} attn   : status {status}: "
                   f"first error in {report}/gpt2-small-{attention}.log")
    if kv.get("ops_status") == "0" and os.path.exists(f"{report}/gpt2-small-ops.json"):
        profile = json.load(open(f"{report}/gpt2-small-ops.json"))
        steps = max(profile.get("steps") or 1, 1)
        timed_ops = sorted(((op["device_ms"] / steps, name)
                            for name, op in profile.get("ops", {}).items()
                            if "device_ms" in op), reverse=True)
        total = sum(ms for ms, _ in timed_ops)
        yield (f"  gpt2-small device time : {total:.2f} ms of compute per step "
               f"(--device-op-times, {steps} steps, first included); most:")
        for ms, name in timed_ops[:8]:
            yield f"    {name:28}{ms:9.2f} ms {100 * ms / total:5.1f}%"
    elif "ops_status" in kv:
        yield (f"  gpt2-small device time : status {kv.get('ops_status')} "
               f"(log: {report}/gpt2-small-ops.log)")
    # Attention per call, ours (device time of the op, --device-op-times)
    # beside PyTorch's kernels at the same shape (bench/torch_attention.py).
    attn = []
    for variant, path in (("flash", "gpt2-small-ops.json"), ("gemm", "gpt2-small-ops-gemm.json"),
                          ("wmma", "gpt2-small-ops-wmma.json")):
        try:
            ops = json.load(open(f"{report}/{path}")).get("ops", {})
            attn.append((f"autoshard {variant}", attention_per_call(ops["causal_attention_fwd"]),
                         attention_per_call(ops["causal_attention_grad"])))
        except (OSError, ValueError, KeyError, ZeroDivisionError):
            pass
    torch_attn = {}
    if os.path.exists(f"{report}/attention.json"):
        torch_attn = json.load(open(f"{report}/attention.json")).get("backends", {})
    for backend, r in torch_attn.items():
        if "fwd_ms" in r:
            attn.append((f"pytorch {backend}", r["fwd_ms"], r["bwd_ms"]))
    if attn:
        best = min(attn, key=lambda a: a[1] + a[2])
        yield (f"\nCausal attention per call, bf16, batch {batch} x 12 heads x seq {seq} x 64 "
               f"(ours: in the step, the slowest call left out; pytorch: median call)")
        yield f"  {'':18}{'fwd ms':>10}{'bwd ms':>10}{'total':>10}"
        for name, f, b in attn:
            mark = "  fastest" if (name, f, b) == best else ""
            yield f"  {name:18}{f:10.3f}{b:10.3f}{f + b:10.3f}{mark}"
    for backend, r in torch_attn.items():
        if "error" in r:
            yield f"  pytorch {backend:10}not run: {r['error'][:120]}"
    if kv.get("attention_status") not in (None, "0") and not torch_attn:
        yield (f"  pytorch attention      : status {kv.get('attention_status')} "
               f"(log: {report}/attention.log)")
    for mode, m in (torch.get("modes") or {}).items():
        rows.append((f"pytorch {mode}", m["step_ms_median"]))
    if kv.get("torch_status") not in (None, "0"):
        yield (f"  pytorch                : status {kv.get('torch_status')} "
               f"(log: {report}/torch.log)")
    yield (f"\nGPT-2 small, bf16, batch {batch} x seq {seq}"
           + (f"; measured bf16 matmul peak {peak:.0f} TFLOP/s" if peak else ""))
    yield f"  {'':18}{'step ms':>10}{'tokens/s':>12}{'TFLOP/s':>10}{'MFU':>8}{'thru/ours':>10}"
    for name, ms in rows:
        tps = batch * seq / (ms / 1000)
        tf = tps * flops / 1e12 if flops else float("nan")
        mfu = f"{100 * tf / peak:7.1f}%" if peak and flops else "      -"
        rel = f"{ours / ms:9.2f}x" if ours else "         -"
        yield f"  {name:18}{ms:10.2f}{tps:12,.0f}{tf:10.1f}{mfu:>8}{rel}"


# ---------------------------------------------------------------- main

def main(argv):
    # Paths on the command line, and the tools the check runs, are the
    # repository root's.
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    try:
        opts = parse_args(argv)
        if opts.mode == "prepare":
            return prepare(opts)
        return DeviceCheck(opts).run()
    except UsageError as e:
        sys.stdout.flush()
        sys.stderr.write(f"{PROG}: {e}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
