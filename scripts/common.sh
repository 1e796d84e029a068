# Shared by the two quick-start commands: install what is missing (Debian packages only), then
# configure and build. Sourced, not run.
set -euo pipefail

LOSSBOUND_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${LOSSBOUND_BUILD_DIR:-$LOSSBOUND_ROOT/build}"

# Debian 12 packages Lossbound needs to build, test and regenerate its samples (python3-torchvision:
# the zoo tests record torchvision models, tests/zoo/zoo.py). python3-venv
# (ensurepip, which Debian splits off) is for the PyTorch 2.x venv of scripts/torch2-env.sh.
# openmpi-bin and libopenmpi-dev build `lossbound-cli analyze --mpi` and run its tests
# (docs/cluster.md); without them the build leaves --mpi out and those tests are skipped.
LOSSBOUND_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  qt6-base-dev qt6-svg-dev libqcustomplot-dev libgl-dev
  libhdf5-dev hdf5-tools libeigen3-dev libmpfr-dev libgmp-dev libboost-dev nlohmann-json3-dev
  python3 python3-torch python3-torchvision python3-h5py python3-numpy python3-venv
  clang libclang-rt-14-dev clang-format-14
  openmpi-bin libopenmpi-dev
)

# Each line carries the seconds since the script started (bash's SECONDS), so a CI log shows what
# each stage took.
lb_log() { printf '\033[1m[lossbound %ss]\033[0m %s\n' "$SECONDS" "$*" >&2; }

lb_install_missing() {
  local missing=()
  for p in "${LOSSBOUND_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    lb_log "all Debian packages are installed"
    return 0
  fi
  if [ "$(id -u)" -ne 0 ]; then
    lb_log "missing Debian packages: ${missing[*]}"
    lb_log "run this as root (or with sudo), then run this command again:"
    echo "  apt-get update && apt-get install -y ${missing[*]}"
    exit 1
  fi
  lb_log "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

lb_configure() {
  local extra=()
  # CUDA is optional; it is not a Debian package here, so use the toolkit where it is installed.
  if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    extra+=("-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc")
  fi
  # Device code for one architecture, not CMakeLists.txt's five: nvcc spends ~2.5 min of one core
  # per architecture on gpu/interval_kernels.cu. With a GPU, its own (`native`); without one,
  # sm_75 with compute_75 PTX, which the driver compiles for any newer GPU at first launch. Set
  # LOSSBOUND_CUDA_ARCHITECTURES to choose (e.g. "75;80;86;89;90" for a binary to ship).
  local archs="${LOSSBOUND_CUDA_ARCHITECTURES:-}"
  if [ -z "$archs" ]; then
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
      archs=native
    else
      archs=75
    fi
  fi
  extra+=("-DCMAKE_CUDA_ARCHITECTURES=$archs")
  # Warnings are errors for the project's own builds and CI (a consumer's plain build: OFF). The
  # build is Release (-O3), as a user's plain `cmake -DCMAKE_BUILD_TYPE=Release` is: -O3 reaches
  # warnings that -O2 does not (GCC 12's false -Wrestrict, bug 105651, was one). The interval
  # core emulates directed rounding without the FPU's rounding mode (core/interval/rounding.h) and
  # GCC does not reassociate floating-point code without -ffast-math, so -O3 gives the same
  # envelopes as -O2 (bench/envelope_fingerprint.sh compares them).
  cmake -S "$LOSSBOUND_ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DLOSSBOUND_WERROR=ON "${extra[@]}" "$@"
}

lb_build() {
  cmake --build "$BUILD_DIR" --parallel "$(nproc)" "$@"
}

# The sanitizer trees build at -O1 with line tables only (-g1: file and line in every report's
# stack): GCC's -O2 -g with ASan and UBSan took twice as long (elementwise_ops.cpp: 54 s against
# 25 s), most of CI's time. NDEBUG as in the Release tree, so both run the same code.
LB_SANITIZE_OPT="-O1 -g1 -DNDEBUG"

# Sanitizers: the core tests (ctest label sanitize: every core-labelled Qt test except the
# minutes-long sample analyses, see lossbound_add_test) built with ASan + UBSan in their own tree
# (default build-asan; UBSan aborts on the first report) and run there. The CLI tests are not
# included: lossbound-cli links the widgets, which would double the build.
lb_sanitize_stage() {
  local dir="${LOSSBOUND_ASAN_DIR:-$LOSSBOUND_ROOT/build-asan}"
  lb_log "ASan+UBSan: the core tests (ctest -L sanitize) in $dir"
  BUILD_DIR="$dir" lb_configure -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOSSBOUND_SANITIZE=address \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$LB_SANITIZE_OPT" -DLOSSBOUND_CUDA=OFF \
    -DLOSSBOUND_BENCHMARKS=OFF "$@"
  BUILD_DIR="$dir" lb_build --target sanitize-tests
  ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}" \
    UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}" \
    ctest --test-dir "$dir" -L sanitize --output-on-failure --timeout 900 -j "$(nproc)"
}

# ThreadSanitizer: the tests that run work on several threads (ctest label tsan: the thread pool
# and the analyzer's parallel steps) in their own tree (default build-tsan); a reported race fails
# the test (halt_on_error). Qt is not instrumented: reports through Qt Core are suppressed
# (tests/tsan.supp says why).
lb_tsan_stage() {
  local dir="${LOSSBOUND_TSAN_DIR:-$LOSSBOUND_ROOT/build-tsan}"
  lb_log "TSan: the multi-threaded tests (ctest -L tsan) in $dir"
  BUILD_DIR="$dir" lb_configure -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOSSBOUND_SANITIZE=thread \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$LB_SANITIZE_OPT" -DLOSSBOUND_CUDA=OFF \
    -DLOSSBOUND_BENCHMARKS=OFF "$@"
  BUILD_DIR="$dir" lb_build --target tsan-tests
  TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$LOSSBOUND_ROOT/tests/tsan.supp}" \
    ctest --test-dir "$dir" -L tsan --output-on-failure --timeout 900 -j 1
}
