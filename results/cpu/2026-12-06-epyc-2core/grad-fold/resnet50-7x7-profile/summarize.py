# per op kind, the seconds of each run (fp32.rN.txt, amp.rN.txt) and the medians; run: python3 summarize.py
import glob, re, statistics as S
runs = {}
for f in sorted(glob.glob('*.r*.txt')):
    kinds = {}
    for line in open(f):
        m = re.match(r'  (\S.*?)\s{2,}(\d+)\s+([0-9.]+)\s+[0-9.]+%', line)
        if m: kinds[m.group(1)] = float(m.group(3))
        m = re.match(r'  all ops: ([0-9.]+) s', line)
        if m: kinds['all ops'] = float(m.group(1))
    runs[f[:-4]] = kinds
names = sorted({k for r in runs.values() for k in r}, key=lambda k: -max(r.get(k, 0) for r in runs.values()))
cols = sorted(runs)
print('%-42s' % 'seconds over 20 steps' + ''.join('%10s' % c for c in cols) + '%12s%12s%10s' % ('fp32 med', 'amp med', 'amp-fp32'))
for k in names:
    f = [runs[c].get(k, 0.0) for c in cols if c.startswith('fp32')]
    a = [runs[c].get(k, 0.0) for c in cols if c.startswith('amp')]
    print('%-42s' % k[:42] + ''.join('%10.4f' % runs[c].get(k, 0.0) for c in cols) +
          '%12.4f%12.4f%+10.4f' % (S.median(f), S.median(a), S.median(a) - S.median(f)))
