#!/usr/bin/env python3
"""The medians of the alternating rounds in this folder: opt_rounds.txt, add_rounds.txt, bn_rounds.txt."""
import collections, re, statistics as st, os
here = os.path.dirname(os.path.abspath(__file__))
def med(v): return st.median(v)
d = collections.defaultdict(list)
for l in open(os.path.join(here, 'opt_rounds.txt')):
    b, r, k, v = l.split(); d[(b, k)].append(float(v))
print('optimizer pass, ms (median of %d rounds)' % len(d[('opt_before', 'sgd_fp32')]))
for b in ('opt_before', 'opt_after'):
    f, h = med(d[(b, 'sgd_fp32')]), med(d[(b, 'sgd_fp16copy')])
    fa, ha = med(d[(b, 'adamw_fp32')]), med(d[(b, 'adamw_fp16copy')])
    print('  %-10s SGD fp32 %6.2f with the fp16 copy %6.2f (x%.3f)   AdamW fp32 %6.2f with the copy %6.2f (x%.3f)'
          % (b, f, h, h / f, fa, ha, ha / fa))
a = collections.defaultdict(list)
for l in open(os.path.join(here, 'add_rounds.txt')):
    m = re.match(r'(\S+) \d+ n=\s*(\d+)\s+f32\s+([\d.]+) us\s+f16\s+([\d.]+) us', l)
    if m: a[(m.group(1), int(m.group(2)))].append((float(m.group(3)), float(m.group(4))))
print('add with the ReLU, us (median of %d rounds)' % len(a[('add_before', 65536)]))
for n in sorted({k[1] for k in a}):
    row = []
    for b in ('add_before', 'add_after'):
        f, h = med([x[0] for x in a[(b, n)]]), med([x[1] for x in a[(b, n)]])
        row.append('%s fp32 %7.1f fp16 %7.1f (x%.2f)' % (b, f, h, h / f))
        
    print('  n=%8d  %s' % (n, '   '.join(row)))
bn = collections.defaultdict(list)
for l in open(os.path.join(here, 'bn_rounds.txt')):
    m = re.match(r'(\S+) (\d+) total f32 fwd (\d+) bwd (\d+)  f16 fwd (\d+) bwd (\d+)', l)
    if m:
        f32f, f32b, f16f, f16b = map(float, m.groups()[2:])
        bn[(m.group(1), 'fwd')].append((f32f, f16f)); bn[(m.group(1), 'bwd')].append((f32b, f16b))
print('batch norm, the 8 shapes summed, us (median of %d rounds; fp16/fp32 the median of the rounds\' ratios)'
      % len(bn[('bn_before', 'fwd')]))
for b in ('bn_before', 'bn_after'):
    out = []
    for k in ('fwd', 'bwd'):
        v = bn[(b, k)]
        out.append('%s fp32 %6.0f fp16 %6.0f (x%.2f)' % (k, med([x[0] for x in v]), med([x[1] for x in v]),
                                                          med([x[1] / x[0] for x in v])))
    print('  %-10s %s' % (b, '   '.join(out)))
