#!/usr/bin/env bash
# Runs the fuzz targets of fuzz/ (cargo fuzz, libFuzzer, nightly Rust) for a
# bounded time each and prints one line of figures per target:
#
#   FUZZ_SECONDS=60 hack/fuzz.sh [TARGET...]     (make fuzz; default: all)
#
# The corpus grows in fuzz/corpus/<target>/ (git-ignored) from the seeds in
# fuzz/seeds/<target>/ (committed); a crashing input is saved in
# fuzz/artifacts/<target>/ and fails the run once every target has run.
# libFuzzer's output is in fuzz/logs/<target>.log.
# Replay one with: cargo +nightly fuzz run <target> <file>.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
seconds=${FUZZ_SECONDS:-60}
toolchain=${FUZZ_TOOLCHAIN:-nightly}

if ! rustup run "$toolchain" rustc --version >/dev/null 2>&1; then
  echo "installing the $toolchain toolchain (cargo fuzz needs it)" >&2
  rustup toolchain install "$toolchain" --profile minimal >&2
fi
fuzz_bin=$("$root/hack/cargo-tool.sh" cargo-fuzz | tail -n1)
export PATH="$(dirname "$fuzz_bin"):$PATH"

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo "+$toolchain" fuzz list)
fi
# Every target at once (the first time: all dependencies, instrumented).
cargo "+$toolchain" fuzz build >&2

files() { if [ -d "$1" ]; then find "$1" -type f | wc -l; else echo 0; fi; }

mkdir -p fuzz/logs
summary=()
failed=0
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$t" "fuzz/seeds/$t"
  log="fuzz/logs/$t.log"
  before=$(files "fuzz/artifacts/$t")
  echo "fuzzing $t for $seconds s (log: $log)" >&2
  rc=0
  cargo "+$toolchain" fuzz run "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -- \
    -max_total_time="$seconds" -print_final_stats=1 >"$log" 2>&1 || rc=$?
  execs=$(awk '/^stat::number_of_executed_units:/ {print $2}' "$log" | tail -n1)
  corpus=$(files "fuzz/corpus/$t")
  crashes=$(( $(files "fuzz/artifacts/$t") - before ))
  if [ "$rc" -ne 0 ]; then
    failed=1
    grep -E "panicked at|^SUMMARY|Test unit written to" "$log" | head -n5 >&2 || true
  fi
  summary+=("$(printf '%-24s %6s s  %12s execs  corpus %6s  new crashes %s  exit %s' \
    "$t" "$seconds" "${execs:-?}" "$corpus" "$crashes" "$rc")")
done
printf '%s\n' "${summary[@]}"
exit "$failed"
