"""summary.txt from run.sh's rounds: each figure's median over the rounds, before and after."""
import os, re, statistics as st, collections
here = os.path.dirname(os.path.abspath(__file__))
def med(v): return st.median(v) if v else float('nan')
out = []
# ops: "<build> <round> <op name>  fp32 X us  amp Y us  (+Z)"
ops = collections.defaultdict(list)
for l in open(os.path.join(here, 'ops_rounds.txt')):
    m = re.match(r'(\w+) \d+ (.+?)\s+fp32\s+([\d.]+) us\s+amp\s+([\d.]+) us', l)
    if m: ops[(m.group(2).strip(), m.group(1))].append((float(m.group(3)), float(m.group(4))))
    m = re.match(r'(\w+) \d+ total fp32 ([\d.]+) amp ([\d.]+) us', l)
    if m: ops[('total', m.group(1))].append((float(m.group(2)), float(m.group(3))))
out.append('The MLP\'s ops, one process, 2 threads (us a call, medians over the rounds of each round\'s median of 41):')
out.append('%-20s %26s %26s' % ('op', 'before: fp32 / amp (+extra)', 'after: fp32 / amp (+extra)'))
for name in dict.fromkeys(k[0] for k in ops):
    cells = []
    for b in ('before', 'after'):
        v = ops.get((name, b), [])
        f, a = med([x[0] for x in v]), med([x[1] for x in v])
        cells.append('%7.2f / %7.2f (%+6.2f)' % (f, a, a - f))
    out.append('%-20s %26s %26s' % (name, cells[0], cells[1]))
out.append('("check W1" is the finite check the trainer leaves to the fold; the total includes it)')
for f, what in (('gather_rounds.txt', 'Batch assembly, 64 MNIST-shaped samples from 60,000, 2 threads (us a batch):'),
                ('transpose_rounds.txt', 'W2 (10 x 256) transposed on one thread (us):')):
    v = collections.defaultdict(list)
    for l in open(os.path.join(here, f)):
        b = l.split()[0]
        for t, x in re.findall(r'(f32|f16) ([\d.]+) us', l): v[(b, t)].append(float(x))
    out.append('')
    out.append(what)
    for t in ('f32', 'f16'):
        out.append('  %s: before %.2f, after %.2f' % (t, med(v[('before', t)]), med(v[('after', t)])))
print('\n'.join(out))
