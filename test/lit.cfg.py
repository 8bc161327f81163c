# lit configuration of autoshard's compiler and end-to-end tests.

import os
import subprocess

import lit.formats
from lit.llvm import llvm_config

config.name = "autoshard"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes_extra = []
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "Inputs", "CMakeLists.txt"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.autoshard_obj_root, "test")

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.autoshard_tools_dir, append_path=True)
# The autoshard Python package (python/: the asdata reader and writer, the
# PyTorch front end) for `%python -m autoshard.data` and the test scripts.
llvm_config.with_environment(
    "PYTHONPATH", os.path.join(config.autoshard_src_root, "python"),
    append_path=True)
# Ranks share the machine's cores: one BLAS thread each.
llvm_config.with_environment("OPENBLAS_NUM_THREADS", "1")
llvm_config.add_tool_substitutions(
    ["shard-opt", "shard-compile", "shard-gen"], [config.autoshard_tools_dir])

config.substitutions.append(("%examples", os.path.join(config.autoshard_src_root, "examples")))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%bench", os.path.join(config.autoshard_src_root, "bench")))
config.substitutions.append(("%autoshard_bin", config.autoshard_tools_dir))
config.substitutions.append(("%autoshard_obj", config.autoshard_obj_root))
# A TMPDIR per test (%t.mpi, expanded recursively): OpenMPI 4.1's mpirun
# fails to start ("mkdir ... File exists") when two create their session
# directory in one TMPDIR at the same moment, and lit gives every test the
# same TMPDIR.
config.recursiveExpansionLimit = 4
config.substitutions.append(
    ("%mpirun", "env TMPDIR=%t.mpi {} {}".format(config.mpiexec,
                                               config.mpiexec_flags)))

if config.have_runtime:
    config.available_features.add("runtime")
# Several CPU ranks launched torchrun-style (no mpirun) run on Gloo; the
# launcher is the driver tests' script, which starts ranks 0..N-1 with
# torchrun's variables on 127.0.0.1 and reports how each ended.
if config.have_runtime and getattr(config, "have_gloo", False):
    config.available_features.add("gloo")
config.substitutions.append(
    ("%torchrun_ranks", "sh " + os.path.join(
        config.autoshard_src_root, "runtime", "tests", "driver",
        "torchrun_ranks.sh")))
# shard-compile --backend=cuda-emu links: the CUDA backend on the CUDA
# emulator, which runs without a GPU.
if config.have_runtime and getattr(config, "have_cuda_emu", False):
    config.available_features.add("cuda-emu")
# shard-compile --backend=cuda links (the CUDA toolkit was found), and
# whether a GPU is there to run what it links (nvidia-smi lists one).
if config.have_runtime and config.have_cuda_runtime:
    config.available_features.add("cuda-runtime")
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                                text=True, timeout=60)
        if listed.returncode == 0 and "GPU" in listed.stdout:
            config.available_features.add("cuda-device")
    except (OSError, subprocess.TimeoutExpired):
        pass


def python_imports(module, python=None):
    """Whether %python (or `python`) can import `module` (the reference
    tests need numpy: Debian's python3-numpy for /usr/bin/python3)."""
    try:
        return subprocess.run(
            [python or config.python_executable, "-c", "import " + module],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            timeout=300).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def python_finds(modules, python):
    """Whether `python` finds every one of `modules` without importing it:
    importing torch and transformers takes seconds, a minute on a loaded
    machine, and every lit directory (one ctest each) configures anew. A
    module that is found but broken fails its tests rather than skipping
    them."""
    probe = ("import importlib.util, sys\n"
             "def found(m):\n"
             "    try:\n"
             "        return importlib.util.find_spec(m) is not None\n"
             "    except ImportError:\n"  # a missing parent package
             "        return False\n"
             "sys.exit(0 if all(found(m) for m in sys.argv[1:]) else 1)")
    try:
        return subprocess.run(
            [python, "-c", probe] + modules, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, timeout=300).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


if python_imports("numpy"):
    config.available_features.add("numpy")


# The PyTorch front end's tests (REQUIRES: torch) run with the Python of
# scripts/setup.sh's .venv, which has torch, transformers, safetensors and
# the autoshard package. Without it they are unsupported, which lit reports;
# CI sets AUTOSHARD_REQUIRE_TORCH=1 so that a missing torch fails the run
# instead of skipping the tests it must run.
config.substitutions.append(("%torch_python", config.torch_python))
if python_finds(["torch", "transformers", "safetensors", "autoshard.torch"],
                config.torch_python):
    config.available_features.add("torch")
elif os.environ.get("AUTOSHARD_REQUIRE_TORCH") != "1":
    lit_config.note(
        f"the PyTorch front end's tests (test/torch) are unsupported: "
        f"{config.torch_python} does not have torch, transformers, "
        f"safetensors and autoshard.torch (scripts/setup.sh installs them "
        f"into .venv)")
else:
    lit_config.fatal(
        f"AUTOSHARD_REQUIRE_TORCH=1 but {config.torch_python} does not have "
        f"torch, transformers, safetensors and autoshard.torch: run "
        f"scripts/setup.sh, which installs them into .venv")
