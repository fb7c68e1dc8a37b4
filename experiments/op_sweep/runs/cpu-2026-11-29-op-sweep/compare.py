import json, math, sys
def load(p): return {r['id']:r for r in json.load(open(p))['instances']}
a, b = load(sys.argv[1]), load(sys.argv[2])
def gm(v):
    v=[x for x in v if x]; return math.exp(sum(map(math.log,v))/len(v)) if v else float('nan')
classes = sorted({r['class'] for r in b.values()})
print("| class | n | geomean vs eager, before | after | within 10% of eager or faster, before | after | worst, before | after |")
print("|---|---|---|---|---|---|---|---|")
for c in classes + ['all']:
    ids = [k for k in b if c == 'all' or b[k]['class'] == c]
    sa = [a[k]['speedup_vs_eager'] for k in ids]; sb = [b[k]['speedup_vs_eager'] for k in ids]
    w = lambda v: sum(1 for x in v if x >= 1/1.1)
    print("| %s | %d | %.2f | %.2f | %d (%.0f%%) | %d (%.0f%%) | %.2f | %.2f |" % (c if c!='all' else '**all**', len(ids), gm(sa), gm(sb), w(sa), 100*w(sa)/len(ids), w(sb), 100*w(sb)/len(ids), min(sa), min(sb)))
below = [k for k in b if b[k]['speedup_vs_eager'] < 0.8]
print("\nbelow 0.8x eager: before %d, after %d" % (sum(1 for k in a if a[k]['speedup_vs_eager'] < 0.8), len(below)))
# tessel-time ratio per class (eager noise excluded)
print("\n| class | Tessel time after / before, geomean | largest speed-up | largest slow-down |")
print("|---|---|---|---|")
for c in classes + ['all']:
    ids = [k for k in b if c == 'all' or b[k]['class'] == c]
    r = {k: b[k]['tessel_ms']/a[k]['tessel_ms'] for k in ids}
    lo = min(r, key=r.get); hi = max(r, key=r.get)
    print("| %s | %.2f | %s %.2fx | %s %.2fx |" % (c, gm(list(r.values())), lo, 1/r[lo], hi, r[hi]))
