# Test accuracy after each epoch, one line per run of one workload. files: epoch accuracy_pct.
load gpdir."/common.gp"
set title sprintf("Test accuracy per epoch: %s", workload) noenhanced font ",14"
set xlabel "epoch"
set ylabel "test accuracy (%)"
set xrange [0.5:maxepoch + 0.5]
set xtics 1
set key bottom right
plot for [i=1:words(files)] word(files, i) using 1:2 with linespoints lw 2 pt 7 ps 1.4 lc rgb color(i) title word(titles, i) noenhanced
