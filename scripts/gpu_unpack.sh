#!/usr/bin/env bash
# Unpacks what the remote GPU check returned (scripts/gpu_remote.sh: summary.txt, log.txt,
# results.tar.gz) into results/gpu/<YYYY-MM-DD>-<device>/ (the CPU result sets' naming: the check's
# UTC date, the device's name in lower case with "nvidia " dropped, e.g. 2026-12-04-h200), checks
# every run record in it against the result schema (scripts/validate_records.py), and prints the
# git command that commits it. Nothing is overwritten: an existing folder is refused.
# Usage: scripts/gpu_unpack.sh ANSWER_DIR [--root DIR | --dest DIR]
#   ANSWER_DIR  the folder holding the returned files (the device tool's files_at)
#   --root      where the <date>-<device>/ folder goes [results/gpu]
#   --dest      the folder to create, named in full
# Exit status: 0 unpacked and valid; 1 a record is invalid (the folder stays, to be looked at);
# 2 bad use, a missing or unreadable answer, or an existing destination.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src="" dest="" base=$root/results/gpu
while [ $# -gt 0 ]; do
    case "$1" in
    --dest) dest=${2:-}; shift 2 ;;
    --root) base=${2:-}; shift 2 ;;
    -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "gpu_unpack.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) [ -z "$src" ] || { echo "gpu_unpack.sh: one answer folder, not '$src' and '$1'" >&2; exit 2; }; src=$1; shift ;;
    esac
done
die() { echo "gpu_unpack.sh: $*" >&2; exit 2; }
[ -n "$src" ] || die "usage: gpu_unpack.sh ANSWER_DIR [--root DIR | --dest DIR]"
[ -d "$src" ] || die "$src: no such folder"
[ -f "$src/results.tar.gz" ] || die "$src/results.tar.gz: missing (the answer holds $(ls "$src" | tr '\n' ' '))"
tar -tzf "$src/results.tar.gz" >/dev/null 2>&1 || die "$src/results.tar.gz: not a readable gzip tarball"
if tar -tzf "$src/results.tar.gz" | grep -qvE '^results(/|$)'; then die "$src/results.tar.gz: holds paths outside results/"; fi

summary=$src/summary.txt
[ -f "$summary" ] || summary=""
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$src/results.tar.gz" -C "$tmp" || die "$src/results.tar.gz: extraction failed"
[ -n "$summary" ] || summary=$tmp/results/summary.txt
[ -f "$summary" ] || die "no summary.txt in $src nor in its results.tar.gz"

device=$(sed -n 's/^device: //p' "$summary" | head -1)
day=$(sed -n 's/^date: \([0-9-]*\)T.*/\1/p' "$summary" | head -1)
[ -n "$day" ] || day=$(date -u +%Y-%m-%d)
slug=$(echo "${device:-unknown-gpu}" | tr 'A-Z' 'a-z' | sed 's/^nvidia //' | tr -cs 'a-z0-9' '-' | sed 's/^-//; s/-$//')
dest=${dest:-$base/$day-$slug}
[ -e "$dest" ] && die "$dest exists: nothing overwritten (move it, or name another with --dest)"
mkdir -p "$(dirname "$dest")" || die "cannot create $(dirname "$dest")"
mv "$tmp/results" "$dest" || die "cannot move the results to $dest"
cp "$summary" "$dest/summary.txt" 2>/dev/null
[ -f "$src/log.txt" ] && cp "$src/log.txt" "$dest/remote-log.txt"

echo "gpu_unpack.sh: $dest ($(find "$dest" -type f | wc -l) files, device '${device:-unknown}', $day)"
py=python3 # the first python3 with jsonschema (Debian's python3-jsonschema is /usr/bin/python3's)
for p in python3 /usr/bin/python3; do
    if "$p" -c 'import jsonschema' 2>/dev/null; then py=$p; break; fi
done
report=$("$py" "$root/scripts/validate_records.py" "$dest")
vrc=$?
echo "$report"
if [ $vrc -eq 1 ] && echo "$report" | grep -q ' 0 run record(s), 0 invalid'; then
    echo "gpu_unpack.sh: the answer holds no run record (see summary.txt: the check stopped early?)" >&2
    vrc=0
fi
if [ $vrc -eq 1 ]; then
    echo "gpu_unpack.sh: a record in $dest does not match the schema (above); fix the writer before committing" >&2
    exit 1
fi
[ $vrc -eq 77 ] && echo "gpu_unpack.sh: the records were not validated (no python3-jsonschema)" >&2
grep -E ' (FAILED|TIMED-OUT) ' "$dest/summary.txt" | sed 's/^/  failed: /'
for st in passed FAILED TIMED-OUT SKIPPED NOT-RUN; do
    n=$(grep -cE "^[^ ]+ +$st +[0-9]+ " "$dest/summary.txt")
    [ "$n" -gt 0 ] && printf '  %s: %d step(s)\n' "$st" "$n"
done
echo "gpu_unpack.sh: ready: git add ${dest#"$root"/} && git commit"
