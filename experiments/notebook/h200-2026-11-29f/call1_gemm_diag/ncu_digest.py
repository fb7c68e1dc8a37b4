# Key metrics per kernel from ncu --csv --page details files.
import csv, sys, io, collections
want = ["Duration", "Compute (SM) Throughput", "Memory Throughput", "DRAM Throughput", "L2 Cache Throughput",
        "Registers Per Thread", "Grid Size", "Block Size", "Dynamic Shared Memory Per Block", "Achieved Occupancy",
        "Issued Warp Per Scheduler", "No Eligible", "Warp Cycles Per Issued Instruction", "One or More Eligible",
        "Avg. Active Threads Per Warp", "L1/TEX Hit Rate", "L2 Hit Rate", "Mem Busy", "Max Bandwidth", "Waves Per SM"]
for path in sys.argv[1:]:
    text = open(path, errors="replace").read()
    start = text.find('"ID"')
    if start < 0:
        print("==", path, "no csv"); continue
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    per = collections.OrderedDict()
    for r in rows:
        key = (r["ID"], r["Kernel Name"][:90])
        per.setdefault(key, {})[r["Metric Name"]] = (r["Metric Value"], r["Metric Unit"])
    print("==", path, len(per), "kernels")
    for (i, name), m in per.items():
        print("  [%s] %s" % (i, name))
        print("     " + "; ".join("%s=%s%s" % (w, m[w][0], m[w][1]) for w in want if w in m))
        stalls = {k.replace("smsp__average_warps_issue_stalled_", "").replace("_per_issue_active.ratio", ""): v for k, v in m.items() if k.startswith("smsp__") or k.startswith("sm__")}
        if stalls:
            print("     stalls: " + "; ".join("%s=%s" % (k, v[0]) for k, v in list(stalls.items())))
