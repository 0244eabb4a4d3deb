# medians of each build's runs and of the rounds' new / base ratios, from hp_ab*.sh's output
import sys, statistics as st, collections
runs = collections.defaultdict(lambda: {'base': [], 'new': []})
byround = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    p = line.split()
    if 'FAIL' in p or len(p) < 9: continue
    r, w, prec, tag, v = p[0], p[-4], p[-3], p[-2], float(p[-1])
    runs[(w, prec)][tag].append(v)
    byround[(w, prec, r)][tag] = v
print('%-15s %-5s %12s %12s %7s   %s' % ('workload', 'prec', 'base median', 'new median', 'ratio', 'new/base by round (median)'))
for k, d in runs.items():
    b, n = st.median(d['base']), st.median(d['new'])
    pr = [x['new'] / x['base'] for (w, prec, r), x in byround.items() if (w, prec) == k and len(x) == 2]
    print('%-15s %-5s %12.2f %12.2f %7.3f   %s (%.3f)' % (k[0], k[1], b, n, n / b, ' '.join('%.3f' % x for x in pr), st.median(pr)))
