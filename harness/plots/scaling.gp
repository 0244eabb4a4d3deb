# Data-parallel speed-up over one AMP device against the number of devices: ideal (linear),
# measured (ranks of this run) and projected (cost model, not measured) for GPUs and nodes.
load gpdir."/common.gp"
set title sprintf("Data-parallel scaling: %s (AMP)", workload) noenhanced font ",14"
set xlabel "devices (MPI ranks / GPUs / nodes)"
set ylabel "speed-up over one AMP device (x)"
set xrange [0.8:maxn + 0.2]
set yrange [0:maxn + 0.5]
set xtics 1
set key top left
set samples 200
cmd = 'plot x with lines dt 2 lw 1.5 lc rgb "#777777" title "ideal (linear)"'
if (meas ne "") cmd = cmd . sprintf(', "%s" using 1:2 with linespoints lw 2 pt 7 ps 1.6 lc rgb "%s" title "measured (%d ranks)"', meas, color(2), ranks)
if (projg ne "") cmd = cmd . sprintf(', "%s" using 1:2 with linespoints dt 4 lw 2 pt 6 ps 1.6 lc rgb "%s" title "projected GPUs (cost model, not measured)"', projg, color(1))
if (projn ne "") cmd = cmd . sprintf(', "%s" using 1:2 with linespoints dt 4 lw 2 pt 4 ps 1.6 lc rgb "%s" title "projected nodes (cost model, not measured)"', projn, color(3))
eval cmd
