# AMP time saving and peak-memory saving vs FP32, reported (articles) beside measured (this run),
# one pair of bars per workload.
# data: "workload" rep_time meas_time rep_mem meas_mem has_reported has_measured (NaN: no figure)
load gpdir."/common.gp"
set multiplot layout 1,2 title "AMP (fp16) vs FP32: reported by the articles and measured here" font ",14"
set style fill solid 0.85 border -1
set boxwidth 0.38
set xzeroaxis lt -1 lw 1.5
set ylabel "saving vs FP32 (%)   [negative: AMP costs more]"
set xlabel "workload"
set xrange [-0.6:*]
set offsets 0, 0.6, graph 0.12, graph 0.12
set tmargin 5
do for [panel=1:2] {
    r = panel == 1 ? 2 : 4
    m = r + 1
    set title (panel == 1 ? "training time saving (same work)" : "peak-memory saving")
    if (panel == 1) { set key at screen 0.5, screen 0.905 center horizontal nobox } else { unset key }
    plot data using ($0-0.2):r with boxes lc rgb color(1) title "reported (articles)", \
         ''   using ($0+0.2):m:xtic(1) with boxes lc rgb color(2) title "measured (this run)", \
         ''   using ($0-0.2):(column(r) >= 0 ? column(r) : 1/0):(sprintf("%.1f%%", column(r))) with labels offset 0,0.8 notitle, \
         ''   using ($0-0.2):(column(r) < 0 ? column(r) : 1/0):(sprintf("%.1f%%", column(r))) with labels offset 0,-0.8 notitle, \
         ''   using ($0+0.2):(column(m) >= 0 ? column(m) : 1/0):(sprintf("%.1f%%", column(m))) with labels offset 0,0.8 notitle, \
         ''   using ($0+0.2):(column(m) < 0 ? column(m) : 1/0):(sprintf("%.1f%%", column(m))) with labels offset 0,-0.8 notitle, \
         ''   using ($0-0.2):(0):(column(6) == 0 ? "no figure" : "") with labels rotate by 90 left offset 0,0.5 tc rgb "#555555" notitle, \
         ''   using ($0+0.2):(0):(column(7) == 0 ? "not run" : "") with labels rotate by 90 left offset 0,0.5 tc rgb "#555555" notitle
}
unset multiplot
