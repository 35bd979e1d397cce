"""Run a command with every compiled path held to AVX2, as on a CPU without AVX-512 (AMD Zen 1-3, older Intel).

    python benchmarks/as_avx2.py python benchmarks/floor.py --dataset FB15k-237 --rounds 4

Four libraries pick their vector width from the CPU, and each has its own switch:

- PyTorch's vectorised kernels: ``ATEN_CPU_CAPABILITY=avx2``;
- MKL's GEMM: ``MKL_ENABLE_INSTRUCTIONS=AVX2``; OpenBLAS's: ``OPENBLAS_CORETYPE=Haswell``;
- numba (LLVM): ``NUMBA_CPU_NAME=haswell`` *and* ``NUMBA_CPU_FEATURES`` -- the CPU name alone still lets LLVM use
  the host's features, AVX-512 (zmm registers) included. The features passed are this host's, with every AVX-512,
  AVX10 and AMX feature switched off.

The command's environment gets all of them (the caller's own settings of these variables win); numba caches code
per CPU name and features, so the held code is compiled once and kept beside the host's.
"""

from __future__ import annotations

import os
import subprocess
import sys

#: feature name prefixes that widen vectors past AVX2 (or add tile units): switched off for numba
WIDER_THAN_AVX2 = ("avx512", "avx10", "amx", "evex512")


def numba_avx2_features() -> str:
    """This host's LLVM CPU features with every feature wider than AVX2 switched off, as ``NUMBA_CPU_FEATURES``
    takes them (``+avx2,-avx512f,...``)."""
    import llvmlite.binding as llvm

    features = llvm.get_host_cpu_features()
    return ",".join(
        ("-" if name.startswith(WIDER_THAN_AVX2) or not enabled else "+") + name
        for name, enabled in sorted(features.items())
    )


def avx2_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with PyTorch, MKL, OpenBLAS and numba held to AVX2."""
    environment = dict(os.environ if base is None else base)
    held = {
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "OPENBLAS_CORETYPE": "Haswell",
        "NUMBA_CPU_NAME": "haswell",
        "NUMBA_CPU_FEATURES": numba_avx2_features(),
    }
    for name, value in held.items():
        environment.setdefault(name, value)
    return environment


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(f"usage: python {sys.argv[0]} COMMAND [ARGUMENT ...]")
    sys.exit(subprocess.run(sys.argv[1:], env=avx2_environment(), check=False).returncode)


if __name__ == "__main__":
    main()
