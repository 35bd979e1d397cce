#!/usr/bin/env bash
# The device checks of the GPU issue, for a session lent a GPU machine, in parts that each fit one device call
# (600 s at most; the whole loan is 15 minutes, each start about one):
#
#   here, once:   bash scripts/gpu_session.sh prepare
#                 -> wheelhouse/ (the test packages the device lacks: it has torch, triton, numba, pandas and no
#                    network) and shared/data/FB15k-237 (a copy of the shared dataset; shared/ travels with the
#                    checkout, and is git-ignored: FB15k-237's licence keeps it out of the repository)
#   device call:  bash scripts/gpu_session.sh quick      (carry: ["wheelhouse"])  device, `pytest -m cuda`, syncs,
#                                                         FB15k-237 figures; ~5 minutes
#   device call:  bash scripts/gpu_session.sh wikikg2    the wikikg2-sized figures
#   device call:  bash scripts/gpu_session.sh suite      the whole suite, then again under -n auto (what is left of
#                                                         600 s)
#
# Every step writes $OUT/<step>.txt; a failing step does not stop the others.
set -uo pipefail
OUT="${OUT:-/tmp/gpu_session}"
mkdir -p "$OUT"
export KGEVAL_SHARED_DATA="${KGEVAL_SHARED_DATA:-$PWD/shared/data}"

step() {  # step NAME SECONDS COMMAND...
    local name=$1 seconds=$2
    shift 2
    echo "== $name: $*"
    timeout "$seconds" "$@" > "$OUT/$name.txt" 2>&1
    echo "   exit $? -- $(tail -n 1 "$OUT/$name.txt")"
}

install() {
    [ -d wheelhouse ] || return 0
    python -m pip install --quiet --no-deps --no-build-isolation -e . > "$OUT/install.txt" 2>&1
    python -m pip install --quiet --no-index --find-links wheelhouse wheelhouse/*.whl >> "$OUT/install.txt" 2>&1
}

#: packages the device has, or that are too large to carry (their tests skip without them)
SKIPPED='torch|triton|numba|llvmlite|numpy|pandas|nvidia-|ruff|mypy|dicee|py-tgb|pyarrow|polars|scipy|matplotlib'
SKIPPED+='|scikit|pillow|sympy|networkx|fonttools|kiwisolver|contourpy|jinja2|markupsafe|sqlalchemy|alembic|optuna'
SKIPPED+='|tiktoken|regex|mpmath|fsspec|filelock|aiohttp|yarl|multidict|frozenlist|propcache|setuptools'

case "${1:-quick}" in
prepare)
    # the packages of this environment the device lacks, without their pins (the device's torch stays)
    # (the 64 MiB a call carries leave out the large optional ones: their tests skip without them; binary wheels
    # are this machine's Python's -- a device on another Python version takes the pure-Python ones only)
    python -m pip freeze --exclude-editable | grep -viE "^($SKIPPED)" > /tmp/gpu_wheels.txt
    python -m pip wheel --quiet --no-deps --wheel-dir wheelhouse -r /tmp/gpu_wheels.txt  # sdists built here
    du -sh wheelhouse
    mkdir -p shared/data && cp -r "${KGEVAL_SHARED_DATA_SOURCE:-../shared/data}/FB15k-237" shared/data/
    ;;
quick)
    { nvidia-smi; python -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda,
      'triton', triton.__version__, torch.cuda.get_device_name())"; } > "$OUT/device.txt" 2>&1
    install
    step pytest_cuda 150 python -m pytest -m cuda -q -p no:cacheprovider
    step syncs 90 python benchmarks/syncs.py --dataset FB15k-237 --triples 1000 --profile-dir "$OUT"
    step gpu_fb15k 200 python benchmarks/gpu.py --part fb15k --repeats 3
    ;;
wikikg2)
    step gpu_wikikg2 560 python benchmarks/gpu.py --part wikikg2 --skip-pykeen --repeats 1
    ;;
suite)
    install
    step pytest_all 330 python -m pytest -q -p no:cacheprovider
    step pytest_n_auto 230 python -m pytest -q -p no:cacheprovider -n auto
    ;;
*)
    echo "usage: bash scripts/gpu_session.sh prepare|quick|wikikg2|suite" >&2
    exit 2
    ;;
esac
