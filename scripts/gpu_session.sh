#!/usr/bin/env bash
# Every device check of the GPU issue in one run, for a session lent a GPU machine (the device tool runs commands in
# the repository root; $OUT comes back). The machine has PyTorch, Triton, numba and pandas but no network: build a
# wheelhouse of the test extras here first and carry it:
#
#     pip download --dest wheelhouse --only-binary=:all: pykeen==1.11.1 lightning hypothesis scipy matplotlib \
#         torch_geometric torchkge tabulate jinja2 pytest pytest-xdist tbb      # then drop torch / nvidia wheels
#     run: bash scripts/gpu_session.sh          (carry: ["wheelhouse"], timeout_s <= 600)
#
# Each step writes its own file under $OUT and a failing step does not stop the others.
set -uo pipefail
OUT="${OUT:-/tmp/gpu_session}"
mkdir -p "$OUT"
step() { local name=$1; shift; echo "== $name: $*"; timeout "${STEP_SECONDS:-240}" "$@" > "$OUT/$name.txt" 2>&1;
         echo "   exit $? ($(tail -n 1 "$OUT/$name.txt"))"; }

{ nvidia-smi; python -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda,
  'triton', triton.__version__, torch.cuda.get_device_name())"; } > "$OUT/device.txt" 2>&1
if [ -d wheelhouse ]; then
    python -m pip install --quiet --no-index --find-links wheelhouse -e ".[test]" pytest-xdist > "$OUT/install.txt" 2>&1
fi
export KGEVAL_SHARED_DATA="${KGEVAL_SHARED_DATA:-$PWD/../shared/data}"

step pytest_cuda python -m pytest -m cuda -q -p no:cacheprovider
step syncs python benchmarks/syncs.py --dataset FB15k-237 --triples 1000 --profile-dir "$OUT"
step gpu_fb15k python benchmarks/gpu.py --part fb15k --repeats 3
step gpu_wikikg2 python benchmarks/gpu.py --part wikikg2 --skip-pykeen --repeats 1
step pytest_all python -m pytest -q -p no:cacheprovider -x
step pytest_n_auto python -m pytest -q -p no:cacheprovider -n auto
