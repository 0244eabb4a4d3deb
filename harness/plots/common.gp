# Shared look of the harness plots: loaded by every plots/*.gp. Variables come from
# ampbench-report on the command line (out, w, h, ...); the data files are in the current folder.
set terminal pngcairo size w,h enhanced font "DejaVu Sans,11" linewidth 1.5
set output out
set key top right box opaque
set grid back lc rgb "#dddddd"
set border lc rgb "#444444"
set datafile missing "NaN"
colors = "#1f77b4 #d62728 #2ca02c #9467bd #ff7f0e #8c564b #e377c2 #17becf"
color(i) = word(colors, (i - 1) % words(colors) + 1)
