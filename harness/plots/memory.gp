# Peak memory by category for one workload: a stacked bar per run (FP32, AMP, a data-parallel
# rank) of weights, master weights, gradients, optimizer state, activations and workspace (the
# comparable total, what a GPU run would hold), with the CPU implementation's own scratch as a
# hatched bar beside it (not in the total); and, when FP32 and AMP both ran, what AMP saves in
# each category.
# data: "run" cum_weights cum_master cum_gradients cum_optimizer cum_activations cum_workspace
#       comparable_total cpu_scratch own_weights ... own_workspace   (MB; NaN: not recorded)
# saving: "category" MB_saved index   (index 0 = the total)
load gpdir."/common.gp"
names = "weights master\\_weights gradients optimizer\\_state activations workspace"
if (saving ne "") {
    set multiplot layout 1,2 title sprintf("Peak memory by category: %s", workload) noenhanced font ",14"
} else {
    set title sprintf("Peak memory by category: %s", workload) noenhanced font ",14"
}
set style fill solid 0.85 border -1
set boxwidth 0.45
set ylabel "peak memory (MB)"
set xrange [-0.6:nruns - 0.4 + (scratch ? 0.2 : 0)]
set yrange [0:ymax]
set key outside below center horizontal maxcols 3 width -2 box font ",9"
set xtics nomirror
# the tallest stack first: each shorter one covers the bottom of the one before it
cmd = sprintf('plot for [k=6:1:-1] data using ($0):(column(k+1)):xtic(1) with boxes lc rgb color(k) title word(names, k)')
cmd = cmd . sprintf(', data using ($0):8:(sprintf("%%.1f MB", column(8))) with labels offset 0,0.8 font ",9" notitle')
if (scratch) cmd = cmd . sprintf(', data using ($0+0.38):9:(0.25) with boxes fs pattern 4 border lc rgb "#555555" lc rgb "#777777" title "CPU-only scratch (not in the total)"')
eval cmd
if (saving ne "") {
    set title "memory AMP saves against FP32, by category"
    set ylabel "MB saved by AMP (negative: AMP holds more)"
    set xzeroaxis lt -1 lw 1.5
    set autoscale y
    set offsets 0, 0, graph 0.15, graph 0.15
    set xrange [-0.6:6.6]
    set xtics rotate by -30 font ",9"
    unset key
    plot saving using ($0):(column(3) > 0 ? column(2) : 1/0):xtic(1) with boxes lc rgb color(1) notitle, \
         ''     using ($0):(column(3) == 0 ? column(2) : 1/0) with boxes lc rgb color(2) notitle, \
         ''     using ($0):(column(2) >= 0 ? column(2) : 1/0):(sprintf("%.1f", column(2))) with labels offset 0,0.8 font ",9" notitle, \
         ''     using ($0):(column(2) < 0 ? column(2) : 1/0):(sprintf("%.1f", column(2))) with labels offset 0,-0.8 font ",9" notitle
    unset multiplot
}
