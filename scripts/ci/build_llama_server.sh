#!/usr/bin/env bash
# Build llama-server from the llama.cpp sources vendored in the llama-cpp-python sdist (PyPI),
# so CI gets a real embedding backend without fetching anything but registry packages.
#
# Idempotent: the binary is cached outside the repo, keyed by the sdist version:
#   ${DSH_CI_CACHE:-$HOME/.cache/dsh-memory-mcp}/llama-server-<version>/llama-server
# A cached binary that answers --version is reused as is (no work at all).
#
# stdout: only the binary's absolute path (last line). Progress goes to stderr.
# Env: DSH_CI_CACHE (cache root), PYTHON (interpreter whose pip downloads the sdist; default python3),
#      LLAMA_BUILD_JOBS (default 2).
# Takes ~5.5 min on 2 cores when not cached.
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION="0.3.36"   # vendors llama.cpp commit 0c1e570 (ggml 0.25.3)

log() { printf '[build_llama_server] %s\n' "$*" >&2; }
die() { printf '[build_llama_server] ERROR: %s\n' "$*" >&2; exit 1; }

CACHE_ROOT="${DSH_CI_CACHE:-$HOME/.cache/dsh-memory-mcp}"
DEST_DIR="$CACHE_ROOT/llama-server-$LLAMA_CPP_PYTHON_VERSION"
BIN="$DEST_DIR/llama-server"
PY="${PYTHON:-python3}"
JOBS="${LLAMA_BUILD_JOBS:-2}"

if [[ -x "$BIN" ]] && "$BIN" --version >/dev/null 2>&1; then
    log "cached binary OK: $BIN"
    printf '%s\n' "$BIN"
    exit 0
fi

# Toolchain: cmake, gcc, g++ (we run as root in CI; install from Debian if missing).
missing=()
for tool in cmake gcc g++ make; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]})); then
    log "missing tools: ${missing[*]}; installing cmake g++ make with apt-get"
    command -v apt-get >/dev/null 2>&1 || die "apt-get not available; install ${missing[*]} by hand"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y --no-install-recommends cmake g++ make >&2; then
        log "apt-get install failed; running apt-get update and retrying"
        apt-get update >&2 || die "apt-get update failed"
        apt-get install -y --no-install-recommends cmake g++ make >&2 || die "apt-get install cmake g++ make failed"
    fi
    for tool in cmake gcc g++ make; do
        command -v "$tool" >/dev/null 2>&1 || die "$tool still missing after apt-get install"
    done
fi
"$PY" -m pip --version >/dev/null 2>&1 || die "'$PY -m pip' does not work; set PYTHON to an interpreter with pip"

mkdir -p "$CACHE_ROOT"
WORK="$(mktemp -d "$CACHE_ROOT/.llama-build.XXXXXX")"
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT

SDIST_DIR="$CACHE_ROOT/sdist"
SDIST="$SDIST_DIR/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz"
if [[ ! -s "$SDIST" ]]; then
    log "downloading llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION sdist (~77 MB)"
    mkdir -p "$SDIST_DIR"
    "$PY" -m pip download --quiet --no-binary :all: --no-deps \
        -d "$WORK/dl" "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" >&2 \
        || die "pip download of llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION failed"
    found="$(find "$WORK/dl" -maxdepth 1 -name 'llama_cpp_python-*.tar.gz' | head -n1)"
    [[ -n "$found" ]] || die "pip download produced no llama_cpp_python-*.tar.gz"
    mv "$found" "$SDIST.part" && mv "$SDIST.part" "$SDIST"
else
    log "using cached sdist $SDIST"
fi

log "unpacking sdist"
tar -xzf "$SDIST" -C "$WORK"
SRC="$WORK/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
[[ -f "$SRC/CMakeLists.txt" ]] || die "no vendored llama.cpp at $SRC"

log "configuring (cmake)"
cmake -S "$SRC" -B "$WORK/build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_OPENSSL=OFF \
    -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=OFF >&2 || die "cmake configure failed"

log "building target llama-server with -j $JOBS (takes several minutes)"
start=$SECONDS
cmake --build "$WORK/build" --target llama-server -j "$JOBS" >&2 || die "cmake build of llama-server failed"
log "build finished in $((SECONDS - start)) s"

built="$WORK/build/bin/llama-server"
[[ -x "$built" ]] || die "build produced no $built"
"$built" --version >&2 || die "freshly built llama-server does not run --version"

# Install atomically: copy next to the destination, then rename.
mkdir -p "$DEST_DIR"
cp "$built" "$BIN.tmp.$$"
chmod 0755 "$BIN.tmp.$$"
mv -f "$BIN.tmp.$$" "$BIN"
log "installed $BIN"
printf '%s\n' "$BIN"
