#!/usr/bin/env bash
# scripts/version.cmake, the source of every record's git_commit and git_dirty: a clean checkout
# gives its commit and 0, a changed tracked file 1, a folder outside git "unknown" and -1 (unknown,
# never "clean"), and a checkout owned by another user (git's "dubious ownership") still its commit
# (where this test may chown). Then the built ampbench names the commit of the checkout it was
# built from, when that is a git checkout.
# Usage: test_version.sh SOURCE_DIR AMPBENCH
set -euo pipefail
src=$1 ampbench=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL test_version: $*" >&2; exit 1; }
gen() { cmake -DSRC="$1" -DOUT="$work/v.c" -P "$src/scripts/version.cmake" && cat "$work/v.c"; }
expect() { # TEXT COMMIT DIRTY WHAT
    grep -q "return \"$2\";" <<<"$1" || fail "$4: commit not \"$2\" in: $1"
    grep -q "ab_git_dirty(void) { return $3; }" <<<"$1" || fail "$4: dirty not $3 in: $1"
    echo "ok   $4"
}
command -v git >/dev/null || { echo "SKIPPED: no git"; exit 77; }

repo=$work/repo
mkdir -p "$repo" && git -C "$repo" init -q && echo a >"$repo/f" && git -C "$repo" add f &&
    git -C "$repo" -c user.email=t@t -c user.name=t commit -q -m one
head=$(git -C "$repo" rev-parse HEAD)
rm -f "$work/v.c"; expect "$(gen "$repo")" "$head" 0 "a clean checkout: its commit, clean"
echo b >"$repo/f"
rm -f "$work/v.c"; expect "$(gen "$repo")" "$head" 1 "a changed tracked file: dirty"
git -C "$repo" checkout -q -- f
mkdir -p "$work/plain"
rm -f "$work/v.c"; expect "$(gen "$work/plain")" unknown -1 "outside git: unknown, and dirty unknown"
if [ "$(id -u)" = 0 ] && chown -R nobody "$repo" 2>/dev/null; then
    git -C "$repo" rev-parse HEAD >/dev/null 2>&1 && echo "note: this git does not check ownership"
    rm -f "$work/v.c"; expect "$(gen "$repo")" "$head" 0 "a checkout owned by another user: still its commit"
else
    echo "skip a checkout owned by another user: not root here"
fi

# the build: ampbench --version names the source checkout's commit
if c=$(git -c 'safe.directory=*' -C "$src" rev-parse HEAD 2>/dev/null); then
    v=$("$ampbench" --version)
    grep -q "^ampbench $c" <<<"$v" || fail "ampbench --version says '$v'; the checkout is at $c (rebuild?)"
    echo "ok   ampbench --version: $v"
else
    echo "skip ampbench --version: $src is not a git checkout"
fi
