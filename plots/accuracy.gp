# Test accuracy after each epoch, one series per tool and mode of one workload. files: epoch mean
# sd min max seeds; nseeds: the seeds of each series. One seed: a line; several: the per-epoch mean
# as a line inside a translucent band from the lowest to the highest seed (min..max), with the
# same range as error bars at each epoch (a run of one epoch has a band of no width).
load gpdir."/common.gp"
set title sprintf("Test accuracy per epoch: %s", workload) noenhanced font ",14"
set xlabel "epoch"
set ylabel "test accuracy (%)"
set xrange [0.5:maxepoch + 0.5]
set xtics 1
set key below
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
eval cmd
