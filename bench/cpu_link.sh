# shellcheck shell=bash
# Sourced by the CPU benches: cpu_link_reading BUILD prints how the first two CPUs stand to each
# other now (BUILD/cpu_link, bench/cpu_link.c) as NS/R: the one-way cross-core latency in ns, and
# both CPUs' compute rate at once against one alone (about 1: a core each; about 0.5: they share
# one); '-' where there is no reading (one CPU, or cpu_link not built). The benches print these
# beside their timings: on a virtual machine the two CPUs can drift apart on the host, or onto one
# core, for minutes, and runs on either side of such a change are not comparable.
cpu_link_reading() {
    local line
    [ -x "$1/cpu_link" ] && line=$(timeout 20 "$1/cpu_link" 2>/dev/null) || { echo -; return 0; }
    awk '{ for (k = 2; k <= NF; k++) { if ($k == "ns" && !ns) ns = $(k - 1); if ($k == "of" && $(k + 1) == "one") r = $(k - 1) } }
         END { print (ns && r ? ns "/" r : "-") }' <<<"$line"
}

# cpu_link_report PREFIX NAME READINGS RUNS_FILE: the readings of a set of rounds, printed after the
# table's rows (PREFIX: the row's label, padded as the rows are, or empty) and added to RUNS_FILE
cpu_link_report() {
    printf '%scross-core ns / paired compute, before each round and after the last: %s (bench/cpu_link.c)\n' "$1" "$3"
    echo "  $2 cross-core ns / paired compute, before each round and after the last: $3" >>"$4"
}
