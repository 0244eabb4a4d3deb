# Which layers need the loss scale: per layer (backward order, the output's first), the share of
# its output gradients (activation gradients) that fp16 would flush to zero at scale 1, at the
# reference run's last census; and, when amp = 1, the share the AMP run's stored fp16 values had
# in that range at its own scale. file: index share_scale1_% share_amp_% label.
load gpdir."/common.gp"
set title sprintf("Activation gradients below fp16's range (< 2^-25) per layer: %s (%s run, step %d)", workload, ref, step) noenhanced font ",13"
set xlabel "layer, in backward order (the output's first)"
set ylabel "share of the layer's non-zero output gradients"
set format y "%g%%"
set yrange [0:*]
set xtics rotate by 60 right noenhanced font ",8"
set style fill solid 0.7 noborder
set boxwidth 0.8
set key top right box opaque
plot file using 1:2:xtic(4) with boxes lc rgb color(2) title "at scale 1 (no loss scaling)" noenhanced, \
     (amp ? file : 1/0) using 1:3 with points pt 7 ps 0.6 lc rgb color(1) title "AMP at its dynamic scale"
