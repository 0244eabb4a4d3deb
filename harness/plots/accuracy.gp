# Test accuracy after each epoch, one series per tool and mode of one workload. files: epoch mean
# sd min max seeds; nseeds: the seeds of each series. One seed: a line; several: the per-epoch mean
# as a line inside a translucent band from the lowest to the highest seed (min..max), with the
# same range as error bars at each epoch (a run of one epoch has a band of no width).
# reported_file (when not ""): a file whose one value is the articles' FP32 accuracy, drawn as a
# dashed line titled reported_title; evalset: "test" or "dev" (GLUE's dev set), which the title
# and axis name.
load gpdir."/common.gp"
if (!exists("evalset")) evalset = "test"
reported = -1
if (exists("reported_file") && reported_file ne "") {
    stats reported_file using 1 nooutput
    reported = STATS_max
}
set title sprintf("%s accuracy per epoch: %s", evalset eq "dev" ? "Dev" : "Test", workload) noenhanced font ",14"
set xlabel "epoch" offset 0,0.7
set ylabel sprintf("%s accuracy (%%)", evalset) offset 1,0
set xrange [0.5:maxepoch + 0.5]
set xtics 1
# the key in its own band under the plot, clear of the axis labels
set key outside below center maxrows 3 spacing 1.1

set lmargin 10
cmd = "plot"
do for [i=1:words(files)] {
    n = int(word(nseeds, i))
    sep = (i > 1 ? "," : "")
    if (n > 1) {
        cmd = cmd . sprintf('%s "%s" using 1:4:5 with filledcurves fs transparent solid 0.2 noborder lc rgb "%s" notitle', \
                            sep, word(files, i), color(i))
        cmd = cmd . sprintf(', "%s" using 1:2:4:5 with yerrorbars lw 1.5 pt 7 ps 1.2 lc rgb "%s" notitle', \
                            word(files, i), color(i))
        cmd = cmd . sprintf(', "%s" using 1:2 with linespoints lw 2 pt 7 ps 1.2 lc rgb "%s" title "%s: mean of %d seeds, band and bars min..max" noenhanced', \
                            word(files, i), color(i), word(titles, i), n)
    } else {
        cmd = cmd . sprintf('%s "%s" using 1:2 with linespoints lw 2 pt 7 ps 1.4 lc rgb "%s" title "%s" noenhanced', \
                            sep, word(files, i), color(i), word(titles, i))
    }
}
if (reported > 0) {
    cmd = cmd . sprintf(', %g with lines dt 2 lw 2 lc rgb "#555555" title "%s" noenhanced', reported, reported_title)
}
eval cmd
