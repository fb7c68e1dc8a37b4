# Run-to-run Spearman of the measured times of the same candidates (the noise ceiling of a rank test here).
import csv, collections, sys
def load(p):
    d = collections.defaultdict(dict)
    for r in csv.DictReader(open(p)):
        if r.get("measured_s"): d[r["id"]][(r["group"], r["rank"])] = float(r["measured_s"])
    return d
def spearman(x, y):
    n = len(x)
    rank = lambda v: {i: k for k, i in enumerate(sorted(range(n), key=lambda i: v[i]))}
    rx, ry = rank(x), rank(y)
    return 1 - 6 * sum((rx[i] - ry[i]) ** 2 for i in range(n)) / (n * (n * n - 1))
runs = [load(p) for p in sys.argv[1:]]
for i in range(len(runs)):
    for j in range(i + 1, len(runs)):
        rs = []
        for op in runs[i]:
            ks = [k for k in runs[i][op] if k in runs[j].get(op, {})]
            if len(ks) >= 3: rs.append(spearman([runs[i][op][k] for k in ks], [runs[j][op][k] for k in ks]))
        rs.sort()
        print("runs %d and %d: median Spearman of measured times over %d operators %.2f (min %.2f, max %.2f)" % (i + 1, j + 1, len(rs), rs[len(rs) // 2], rs[0], rs[-1]))
