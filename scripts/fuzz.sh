#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang in build-fuzz/ and runs each in turn for
# a set time (docs/fuzzing.md), printing per target the inputs executed, the corpus size and any
# crash, leak, timeout or out-of-memory input; exits 1 if any target found one.
#   scripts/fuzz.sh [--seconds N] [--build DIR] [target ...]     (default 60 s each, all targets)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=60
build="$root/build-fuzz"
targets=()
all=(fuzz_idx fuzz_cifar10 fuzz_safetensors fuzz_glue fuzz_vocab fuzz_checkpoint)
usage() { sed -n '2,5s/^# \{0,1\}//p' "$0"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) [ $# -ge 2 ] && [[ "$2" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: --seconds needs a whole number > 0" >&2; exit 2; }
               seconds=$2; shift 2 ;;
    --build) [ $# -ge 2 ] || { echo "fuzz.sh: --build needs a folder" >&2; exit 2; }
             build=$(realpath -m "$2"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    fuzz_*) [[ " ${all[*]} " == *" $1 "* ]] || { echo "fuzz.sh: unknown target '$1' (${all[*]})" >&2; exit 2; }
            targets+=("$1"); shift ;;
    *) echo "fuzz.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
command -v clang >/dev/null || { echo "fuzz.sh: clang not found (scripts/install_deps.sh installs it)" >&2; exit 2; }

mkdir -p "$build/logs"
echo "fuzz.sh: configuring and building in $build (log: $build/logs/build.log)"
if ! { CC=clang cmake -S "$root" -B "$build" -DAB_FUZZ=ON -DAB_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
       cmake --build "$build" --target "${targets[@]}" -j"$(nproc)"; } >"$build/logs/build.log" 2>&1; then
  tail -n 20 "$build/logs/build.log" >&2
  echo "fuzz.sh: the build failed (is add_subdirectory(tests/fuzz) in CMakeLists.txt, and does clang link -fsanitize=fuzzer?)" >&2
  exit 2
fi

# Limits: a reader must take memory for the bytes a file holds, not what its header claims, so
# one allocation over 512 MB (or a process over 512 MB) is a finding, as is an input over 10 s.
limits=(-rss_limit_mb=512 -malloc_limit_mb=512 -timeout=10)
# AddressSanitizer keeps 256 MB of freed memory in quarantine by default, which takes a target
# to ~400 MB of RSS in a few minutes; 64 MB still catches a use after free and leaves the 512 MB
# limit to the readers (a quarantine setting of the caller's own, later in the list, wins).
export ASAN_OPTIONS="quarantine_size_mb=64${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
failed=0
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t" artifacts="$build/artifacts/$t" log="$build/logs/$t.log"
  mkdir -p "$corpus" "$artifacts"
  stamp=$(mktemp "$build/logs/.stamp.XXXXXX")
  dict=()
  [ -f "$root/tests/fuzz/$t.dict" ] && dict=(-dict="$root/tests/fuzz/$t.dict")
  echo "fuzz.sh: $t for ${seconds} s (log: $log)"
  # the corpus folder comes first: new inputs go there, the committed seeds stay as they are
  "$build/tests/fuzz/$t" -max_total_time="$seconds" "${limits[@]}" -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "${dict[@]}" "$corpus" "$root/tests/fuzz/seeds/$t" >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -n 1)
  found=$(find "$artifacts" -type f -newer "$stamp" ! -name 'slow-unit-*' | sort)
  rm -f "$stamp"
  printf '  %-18s runs %s, corpus %s inputs (%s bytes), %s edges, peak RSS %s MB, exit %d\n' "$t" "${runs:-?}" \
    "$(find "$corpus" -type f | wc -l)" "$(find "$corpus" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')" \
    "${cov:-?}" "${rss:-?}" "$rc"
  if [ "$rc" -ne 0 ] || [ -n "$found" ]; then
    failed=1
    grep -m 3 -E '^==[0-9]+== ?ERROR|SUMMARY|check failed|runtime error' "$log" | sed 's/^/    /'
    for f in $found; do echo "    found: $f"; done
  fi
done
[ "$failed" -eq 0 ] && echo "fuzz.sh: no crash, leak, timeout or out-of-memory in ${targets[*]}"
[ "$failed" -eq 0 ] || echo "fuzz.sh: findings above; add each input to tests/fuzz/seeds/<target>/ once fixed" >&2
exit "$failed"
