"""pairs.sh's output summarized: each workload's pairs, the median of their AMP / FP32 time ratios,
its quartiles and the range. usage: python3 pairs_summ.py pairs_raw.txt > summary.txt"""
import statistics as st, collections, sys
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    s = l.split()
    d[s[0]].append(float(s[-1]))
for w, v in d.items():
    q = st.quantiles(v, n=4)
    print('%-22s %2d pairs: AMP / FP32 time median %.3fx, quartiles %.3fx to %.3fx, range %.3fx to %.3fx'
          % (w, len(v), st.median(v), q[0], q[2], min(v), max(v)))
