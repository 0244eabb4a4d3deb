# AMP time saving and peak-memory saving vs FP32, reported (articles) beside measured (this run)
# and, for time, the GPU step model's figure on the articles' GPU: bars per workload.
# data: "workload" rep_time meas_time rep_mem meas_mem has_reported has_measured model_time
#       (NaN: no figure)
# vars: measured (the measured bars' legend: says when they come from a CPU), modelled (the GPU
#       the modelled bars are of, "" when no record has a modelled step)
load gpdir."/common.gp"
if (!exists("measured")) measured = "measured here"
if (!exists("modelled")) modelled = ""
set multiplot layout 1,2 title "AMP (fp16) vs FP32: reported by the articles, measured here".(modelled ne "" ? ", modelled" : "") font ",14"
set style fill solid 0.85 border -1
set xzeroaxis lt -1 lw 1.5
set ylabel "saving vs FP32 (%)   [negative: AMP costs more]"
set xlabel "workload"
set xtics rotate by -20 font ",10"
set xrange [-0.6:*]
set offsets 0, 0.6, graph 0.12, graph 0.12
set tmargin 6
nb = modelled ne "" ? 3 : 2
bw = nb == 3 ? 0.26 : 0.38
set boxwidth bw
x1 = nb == 3 ? -0.28 : -0.2
x2 = nb == 3 ? 0.0 : 0.2
x3 = 0.28
do for [panel=1:2] {
    r = panel == 1 ? 2 : 4
    m = r + 1
    set title (panel == 1 ? "training time saving (same work)" : "peak-memory saving")
    if (panel == 1) { set key at screen 0.5, screen 0.885 center horizontal nobox font ",10" } else { unset key }
    if (panel == 1 && nb == 3) {
        plot data using ($0+x1):r with boxes lc rgb color(1) title "reported (articles, GPU)", \
             ''   using ($0+x2):m:xtic(1) with boxes lc rgb color(2) title measured, \
             ''   using ($0+x3):8 with boxes lc rgb color(3) title "modelled on the ".modelled, \
             ''   using ($0+x1):(column(r) >= 0 ? column(r) : 1/0):(sprintf("%.1f%%", column(r))) with labels offset 0,0.8 font ",9" notitle, \
             ''   using ($0+x1):(column(r) < 0 ? column(r) : 1/0):(sprintf("%.1f%%", column(r))) with labels offset 0,-0.8 font ",9" notitle, \
             ''   using ($0+x2):(column(m) >= 0 ? column(m) : 1/0):(sprintf("%.1f%%", column(m))) with labels offset 0,0.8 font ",9" notitle, \
             ''   using ($0+x2):(column(m) < 0 ? column(m) : 1/0):(sprintf("%.1f%%", column(m))) with labels offset 0,-0.8 font ",9" notitle, \
             ''   using ($0+x3):(column(8) >= 0 ? column(8) : 1/0):(sprintf("%.1f%%", column(8))) with labels offset 0,0.8 font ",9" notitle, \
             ''   using ($0+x3):(column(8) < 0 ? column(8) : 1/0):(sprintf("%.1f%%", column(8))) with labels offset 0,-0.8 font ",9" notitle, \
             ''   using ($0+x1):(0):(column(r) != column(r) ? "no figure" : "") with labels rotate by 90 left offset 0,0.5 tc rgb "#555555" notitle, \
             ''   using ($0+x2):(0):(column(7) == 0 ? "not run" : "") with labels rotate by 90 left offset 0,0.5 tc rgb "#555555" notitle
    } else {
        plot data using ($0-0.2):r with boxes lc rgb color(1) title "reported (articles, GPU)", \
             ''   using ($0+0.2):m:xtic(1) with boxes lc rgb color(2) title measured, \
             ''   using ($0+-0.2):(column(r) >= 0 ? column(r) : 1/0):(sprintf("%.1f%%", column(r))) with labels offset 0,0.8 font ",9" notitle, \
             ''   using ($0+-0.2):(column(r) < 0 ? column(r) : 1/0):(sprintf("%.1f%%", column(r))) with labels offset 0,-0.8 font ",9" notitle, \
             ''   using ($0+0.2):(column(m) >= 0 ? column(m) : 1/0):(sprintf("%.1f%%", column(m))) with labels offset 0,0.8 font ",9" notitle, \
             ''   using ($0+0.2):(column(m) < 0 ? column(m) : 1/0):(sprintf("%.1f%%", column(m))) with labels offset 0,-0.8 font ",9" notitle, \
             ''   using ($0-0.2):(0):(column(r) != column(r) ? "no figure" : "") with labels rotate by 90 left offset 0,0.5 tc rgb "#555555" notitle, \
             ''   using ($0+0.2):(0):(column(7) == 0 ? "not run" : "") with labels rotate by 90 left offset 0,0.5 tc rgb "#555555" notitle
    }
}
unset multiplot
