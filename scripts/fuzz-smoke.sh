#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang into build-fuzz and runs each for a short
# while (FUZZ_SECONDS, default 20) on a seed corpus: the sample graphs for the IR parser; the
# run-file target builds its files from the fuzz input (FUZZ_RAW_HDF5=1 adds raw HDF5 bytes). Exit status is non-zero when a fuzzer finds a crash;
# crash inputs are left in build-fuzz/findings/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${LOSSBOUND_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
SECONDS_PER_TARGET="${FUZZ_SECONDS:-20}"
log() { printf '\033[1m[fuzz]\033[0m %s\n' "$*" >&2; }

if ! command -v clang++ >/dev/null 2>&1; then
  log "clang++ is not installed (Debian: clang libclang-rt-14-dev); skipping the fuzz smoke run"
  exit 0
fi
log "configuring $BUILD with clang"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address -fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address" \
  -DLOSSBOUND_FUZZ=ON -DLOSSBOUND_CUDA=OFF -DLOSSBOUND_BENCHMARKS=OFF >/dev/null
cmake --build "$BUILD" --parallel "$(nproc)" \
  --target fuzz_program_parser fuzz_run_file fuzz_run_file_bytes lossbound_make_runfile_fixtures

SEEDS="$BUILD/seeds"
rm -rf "$SEEDS" "$BUILD/findings"
mkdir -p "$SEEDS/program" "$SEEDS/runfile" "$BUILD/findings" "$BUILD/corpus/program" "$BUILD/corpus/runfile"
ASAN_OPTIONS=detect_leaks=0 "$BUILD/tests/core/runfile/lossbound_make_runfile_fixtures" "$SEEDS/runfile"
# Seed graphs: the IR of every sample (when /usr/bin/python3 has h5py) and a tiny hand-written one.
if /usr/bin/python3 -c 'import h5py' 2>/dev/null; then
  /usr/bin/python3 - "$ROOT/samples" "$SEEDS/program" <<'PY'
import glob, os, sys, h5py
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*", "*.h5"))):
    with h5py.File(path, "r") as f:
        for pid in f.get("programs", {}):
            out = os.path.join(sys.argv[2], pid + ".json")
            with open(out, "wb") as o:
                o.write(f["programs"][pid]["graph"][()])
PY
fi
cat > "$SEEDS/program/tiny.json" <<'JSON'
{"format": "lossbound-step-program", "ir_version": 1, "inputs": [{"name": "param:w", "shape": [2], "dtype": "float32"}],
 "nodes": [{"name": "sum_1", "op": "aten.sum.default", "args": [{"ref": "param:w"}, [0, 1.5, {"float": "inf"}, null, true, "s", {"dtype": "bfloat16"}]],
            "kwargs": {"k": {"device": "cpu"}}, "outputs": [{"shape": [], "dtype": "float32"}, null]}],
 "outputs": [{"name": "loss", "ref": {"ref": "sum_1", "index": 0}}]}
JSON

status=0
run() {
  local target="$1" corpus="$2" seeds="$3"; shift 3
  log "running $target for ${SECONDS_PER_TARGET}s"
  if ! ASAN_OPTIONS=detect_leaks=0 "$BUILD/tests/fuzz/$target" "$corpus" "$seeds" \
      -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$BUILD/findings/$target-" "$@" 2>"$BUILD/$target.log"; then
    log "$target FOUND A PROBLEM: see $BUILD/$target.log and $BUILD/findings/"
    tail -40 "$BUILD/$target.log" >&2
    status=1
  else
    grep -E "stat::number_of_executed_units|cov:" "$BUILD/$target.log" | tail -2 >&2
  fi
}
run fuzz_program_parser "$BUILD/corpus/program" "$SEEDS/program"
mkdir -p "$BUILD/corpus/runfile-contents"
run fuzz_run_file "$BUILD/corpus/runfile-contents" "$BUILD/corpus/runfile-contents" -max_len=2048 -len_control=0
# Raw HDF5 bytes reach bugs inside libhdf5 1.10.8 itself within seconds (e.g. an overlapping
# memcpy in H5HG_read on a damaged vlen string): opt in with FUZZ_RAW_HDF5=1.
if [ "${FUZZ_RAW_HDF5:-0}" = 1 ]; then
  run fuzz_run_file_bytes "$BUILD/corpus/runfile" "$SEEDS/runfile"
fi
rm -f /tmp/lossbound-fuzz-[0-9]*.h5  # the files fuzz_run_file wrote (one per process id)
exit $status
