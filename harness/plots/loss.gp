# Training loss per optimizer step, one line per run (precision, ranks) of one workload.
# files/titles: space-separated lists; each file: step loss scale. The first (FP32) line is the
# widest so that near-identical curves stay visible under each other.
load gpdir."/common.gp"
set title sprintf("Training loss per step: %s", workload) noenhanced font ",14"
set xlabel "optimizer step"
set ylabel "training loss (cross entropy, mean over the log interval)"
plot for [i=1:words(files)] word(files, i) using 1:2 with lines lw (i == 1 ? 4 : 2) dt i lc rgb color(i) title word(titles, i) noenhanced
