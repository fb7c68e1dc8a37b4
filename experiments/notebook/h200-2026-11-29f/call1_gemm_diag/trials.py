import json, sys, os
for path in sys.argv[1:]:
    try:
        s = json.load(open(path))
    except Exception as e:
        print(path, "unreadable", e); continue
    print("==", os.path.basename(path))
    for gi, g in enumerate(s["groups"]):
        t = g.get("trials") or []
        if not t: continue
        timed = [x for x in t if x.get("measured_s")]
        best = min((x["measured_s"] for x in timed), default=None)
        print("  group %d: %d trials, %d timed, chosen %s %s measured %s best %s" % (
            gi, len(t), len(timed), g.get("kernel", {}).get("family"), g.get("kernel", {}).get("params"),
            g.get("measured_s"), best))
        for r, x in enumerate(t):
            print("   %2d %-8s %-60s pred %.4g ms meas %s %s" % (r, x["family"], json.dumps(x.get("params"))[:60],
                  x["predicted_s"] * 1e3, "%.4g ms" % (x["measured_s"] * 1e3) if x.get("measured_s") else "-",
                  x.get("failure", "")[:60]))
