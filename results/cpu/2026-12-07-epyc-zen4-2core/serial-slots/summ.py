#!/usr/bin/env python3
"""Summary of rounds of mlp_step_ops run by two builds (rounds.txt: '== round R BUILD cpu_link...'
then the program's table): each op's median over the rounds of the per-round medians, per
precision and build, and AMP / FP32 of the step per round. usage: summ.py rounds.txt"""
import re, statistics, sys
rows = {}; ratios = {}; build = None
for line in open(sys.argv[1]):
    m = re.match(r'== round (\d+) (\S+)', line)
    if m: build = m.group(2); continue
    m = re.match(r'AMP/FP32 \(step medians\) ([0-9.]+)', line)
    if m: ratios.setdefault(build, []).append(float(m.group(1))); continue
    f = line.split()
    if build and len(f) == 3 and re.match(r'^[0-9.]+$', f[1]):
        rows.setdefault((f[0], build), []).append((float(f[1]), float(f[2])))
builds = sorted({b for _, b in rows}, reverse=True)
print('%-8s' % 'op' + ''.join(' %9s %9s' % (b + ' fp32', 'amp') for b in builds) + '   (us, median over rounds)')
for op in dict.fromkeys(o for o, _ in rows):
    print('%-8s' % op + ''.join(' %9.2f %9.2f' % (statistics.median(x[0] for x in rows[(op, b)]), statistics.median(x[1] for x in rows[(op, b)])) for b in builds))
for b in builds:
    r = sorted(ratios[b]); print('%s: AMP / FP32 of the step, median %.3f over %d rounds (%s)' % (b, statistics.median(r), len(r), ' '.join('%.3f' % x for x in ratios[b])))
