import sys, statistics as st, collections
runs = collections.defaultdict(lambda: {'base': [], 'new': []})
pairs = collections.defaultdict(list)
last = {}
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) < 9 or p[-1] == 'FAIL': continue
    r, w, prec, tag, v = p[0], p[-4], p[-3], p[-2], float(p[-1])
    runs[(w, prec)][tag].append(v)
    if tag == 'base': last[(w, prec, r)] = v
    else: pairs[(w, prec)].append(v / last[(w, prec, r)])
print('%-15s %-5s %12s %12s %7s   %s' % ('workload', 'prec', 'base median', 'new median', 'ratio', 'new/base by round (median)'))
for k, d in runs.items():
    b, n = st.median(d['base']), st.median(d['new'])
    pr = pairs[k]
    print('%-15s %-5s %12.2f %12.2f %7.3f   %s (%.3f)' % (k[0], k[1], b, n, n / b, ' '.join('%.3f' % x for x in pr), st.median(pr)))
