#!/usr/bin/env bash
# Installs every Debian package profagent needs (idempotent) and checks what it cannot install.
# Usage: scripts/setup.sh            (called by scripts/demo.sh and scripts/test.sh)
#        scripts/setup.sh --fuzz     also what scripts/fuzz.sh needs (clang, libFuzzer, sanitizers)
set -euo pipefail
FUZZ=0
[[ "${1:-}" == "--fuzz" ]] && FUZZ=1

PKGS=(
  bazel-bootstrap        # Bazel 4.2.3, builds offline with the WORKSPACE overrides
  g++ gcc
  protobuf-compiler libprotobuf-dev
  libabsl-dev
  libcli11-dev
  catch2
  nlohmann-json3-dev
  libunwind-dev
  openmpi-bin libopenmpi-dev
  gfortran               # mpifort: the Fortran MPI test programs
)
# scripts/fuzz.sh only: the gcc build and `bazel test //...` never need clang.
FUZZ_PKGS=(
  clang                  # clang 14 on Debian 12
  libclang-rt-14-dev     # libFuzzer, ASan and UBSan runtimes for clang 14
)
if ((FUZZ)); then PKGS+=("${FUZZ_PKGS[@]}"); fi

missing=()
for p in "${PKGS[@]}"; do
  [[ "$p" == \#* ]] && continue
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
problems=0
for f in include/cuda_runtime_api.h include/cupti.h include/nccl.h include/nvtx3/nvToolsExt.h bin/nvcc; do
  if [[ ! -e "$CUDA_HOME/$f" ]]; then
    echo "setup: missing $CUDA_HOME/$f: install the CUDA 13 toolkit (with CUPTI and NCCL headers) or set CUDA_HOME" >&2
    problems=1
  fi
done
TOOLS=(bazel protoc mpirun)
if ((FUZZ)); then TOOLS+=(clang); fi
for t in "${TOOLS[@]}"; do
  command -v "$t" >/dev/null || { echo "setup: $t not found after installation" >&2; problems=1; }
done
if ((problems)); then
  echo "setup: cannot continue (see above)" >&2
  exit 1
fi
echo "setup: ok (bazel, protobuf $(protoc --version | awk '{print $2}'), OpenMPI $(mpirun --version 2>/dev/null | head -1 | awk '{print $NF}'), CUDA toolkit at $CUDA_HOME)"
