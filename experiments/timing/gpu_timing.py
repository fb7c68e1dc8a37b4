#!/usr/bin/env python3
"""The one GPU timing method of every Tessel suite (../../../shared/BENCHMARKS.md, "How GPU time is
measured"), for the PyTorch side. Tessel's own side is `tessel run --time N`, which does the same in
C++ (kernels/cuda/cuda_backend.cpp: one run captured as a CUDA graph, its replays timed with events).

    timer = GpuTimer(torch, cold_l2=False, warmup=5, repeats=30)
    result = timer.time(lambda: fn(tensors))   # {"ms": median, "method": "graph" | "loop", ...}

* Both sides as GPU time. The callable is captured once in a CUDA graph (after `warmup` eager calls
  on a side stream, as torch.cuda.graph asks) and each replay is timed with CUDA events; the
  median of `repeats` replays after `warmup` replays is the result. No Python dispatch, no
  torch.compile guard and no host launch overhead sits inside the timed window, exactly as on
  Tessel's side.
* Replays are queued behind a spin (torch.cuda._sleep, 1 ms plus 50 us a replay), so the GPU runs
  them back to back: without it a replay of a few microseconds would be timed at the pace of
  Python queueing it (an event recorded on an idle GPU fires at once; the replay arrives later).
  Tessel's side queues its replays behind a spin kernel the same way.
* A callable that cannot be captured (it copies host tensors, synchronizes, ...) is timed as a
  back-to-back loop of `repeats` calls between two events, divided by `repeats`: method "loop".
  Tables mark such rows.
* L2 state. Warm by default: the same inputs every replay, so what fits in L2 stays there. With
  cold_l2=True a buffer of twice the L2 (from the device's properties) is overwritten before every
  replay, outside the timed window; Tessel's `--cold-l2` does the same. In loop mode the flush
  cannot sit between calls, so a cold loop times calls one by one (each between its own events,
  launch overhead included) and says so in "method".
"""

import statistics


class GpuTimer:
    def __init__(self, torch, cold_l2=False, warmup=5, repeats=30):
        self.torch, self.cold_l2, self.warmup, self.repeats = torch, cold_l2, warmup, repeats
        self._flush = None
        self._cycles_per_us = None
        if cold_l2:
            l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or (64 << 20)
            self._flush = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")

    @property
    def l2_state(self):
        return "cold" if self.cold_l2 else "warm"

    def flush(self):
        if self._flush is not None:
            self._flush.fill_(1)

    def spin(self, n):
        """Hold the current stream for 1 ms + 50 us per replay that will be queued behind."""
        torch = self.torch
        if self._cycles_per_us is None:  # calibrate torch.cuda._sleep's cycles once
            torch.cuda.synchronize()
            start, end = self._events(1)[0]
            cycles = 1 << 20
            start.record()
            torch.cuda._sleep(cycles)
            end.record()
            torch.cuda.synchronize()
            self._cycles_per_us = cycles / max(start.elapsed_time(end) * 1e3, 1.0)
        torch.cuda._sleep(int(self._cycles_per_us * (1000 + 50 * n)))

    def _events(self, n):
        ev = self.torch.cuda.Event
        return [(ev(enable_timing=True), ev(enable_timing=True)) for _ in range(n)]

    def _median_ms(self, pairs):
        self.torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in pairs)

    def time(self, fn):
        """Median GPU milliseconds of fn; see the module docstring."""
        torch = self.torch
        try:
            graph = self.capture(fn)
        except Exception as e:  # not capturable: the loop fallback
            torch.cuda.synchronize()
            result = self.time_loop(fn)
            result["capture_error"] = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
            return result
        for _ in range(self.warmup):
            graph.replay()
        pairs = self._events(self.repeats)
        self.spin(self.repeats)
        for start, end in pairs:
            self.flush()
            start.record()
            graph.replay()
            end.record()
        ms = self._median_ms(pairs)
        del graph
        return {"ms": ms, "method": "graph", "l2": self.l2_state}

    def capture(self, fn):
        """fn captured in a CUDA graph after `warmup` calls on a side stream."""
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(max(self.warmup, 1)):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        torch.cuda.synchronize()
        return graph

    def time_loop(self, fn):
        """Back-to-back calls between two events, divided by their number (warm L2); one call per
        event pair when the L2 must be flushed before each."""
        torch = self.torch
        for _ in range(self.warmup):
            fn()
        torch.cuda.synchronize()
        if self.cold_l2:
            pairs = self._events(self.repeats)
            for start, end in pairs:
                self.flush()
                start.record()
                fn()
                end.record()
            return {"ms": self._median_ms(pairs), "method": "loop-per-call", "l2": "cold"}
        rounds = []
        self.spin(5 * self.repeats)
        for start, end in self._events(5):
            start.record()
            for _ in range(self.repeats):
                fn()
            end.record()
            rounds.append((start, end))
        return {"ms": self._median_ms(rounds) / self.repeats, "method": "loop", "l2": "warm"}
