# The pooled activation-gradient histogram of one workload, in the spirit of Micikevicius et al.
# (2018), Figure 3: x the binary exponent floor(log2 |g|) at scale 1, y the share of the finite
# non-zero activation gradients; fp16's ranges shaded (flushed to zero below 2^-25, subnormal to
# 2^-14, normal to 65504, overflow above). Series in file (blank-line blocks): the first census,
# the last, and the last where AMP's loss scale 2^shift moves it (when amp = 1).
load gpdir."/common.gp"
set title sprintf("Activation gradients and fp16's range: %s (%s run, census at step %d and %d)", workload, ref, step0, step1) noenhanced font ",13"
set xlabel "log2 |gradient| at scale 1 (the bin's lower edge)"
set ylabel "share of the non-zero activation gradients"
set xrange [-50:20]
set yrange [0:*]
set format y "%.0f%%"
set object 1 rect from graph 0, graph 0 to first -25, graph 1 fc rgb "#d62728" fs transparent solid 0.12 noborder behind
set object 2 rect from first -25, graph 0 to first -14, graph 1 fc rgb "#ff7f0e" fs transparent solid 0.12 noborder behind
set object 3 rect from first -14, graph 0 to first 16, graph 1 fc rgb "#2ca02c" fs transparent solid 0.12 noborder behind
set object 4 rect from first 16, graph 0 to graph 1, graph 1 fc rgb "#7f7f7f" fs transparent solid 0.12 noborder behind
set label 1 "fp16: flushed to 0" at first -49, graph 0.05 tc rgb "#d62728"
set label 2 "subnormal" at first -24.5, graph 0.05 tc rgb "#ff7f0e"
set label 3 "normal" at first -13.5, graph 0.05 tc rgb "#2ca02c"
set label 4 "overflow" at first 19.5, graph 0.05 right tc rgb "#7f7f7f"
# the key where fp16 flushes to zero: the far left, which the curves reach last
set key top left box opaque font ",10"
set style data steps
plot file index 0 using 1:($2*100) with steps lw 2 lc rgb color(1) title sprintf("step %d", step0) noenhanced, \
     file index 1 using 1:($2*100) with steps lw 3 lc rgb color(2) title sprintf("step %d (last census)", step1) noenhanced, \
     (amp ? file : 1/0) index 2 using 1:($2*100) with steps lw 2 dt 2 lc rgb color(4) title sprintf("step %d x AMP's loss scale 2^%d", step1, shift) noenhanced
