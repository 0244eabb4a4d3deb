# Projected speed-up over one device against the number of nodes, for each data-parallel pattern
# (core/dpmodel.h: MODELLED, not measured): the ring with and without overlap, a parameter server
# with one server and with one per node, and the ring with 4 micro-batches per synchronisation.
# The data file: nodes, then one column per pattern in the order of the titles.
load gpdir."/common.gp"
set title sprintf("Data-parallel patterns: %s, projected on nodes (cost model, not measured)", workload) noenhanced font ",13"
set xlabel "nodes"
set ylabel "speed-up over one device (x)"
set xrange [0.8:maxn + 0.2]
set yrange [0:maxn + 0.5]
set xtics 1
set key top left
titles = "ring,_overlap ring,_no_overlap parameter_server,_1_server parameter_server,_a_server_per_node ring,_overlap,_4_micro-batches_per_sync"
cmd = 'plot x with lines dt 2 lw 1.5 lc rgb "#777777" title "ideal (linear)"'
do for [i = 1:5] {
    cmd = cmd . sprintf(', data using 1:%d with linespoints lw 2 pt %d ps 1.4 lc rgb "%s" title "%s"', i + 1, 4 + i, color(i), system("echo ".word(titles, i)." | tr _ ' '"))
}
eval cmd
