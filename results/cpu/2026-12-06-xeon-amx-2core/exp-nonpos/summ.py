import sys, statistics as st, collections
d=collections.defaultdict(list)
for line in open(sys.argv[1]):
    p=line.split()
    if len(p)<5: continue
    d[(p[0],p[1],p[2])].append((int(p[3]),float(p[4])))
A,B=sys.argv[2],sys.argv[3]
for w in dict.fromkeys(k[0] for k in d):
    for prec in ('amp','fp32'):
        a=dict(d.get((w,prec,A),[])); b=dict(d.get((w,prec,B),[]))
        if not a: continue
        rr=[b[r]/a[r] for r in a if r in b]
        print(f"{w:22s} {prec:5s} {A} median {st.median(a.values()):10.2f}  {B} median {st.median(b.values()):10.2f}  {B}/{A} {st.median(b.values())/st.median(a.values()):.3f}  per round {' '.join(f'{x:.3f}' for x in rr)}")
    for v in (A,B):
        a=dict(d.get((w,'amp',v),[])); f=dict(d.get((w,'fp32',v),[]))
        if a and f: print(f"{w:22s} {v}: AMP/FP32 time {st.median(f.values())/st.median(a.values()):.3f}x (per round {' '.join(f'{f[r]/a[r]:.2f}' for r in a if r in f)})")
