import csv, sys
rows = list(csv.reader(open(sys.argv[1]))); hdr = rows[1]; ci = {h: i for i, h in enumerate(hdr)}
def num(x):
    try: return float(x.replace(",", ""))
    except: return 0.0
st = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
data = [r for r in rows[2:] if len(r) > 5]
tot = sum(num(r[ci["Warp Stall Sampling (All Samples)"]]) for r in data)
top = sorted(range(len(data)), key=lambda k: -num(data[k][ci["Warp Stall Sampling (All Samples)"]]))[:int(sys.argv[2]) if len(sys.argv) > 2 else 25]
for k in sorted(top):
    r = data[k]; s = num(r[ci["Warp Stall Sampling (All Samples)"]])
    reasons = sorted(((num(r[ci[h]]), h[6:]) for h in st), reverse=True)[:3]
    print("%5d %5.1f%% ex=%8.0f  %-60s %s" % (k, 100 * s / tot, num(r[ci["Instructions Executed"]]), r[ci["Source"]][:60], ", ".join("%s %.0f" % (n, v) for v, n in reasons if v)))
