"""What the training-binary benchmarks share: running the tools, checking
them, and launching N CPU ranks."""

import os
import subprocess
import sys

# The model the runtime benchmarks train: a GPT-2 small enough for a CPU.
GPT2_4x256 = ["--family=gpt2", "--layers=4", "--hidden=256", "--heads=4",
              "--vocab=2048", "--seq=128", "--max-positions=128"]


def run(cmd, **kwargs):
    """Runs `cmd`; on failure exits naming it, with its output."""
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, **kwargs)
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed with exit code "
                 f"{proc.returncode}:\n{proc.stderr}{proc.stdout}")
    return proc.stdout


def check_tools(bin_dir, tools=("shard-gen", "shard-compile")):
    for tool in tools:
        if not os.access(os.path.join(bin_dir, tool), os.X_OK):
            sys.exit(f"error: {os.path.join(bin_dir, tool)} is not an "
                     "executable; pass the build's bin directory with --bin")


def mpirun_command(mpirun, ranks):
    """mpirun for `ranks` ranks sharing this machine's cores."""
    cmd = [mpirun, "-np", str(ranks), "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


def rank_environment(tmp):
    """One BLAS thread per rank, and mpirun's session directory in `tmp`:
    OpenMPI 4.1 fails to start when two mpiruns create theirs in one
    TMPDIR at the same moment."""
    return dict(os.environ, OPENBLAS_NUM_THREADS="1", TMPDIR=tmp)
