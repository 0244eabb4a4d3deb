# Dynamic loss scale over the optimizer steps of each AMP run, overflow events marked (the step
# was skipped and the scale backed off). files: step scale (a step function); ovf: step scale_before.
load gpdir."/common.gp"
set title sprintf("Loss scale over steps: %s", workload) noenhanced font ",14"
set xlabel "optimizer step"
set ylabel "loss scale (log2 axis)"
set logscale y 2
set format y "2^{%L}"
set xrange [0:last > 0 ? last : 1]
set yrange [ymin:ymax]
set label 1 note at graph 0.02, graph 0.05 left noenhanced
cmd = "plot"
do for [i=1:words(files)] {
    cmd = cmd . sprintf('%s "%s" using 1:2 with steps lw %g dt %d lc rgb "%s" title "%s loss scale" noenhanced', \
                        (i > 1 ? "," : ""), word(files, i), (i == 1 ? 4 : 2), i, color(i), word(titles, i))
}
do for [i=1:words(ovf)] {
    cmd = cmd . sprintf(', "%s" using 1:2 with points pt 7 ps 1.3 lc rgb "#d62728" title "%s"', \
                        word(ovf, i), (i == 1 ? "overflow: step skipped, scale backed off" : ""))
}
eval cmd
