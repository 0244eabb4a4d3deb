# shellcheck shell=bash
# Sourced by the CPU benches: cpu_link_reading BUILD prints how the first two CPUs stand to each
# other now (BUILD/cpu_link, bench/cpu_link.c) as NS/R: the one-way cross-core latency in ns, and
# both CPUs' compute rate at once against one alone (about 1: a core each; about 0.5: they share
# one); '-' where there is no reading (one CPU, or cpu_link not built). The benches print these
# beside their timings: on a virtual machine the two CPUs can drift apart on the host, or onto one
# core, for minutes, and runs on either side of such a change are not comparable.
# Also the benches' shared arithmetic: median, and round_ratios (each round's time ratio).
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

# median: the median of the numbers on stdin, one a line (the mean of the middle two for an even
# count), as awk prints a number; nothing for no input
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit; if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# round_ratios PREFIX LABEL FP32_RATES RATES: each round's run against the same round's fp32 run
# (rates in round order, space-separated; a time ratio: fp32 rate / rate), printed as one line
# with their median after PREFIX (the row's label, padded as the rows are, or empty). The
# precisions run back to back within a round, so a round's ratio is the pair the machine's drift
# moved least; the spread of the rounds shows how far the medians' ratio above can be trusted.
round_ratios() {
    local ratios med
    ratios=$(awk -v fs="$3" -v xs="$4" 'BEGIN {
        n = split(fs, f, " "); m = split(xs, x, " ")
        for (i = 1; i <= (m < n ? m : n); i++) if (x[i] + 0 > 0 && f[i] + 0 > 0) printf "%.17g\n", f[i] / x[i]; else print "-"
    }')
    med=$(awk 'NF && $1 != "-"' <<<"$ratios" | median)
    awk -v p="$1" -v l="$2" -v med="$med" 'NF { out = out ($1 == "-" ? " -" : sprintf(" %.2f", $1)) }
        END { printf "%sround by round, %s / FP32 time:%s (median %s)\n", p, l, out, med == "" ? "-" : sprintf("%.2fx", med) }' <<<"$ratios"
}
