# The largest batch that fits under a memory limit against sequence length, FP32 and AMP
# (bench/bert_fit_map.sh). file fit_map.dat: seq fp32_batch amp_batch; xmin, xmax: the x range.
load gpdir."/common.gp"
set title sprintf("%s fine-tuning (AdamW): the largest batch that fits in %s", model, limit) noenhanced font ",14"
set xlabel "sequence length (tokens)"
set ylabel "largest batch that fits"
set logscale xy 2
set xrange [xmin:xmax]
set yrange [1:*]
set key top right
set label 1 "batch 8" at xmin, 8 offset 1, 0.6 tc rgb "#666666"
plot "fit_map.dat" using 1:2:xtic(1) with linespoints lw 2 pt 7 ps 1.6 lc rgb color(1) title "FP32", \
     "" using 1:3 with linespoints lw 2 pt 5 ps 1.6 lc rgb color(2) title "AMP (fp16 + fp32 master weights)", \
     "" using 1:2:2 with labels offset 0, -1.2 notitle, \
     "" using 1:3:3 with labels offset 0, 1.2 notitle, \
     8 with lines dt 2 lc rgb "#666666" notitle
