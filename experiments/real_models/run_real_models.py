#!/usr/bin/env python3
"""Real models (../../../shared/BENCHMARKS.md, "Real models"): whole networks from torchvision, timm and
transformers, exported to ONNX on the GPU machine with random weights from their constructors (no
downloads), each at two batch sizes (or sequence lengths), fp16 on the GPU, side by side:

  * Tessel: `tessel run MODEL.onnx --device cuda --hw HW --check ...` with an empty compile cache:
    every output compared with the reference interpreter (fp64) before the compiled model is timed as
    CUDA-graph replays, each between two CUDA events (median). With the warm phase (below) this is two
    runs: the cold compile + check in the parallel phase, the timing alone in the serial loop, from
    the case's compile cache; otherwise one `tessel run ... --check --time N --report R.json`;
  * PyTorch eager and torch.compile (default mode) of the same module, timed the same way by
    experiments/timing/gpu_timing.py (captured in a CUDA graph, replays timed with events; a callable
    that cannot be captured is timed as a loop and the row says so); for transformers models also the
    same weights with attn_implementation="sdpa" (eager and compiled) unless --no-sdpa, as PyTorch's
    faster attention path; the export itself uses the eager ("plain ops") attention.
  * the bundled models (experiments/models/*.json, f32): Tessel only, no PyTorch column.

Warm phase first (--warm-jobs N, default 6; 0 turns it off): the selected cases are split over N
worker processes (this script with a hidden --warm-compile), started together; each builds its models
(same seeds and code path as below), exports each case's ONNX file to the path the serial loop uses
(with a sidecar WORK/onnx/ID.warm.json naming the exporter and this run's token), then runs Tessel's
cold compile + check of it (below), then torch.compile(model)(*inputs) once (and the SDPA variant's,
unless --no-sdpa) to fill Inductor's on-disk caches, in TORCHINDUCTOR_CACHE_DIR (default WORK/inductor,
set before anything starts, shared by both phases). Why: whole-model torch.compile is 20-60 s of CPU
time per case, Tessel's NVRTC compiles and fp64 reference check 10-35 s, done in parallel here while
nothing is timed; the timings stay alone on the GPU. torch._inductor.config.autotune_local_cache is
False in the workers, so no kernel configuration chosen while the GPU is shared is stored; it is False
in the serial phase of such a run too, since Inductor's config is part of its FX graph cache key (the
serial phase still autotunes, alone, at each first call). The phase ends when every worker has, or
after --warm-timeout s (default 300, cut to what is left of --time-budget), when the stragglers'
process groups are killed (and the Tessel run each was in, its own process group). Worker failures are
never fatal: the serial loop does everything again for a case whose warm-up failed. Each row says
`warm_phase` ("ok", "failed: ...", "off"); the json's `warm_phase` and `warm_phase_s` give the phase's
workers and seconds. The serial loop takes a case's ONNX file when the warm phase of this run wrote it
(exporter "cached (warm phase: torchscript)", say) and exports it itself otherwise.

Tessel in the warm phase (unless --no-warm-check or the binary is missing): right after the export,
before torch.compile (so a check finished is kept when the worker is killed during its compile), the
worker runs `tessel run MODEL.onnx --device cuda --hw HW --check --cache WORK/cache/ID --report
WORK/reports/ID.check.json --threads T` (no --time; T = max(1, cores // workers), the cores shared out
as Inductor's compile threads are), the cache emptied first, with the serial loop's timeout (cut to
end 5 s before the phase's deadline; not started with under 20 s left). The bundled models are
checked the same way by the workers (no torch needed). The serial loop then, per case:
  * check passed (exit 0, every output ok) in this run's warm phase, on the ONNX file the serial loop
    uses: `tessel run ... --cache WORK/cache/ID --time N --report R.json` WITHOUT --check, every kernel
    from the compile cache; tessel_ms and the timing from it, its compile seconds as
    `tessel_compile_cached_s` (and its cache hits as `tessel_time_cache_hits`); correctness,
    check_mode, rel_l2_error, kernels, predicted time and the cold compile (schedule_s, codegen_s,
    toolchain_s, tessel_compile_cold_s) from the check's report. tessel_correct is the check's verdict:
    a row can be correct with no time when only the timing run failed (its tessel_status says so).
    A timing run that wrote a new .cubin into the cache (or had no hit) timed code not all checked:
    its time is discarded (tessel_warm_timing_discarded) and the case falls back to the serial run;
  * check failed (exit 1: a mismatch): no run; code that failed its check is never timed; the row is
    the check's (tessel_status 1, tessel_mismatch, tessel_log);
  * no check (phase off, --no-warm-check, worker killed or dead, check skipped, timed out, crashed,
    another exit status, a re-exported file): today's single cold `tessel run --check --time N`.
Each Tessel row says `tessel_check_phase` ("warm" or "serial") and, when the warm phase had Tessel
checks on, `tessel_warm_check` (its verdict in words); warm rows keep `tessel_check_wall_s`,
`tessel_check_threads`, `tessel_check_report` and `tessel_check_cmd`. Tessel's cold compile time of a
"warm" row was measured beside other CPU work (several workers compiling at once, T threads each), so
it is an upper bound of the cold compile alone; the serial run's compile from the cache is
`tessel_compile_cached_s`.

Then, per model: export and PyTorch timings of every case, the PyTorch model freed, then one Tessel
subprocess per case (timing only when the warm phase checked it), so the GPU never runs two timed
things at once. --time-budget counts from the script's start (the warm phase included): no new model
is started after it.

Writes OUT/real_models.json (rows and the environment), OUT/real_models.csv, OUT/real_models.png
(speedup over torch.compile, log scale) when matplotlib imports, and prints a table last. json and
csv are rewritten after every case, so a run cut off keeps what it measured.

  experiments/real_models/run_real_models.py [--tessel dist/tessel/bin/tessel] [--out DIR] [--only NAME ...]
      [--warm-jobs 6] [--warm-timeout 300] [--no-warm-check]
  experiments/real_models/run_real_models.py --render A/real_models.json B/real_models.json --out DIR
"""

import argparse
import csv
import gc
import glob
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "experiments", "timing"))

T_START = time.time()


def log(*args):
    print("[%6.1fs]" % (time.time() - T_START), *args, file=sys.stderr, flush=True)


def short_error(e, limit=600):
    text = "%s: %s" % (type(e).__name__, e)
    return text[:limit]


def tail(text, limit=3000):
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return text[-limit:]


# ---- The models ------------------------------------------------------------------------------------
#
# Each model: name, family, a builder (torch, attn) -> nn.Module returning one tensor, an input maker
# (torch, case) -> tuple of tensors, input names, and its cases. A case is {"batch": B} or
# {"batch": B, "seq": S}; its row id is NAME_bB or NAME_bB_sS.

IMAGE = 224


def image_inputs(torch, case):
    return (torch.randn(case["batch"], 3, IMAGE, IMAGE, device="cuda", dtype=torch.float16),)


def token_inputs(vocab):
    def make(torch, case):
        return (torch.randint(0, vocab, (case["batch"], case["seq"]), device="cuda", dtype=torch.int64),)
    return make


def whisper_inputs(torch, case):
    # WhisperEncoder asks for exactly 2 * max_source_positions (3000) mel frames.
    return (torch.randn(case["batch"], 80, 3000, device="cuda", dtype=torch.float16),)


def torchvision_builder(fn_name):
    def build(torch, attn):
        import torchvision
        return getattr(torchvision.models, fn_name)(weights=None)
    return build


def timm_builder(model_name):
    def build(torch, attn):
        import timm
        return timm.create_model(model_name, pretrained=False)
    return build


_WRAPPER = {}


def last_hidden_wrapper(torch):
    """nn.Module around a transformers model: one input (by keyword), the last hidden state out."""
    if "cls" not in _WRAPPER:
        class LastHidden(torch.nn.Module):
            def __init__(self, inner, input_kw, extra):
                super().__init__()
                self.inner, self.input_kw, self.extra = inner, input_kw, dict(extra)

            def forward(self, x):
                kwargs = dict(self.extra)
                kwargs[self.input_kw] = x
                out = self.inner(**kwargs)
                if hasattr(out, "last_hidden_state") and out.last_hidden_state is not None:
                    return out.last_hidden_state
                return out[0]
        _WRAPPER["cls"] = LastHidden
    return _WRAPPER["cls"]


def hf_config(config_cls, attn, **kw):
    import transformers
    cls = getattr(transformers, config_cls)
    try:
        cfg = cls(attn_implementation=attn, **kw)
    except TypeError:
        cfg = cls(**kw)
    try:
        cfg._attn_implementation = attn
    except Exception:  # a read-only property in some versions: the constructor argument did it
        pass
    return cfg


def hf_builder(config_cls, model_cls, config_kw, input_kw="input_ids", call_kw=None, init_kw=None,
               submodule=None):
    def build(torch, attn):
        import transformers
        cfg = hf_config(config_cls, attn, **config_kw)
        cls = getattr(transformers, model_cls)
        try:
            model = cls(cfg, **(init_kw or {}))
        except TypeError:
            model = cls(cfg)
        if hasattr(model, "set_attn_implementation"):
            try:
                model.set_attn_implementation(attn)
            except Exception as e:
                log("  set_attn_implementation(%r) failed: %s" % (attn, short_error(e, 200)))
        if submodule:
            model = getattr(model, submodule)
        return last_hidden_wrapper(torch)(model, input_kw, call_kw or {})
    return build


def hf_attn_of(module):
    inner = getattr(module, "inner", None)
    cfg = getattr(inner, "config", None)
    return getattr(cfg, "_attn_implementation", None) if cfg is not None else None


MODELS = [
    # torchvision CNNs and ViT
    {"name": "resnet50", "family": "torchvision", "kind": "cnn", "build": torchvision_builder("resnet50"),
     "inputs": image_inputs, "input_names": ["image"], "cases": [{"batch": 1}, {"batch": 8}]},
    {"name": "mobilenet_v2", "family": "torchvision", "kind": "cnn", "build": torchvision_builder("mobilenet_v2"),
     "inputs": image_inputs, "input_names": ["image"], "cases": [{"batch": 1}, {"batch": 8}]},
    {"name": "efficientnet_b0", "family": "torchvision", "kind": "cnn",
     "build": torchvision_builder("efficientnet_b0"),
     "inputs": image_inputs, "input_names": ["image"], "cases": [{"batch": 1}, {"batch": 8}]},
    {"name": "convnext_tiny", "family": "torchvision", "kind": "cnn", "build": torchvision_builder("convnext_tiny"),
     "inputs": image_inputs, "input_names": ["image"], "cases": [{"batch": 1}, {"batch": 8}]},
    {"name": "resnext50", "family": "torchvision", "kind": "cnn", "build": torchvision_builder("resnext50_32x4d"),
     "inputs": image_inputs, "input_names": ["image"], "cases": [{"batch": 1}, {"batch": 8}]},
    {"name": "vit_b_16", "family": "torchvision", "kind": "vision transformer",
     "build": torchvision_builder("vit_b_16"),
     "inputs": image_inputs, "input_names": ["image"], "cases": [{"batch": 1}, {"batch": 8}]},
    # timm
    {"name": "deit_small", "family": "timm", "kind": "vision transformer",
     "build": timm_builder("deit_small_patch16_224"),
     "inputs": image_inputs, "input_names": ["image"], "cases": [{"batch": 1}, {"batch": 8}]},
    # transformers: encoders and decoders
    {"name": "bert_base", "family": "transformers", "kind": "encoder LM",
     "build": hf_builder("BertConfig", "BertModel", {}, init_kw={"add_pooling_layer": False}),
     "inputs": token_inputs(30522), "input_names": ["input_ids"],
     "cases": [{"batch": 1, "seq": 128}, {"batch": 8, "seq": 128}]},
    {"name": "gpt2", "family": "transformers", "kind": "decoder LM",
     "build": hf_builder("GPT2Config", "GPT2Model", {"use_cache": False}, call_kw={"use_cache": False}),
     "inputs": token_inputs(50257), "input_names": ["input_ids"],
     "cases": [{"batch": 1, "seq": 128}, {"batch": 4, "seq": 128}]},
    {"name": "llama_2048x4", "family": "transformers", "kind": "decoder LM",
     "description": "LlamaModel, hidden 2048, 4 layers, 16 heads, intermediate 5632, vocab 32000",
     "build": hf_builder("LlamaConfig", "LlamaModel",
                         {"hidden_size": 2048, "num_hidden_layers": 4, "num_attention_heads": 16,
                          "num_key_value_heads": 16, "intermediate_size": 5632, "vocab_size": 32000,
                          "max_position_embeddings": 2048, "use_cache": False},
                         call_kw={"use_cache": False}),
     "inputs": token_inputs(32000), "input_names": ["input_ids"],
     "cases": [{"batch": 1, "seq": 128}, {"batch": 1, "seq": 512}]},
    {"name": "t5_small_encoder", "family": "transformers", "kind": "encoder LM",
     "description": "T5EncoderModel, t5-small sizes (d_model 512, 6 layers, 8 heads, d_ff 2048)",
     "build": hf_builder("T5Config", "T5EncoderModel",
                         {"d_model": 512, "d_kv": 64, "d_ff": 2048, "num_layers": 6, "num_heads": 8,
                          "vocab_size": 32128, "feed_forward_proj": "relu", "use_cache": False}),
     "inputs": token_inputs(32128), "input_names": ["input_ids"],
     "cases": [{"batch": 1, "seq": 128}, {"batch": 8, "seq": 128}]},
    {"name": "whisper_base_encoder", "family": "transformers", "kind": "speech encoder",
     "description": "WhisperModel(whisper-base sizes).encoder, 80 mel bins x 3000 frames",
     "build": hf_builder("WhisperConfig", "WhisperModel",
                         {"d_model": 512, "encoder_layers": 6, "encoder_attention_heads": 8,
                          "encoder_ffn_dim": 2048, "decoder_layers": 1, "decoder_attention_heads": 8,
                          "decoder_ffn_dim": 2048, "num_mel_bins": 80, "max_source_positions": 1500,
                          "use_cache": False},
                         input_kw="input_features", submodule="encoder"),
     "inputs": whisper_inputs, "input_names": ["input_features"],
     "cases": [{"batch": 1}, {"batch": 4}]},
]

BUNDLED_NOTE = "Tessel only: no PyTorch equivalent is defined here (bundled JSON model, f32)"
# What the serial loop takes per warmed case (Tessel's cached run, check and timing; PyTorch's eager,
# torch.compile and SDPA timings): 136 s for 6 cases on an H200 machine, 2026-11-29e call 4. The warm
# phase leaves this much of --time-budget per case to the serial loop (at most half the budget): with
# budgets of 300 s it had taken 286 s and the loop timed nothing (2026-11-29e call 3).
SERIAL_S_PER_CASE = 23


def case_id(model, case):
    rid = "%s_b%d" % (model["name"], case["batch"])
    if "seq" in case:
        rid += "_s%d" % case["seq"]
    return rid


def selected(only, *names):
    return not only or any(n in only for n in names if n)


# ---- Environment -----------------------------------------------------------------------------------

def versions():
    out = {"python": sys.version.split()[0]}
    for mod in ("torch", "torchvision", "transformers", "timm", "onnx", "onnxscript", "onnxruntime", "numpy"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception as e:
            out[mod] = None if isinstance(e, ImportError) else "error: " + short_error(e, 100)
    try:
        import torch
        out["cuda"] = torch.version.cuda
    except Exception:
        pass
    return out


def gpu_name():
    try:
        import torch
        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except Exception:
        pass
    try:
        proc = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30)
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout.strip().splitlines()[0]
    except Exception:
        pass
    return "unknown GPU"


def tessel_version(args):
    for flag in ("version", "--version"):
        try:
            proc = subprocess.run([args.tessel, flag], capture_output=True, text=True, timeout=60)
            if proc.returncode == 0:
                return proc.stdout.strip()[:500]
        except Exception as e:
            return "error: " + short_error(e, 300)
    return "error: %s" % tail(proc.stdout + proc.stderr, 300)


def ensure_tessel(args):
    """Unpack dist/tessel-*.tar.xz when the default binary is missing (as scripts/device_run does)."""
    if os.path.exists(args.tessel):
        return
    dist = os.path.join(ROOT, "dist")
    tarballs = sorted(glob.glob(os.path.join(dist, "tessel-*-x86_64.tar.xz")))
    if tarballs and os.path.abspath(args.tessel) == os.path.join(dist, "tessel", "bin", "tessel"):
        log("unpacking", tarballs[0])
        subprocess.run(["tar", "-C", dist, "-xJf", tarballs[0]], check=False)


# ---- ONNX export -----------------------------------------------------------------------------------

def onnx_files(path):
    return [p for p in glob.glob(path + "*") if os.path.isfile(p)]


def remove_onnx(path):
    for p in onnx_files(path):
        try:
            os.remove(p)
        except OSError:
            pass


def describe_onnx(path):
    """Opset, node count, op types and input/output shapes of an exported model (no weight data)."""
    info = {"onnx_bytes": sum(os.path.getsize(p) for p in onnx_files(path))}
    try:
        import onnx
        m = onnx.load(path, load_external_data=False)
        info["opset"] = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), None)
        info["onnx_nodes"] = len(m.graph.node)
        ops = {}
        for n in m.graph.node:
            key = n.op_type if n.domain in ("", "ai.onnx") else "%s:%s" % (n.domain, n.op_type)
            ops[key] = ops.get(key, 0) + 1
        info["onnx_ops"] = dict(sorted(ops.items(), key=lambda kv: -kv[1]))
        init = {t.name for t in m.graph.initializer}

        def shape(vi):
            dims = []
            for d in vi.type.tensor_type.shape.dim:
                dims.append(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else (d.dim_param or "?"))
            return dims
        info["onnx_inputs"] = [{"name": i.name, "elem_type": i.type.tensor_type.elem_type, "shape": shape(i)}
                               for i in m.graph.input if i.name not in init]
        info["onnx_outputs"] = [{"name": o.name, "elem_type": o.type.tensor_type.elem_type, "shape": shape(o)}
                                for o in m.graph.output]
    except Exception as e:
        info["onnx_inspect_error"] = short_error(e, 300)
    return info


def export_onnx(torch, module, inputs, path, input_names, output_names):
    """torch.onnx.export with the TorchScript exporter (dynamo=False), else the dynamo one."""
    errors = {}
    for dynamo in (False, True):
        remove_onnx(path)
        kw = dict(opset_version=18, input_names=input_names, output_names=output_names, dynamo=dynamo)
        t0 = time.time()
        try:
            fastpath = None
            try:  # nn.MultiheadAttention's fused fast path has no ONNX export: plain ops
                fastpath = torch.backends.mha.get_fastpath_enabled()
                torch.backends.mha.set_fastpath_enabled(False)
            except Exception:
                pass
            try:
                torch.onnx.export(module, tuple(inputs), path, **kw)
            finally:
                if fastpath is not None:
                    torch.backends.mha.set_fastpath_enabled(fastpath)
            if not os.path.exists(path):
                raise RuntimeError("the exporter returned without writing %s" % path)
            out = {"exporter": "dynamo" if dynamo else "torchscript", "export_s": time.time() - t0}
            if errors:
                out["export_errors"] = errors
            return out
        except Exception as e:
            errors["dynamo" if dynamo else "torchscript"] = short_error(e, 800)
            log("  export (dynamo=%s) failed: %s" % (dynamo, short_error(e, 300)))
    remove_onnx(path)
    return {"exporter": None, "export_errors": errors}


# ---- PyTorch side ----------------------------------------------------------------------------------

def free_cuda(torch):
    gc.collect()
    try:
        torch._dynamo.reset()
    except Exception:
        pass
    try:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    except Exception:
        pass


def cuda_healthy(torch):
    try:
        torch.cuda.synchronize()
        return float(torch.ones(4, device="cuda").sum().item()) == 4.0
    except Exception:
        return False


def time_callable(timer, fn, key, row):
    """timer.time(fn) into row[key + "_ms"], with the method and a capture error if any."""
    try:
        r = timer.time(fn)
        row[key + "_ms"] = r.get("ms")
        row[key + "_method"] = r.get("method")
        if r.get("capture_error"):
            row[key + "_capture_error"] = r["capture_error"]
    except Exception as e:
        row[key + "_error"] = short_error(e)
        log("  %s timing failed: %s" % (key, short_error(e, 300)))


def time_module(torch, timer, module, inputs, row, args, prefix=""):
    """Eager and torch.compile (default mode) times of module(*inputs), in row."""
    with torch.no_grad():
        time_callable(timer, lambda: module(*inputs), prefix + "eager", row)
        if args.no_compile:
            return
        compiled = None
        try:
            torch._dynamo.reset()
            compiled = torch.compile(module)
            torch.cuda.synchronize()
            t0 = time.time()
            compiled(*inputs)
            torch.cuda.synchronize()
            row[prefix + "torch_compile_s"] = time.time() - t0
            time_callable(timer, lambda: compiled(*inputs), prefix + "compile", row)
        except Exception as e:
            row[prefix + "compile_error"] = short_error(e)
            log("  %storch.compile failed: %s" % (prefix, short_error(e, 300)))
        finally:
            del compiled
            free_cuda(torch)


def torch_part(model, cases, args):
    """Export and PyTorch timings of every case of one model; returns {case id: row fields}.
    Never raises: failures are in the rows."""
    results = {case_id(model, c): {} for c in cases}
    try:
        import torch
    except Exception as e:
        for r in results.values():
            r["torch_error"] = "torch not importable: " + short_error(e, 200)
        return results
    module = sdpa_module = None
    try:
        from gpu_timing import GpuTimer
        if args.warm_token:
            warm_inductor_config()  # the warm phase's config, so its cache entries match
        torch.manual_seed(0)
        t0 = time.time()
        module = model["build"](torch, "eager").eval().half().cuda()
        build_s = time.time() - t0
        params = sum(p.numel() for p in module.parameters())
        attn = hf_attn_of(module)
        timer = GpuTimer(torch, cold_l2=args.cold_l2, warmup=5, repeats=args.repeats)
        for case in cases:
            rid = case_id(model, case)
            row = results[rid]
            row.update({"build_s": build_s, "params": params})
            if attn:
                row["attn_implementation"] = attn
            try:
                torch.manual_seed(1)
                inputs = model["inputs"](torch, case)
                path = onnx_path(args, rid)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                cached = warm_export(args, rid)
                if cached:
                    log("  %s: ONNX file from the warm phase (%s)" % (rid, cached["exporter"]))
                    row["exporter"] = "cached (warm phase: %s)" % cached["exporter"]
                    row["warm_export_s"] = cached.get("export_s")
                    if cached.get("export_errors"):
                        row["export_errors"] = cached["export_errors"]
                else:
                    log("  %s: export" % rid)
                    row.update(export_onnx(torch, module, inputs, path, model["input_names"], ["output"]))
                if row.get("exporter"):
                    row["onnx"] = path
                    row.update(describe_onnx(path))
                    row["input_shapes"] = {n: list(t.shape) for n, t in zip(model["input_names"], inputs)}
                if args.no_torch_timing:
                    continue
                log("  %s: eager and torch.compile" % rid)
                time_module(torch, timer, module, inputs, row, args)
                if model["family"] == "transformers" and not args.no_sdpa:
                    if sdpa_module is None:
                        try:
                            sdpa_module = model["build"](torch, "sdpa").eval().half().cuda()
                            missing = sdpa_module.load_state_dict(module.state_dict(), strict=False)
                            if getattr(missing, "missing_keys", None):
                                log("  sdpa variant: missing keys", missing.missing_keys[:5])
                        except Exception as e:
                            row["sdpa_error"] = short_error(e)
                            sdpa_module = False
                    if sdpa_module:
                        row["sdpa_attn_implementation"] = hf_attn_of(sdpa_module)
                        log("  %s: sdpa eager and torch.compile" % rid)
                        time_module(torch, timer, sdpa_module, inputs, row, args, prefix="sdpa_")
                del inputs
            except Exception as e:
                row["torch_error"] = short_error(e, 1000)
                row["torch_traceback"] = tail(traceback.format_exc(), 2000)
                log("  %s failed: %s" % (rid, short_error(e, 300)))
                if not cuda_healthy(torch):
                    row["cuda_poisoned"] = True
                    log("  CUDA context unusable after this failure")
                    break
            finally:
                free_cuda(torch)
    except Exception as e:
        for r in results.values():
            if not r.get("exporter"):
                r["torch_error"] = short_error(e, 1000)
                r["torch_traceback"] = tail(traceback.format_exc(), 2000)
        log("  %s failed: %s" % (model["name"], short_error(e, 300)))
        if not cuda_healthy(torch):
            for r in results.values():
                r["cuda_poisoned"] = True
    finally:
        del module, sdpa_module
        free_cuda(torch)
    return results


def torch_part_isolated(model, cases, args, timeout):
    """torch_part in a child process (this script with --child), so a crash or a broken CUDA
    context stays there and its GPU memory is gone before Tessel runs."""
    out = os.path.join(args.work, "child-%s.json" % model["name"])
    if os.path.exists(out):
        os.remove(out)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", model["name"], "--child-out", out,
           "--work", args.work, "--repeats", str(args.repeats),
           "--child-cases"] + [case_id(model, c) for c in cases]
    if args.warm_token:
        cmd += ["--warm-token", args.warm_token]
    for flag in ("cold_l2", "no_compile", "no_sdpa", "no_torch_timing"):
        if getattr(args, flag):
            cmd.append("--" + flag.replace("_", "-"))
    status, text, wall = run_group(cmd, timeout, stream_stderr=True)
    try:
        with open(out) as f:
            return json.load(f)
    except Exception as e:
        why = "child process: status %s after %.0f s (%s)" % (status, wall, short_error(e, 200))
        return {case_id(model, c): {"torch_error": why, "torch_log": tail(text, 2000)} for c in cases}


# ---- Warm phase ------------------------------------------------------------------------------------
#
# Before the serial loop, --warm-jobs worker processes (this script with --warm-compile) export every
# selected case's ONNX file, run Tessel's cold compile + check of it (into the case's Tessel compile
# cache) and torch.compile once per case (and its SDPA variant), in parallel, so that the CPU work
# (NVRTC, the fp64 reference check, tracing, Inductor lowering, Triton compiles) fills the on-disk
# caches (TORCHINDUCTOR_CACHE_DIR, shared by both phases; WORK/cache/ID) while nothing is timed; the
# bundled models get their Tessel check there too. The serial loop then, alone on the GPU, takes the
# ONNX file when the warm phase wrote it in this run (sidecar json with this run's token), times Tessel
# from its compile cache without --check when the check passed (and not at all when it failed), and
# its torch.compile finds Inductor's caches full.
# autotune_local_cache is off in both phases: no kernel configuration chosen while the GPU is shared
# is stored, and the FX graph cache key (which includes Inductor's config) is the same in both.

def onnx_path(args, rid):
    return os.path.join(args.work, "onnx", rid + ".onnx")


def sidecar_path(args, rid):
    # Not ONNX_PATH + suffix: remove_onnx and onnx_files take every file named ONNX_PATH*.
    return os.path.join(args.work, "onnx", rid + ".warm.json")


def warm_export(args, rid):
    """The warm phase's export of this case in this run ({exporter, export_s, export_errors}), or None."""
    if not args.warm_token:
        return None
    try:
        with open(sidecar_path(args, rid)) as f:
            side = json.load(f)
        if side.get("token") == args.warm_token and side.get("exporter") and os.path.exists(onnx_path(args, rid)):
            return side
    except Exception:
        pass
    return None


def warm_inductor_config():
    """autotune_local_cache off: no best kernel configuration is read or written on disk."""
    try:
        import torch._inductor.config as inductor_config
        inductor_config.autotune_local_cache = False
    except Exception as e:
        log("  cannot set torch._inductor.config.autotune_local_cache: %s" % short_error(e, 200))


def warm_compile_once(torch, module, inputs):
    """torch.compile(module)(*inputs) as time_module does it (reset, no_grad); returns its seconds."""
    compiled = None
    try:
        with torch.no_grad():
            torch._dynamo.reset()
            compiled = torch.compile(module)
            torch.cuda.synchronize()
            t0 = time.time()
            compiled(*inputs)
            torch.cuda.synchronize()
            return time.time() - t0
    finally:
        del compiled
        free_cuda(torch)


def bundled_models(args):
    """The selected bundled models: [(row id "bundled/STEM", path)]."""
    out = []
    if args.skip_bundled:
        return out
    for path in sorted(glob.glob(os.path.join(ROOT, "experiments", "models", "*.json"))):
        stem = os.path.splitext(os.path.basename(path))[0]
        rid = "bundled/" + stem
        # A bundled file's own name selects it unless a real model has that name (resnet50).
        if selected(args.only, "bundled", rid, None if stem in {m["name"] for m in MODELS} else stem):
            out.append((rid, path))
    return out


def warm_tessel_check(args, rid, model_path, shape_args=()):
    """A warm worker's Tessel check of one case (tessel_check), with the serial loop's timeout cut to
    end 5 s before the warm phase's deadline (so no check outlives its worker); skipped when less than
    20 s would be left."""
    timeout = tessel_timeout(args)
    if args.warm_deadline:
        left = args.warm_deadline - time.time() - 5
        if left < 20:
            log("warm %s: no Tessel check (%.0f s left of the warm phase)" % (rid, left + 5))
            return {"token": args.warm_token, "status": "skipped",
                    "why": "%.0f s left of the warm phase" % (left + 5)}
        timeout = min(timeout, left)
    try:
        return tessel_check(args, rid, model_path, timeout, shape_args, threads=args.tessel_threads,
                            pgid_file=args.warm_out + ".tessel-pgid")
    except Exception as e:
        return {"token": args.warm_token, "status": "error", "why": short_error(e, 300)}


def warm_main(args):
    """Worker: export, Tessel check (with --warm-check) and torch.compile each case in args.warm_compile
    (same seeds and code path as torch_part), then the Tessel check of the bundled ids in it; results
    in args.warm_out, rewritten after every step. Never raises."""
    wanted = set(args.warm_compile)
    bundled = {}
    for rid in wanted:
        path = os.path.join(ROOT, "experiments", "models", rid[len("bundled/"):] + ".json")
        if args.warm_check and rid.startswith("bundled/") and os.path.isfile(path):
            bundled[rid] = path
    results = {}

    def flush():
        tmp = args.warm_out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(results, f, default=str)
        os.replace(tmp, args.warm_out)

    real = {case_id(m, c) for m in MODELS for c in m["cases"]} & wanted
    try:
        if real:
            import torch
            warm_inductor_config()
    except Exception as e:
        for rid in real:
            results[rid] = {"warm_phase": "failed: torch not importable: " + short_error(e, 200)}
        flush()
        real = set()
    do_compile = not (args.no_compile or args.no_torch_timing)
    for model in MODELS if real else []:
        cases = [c for c in model["cases"] if case_id(model, c) in real]
        if not cases:
            continue
        module = sdpa_module = None
        try:
            torch.manual_seed(0)
            module = model["build"](torch, "eager").eval().half().cuda()
        except Exception as e:
            for c in cases:
                results[case_id(model, c)] = {"warm_phase": "failed: build: " + short_error(e, 300)}
            flush()
            log("warm %s: build failed: %s" % (model["name"], short_error(e, 300)))
            module = None
            free_cuda(torch)
            continue
        poisoned = False
        for case in cases:
            rid = case_id(model, case)
            res, errors = {}, []
            t_case = time.time()
            try:
                torch.manual_seed(1)
                inputs = model["inputs"](torch, case)
                path = onnx_path(args, rid)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                log("warm %s: export" % rid)
                exp = export_onnx(torch, module, inputs, path, model["input_names"], ["output"])
                side = {"token": args.warm_token, "id": rid, "exporter": exp.get("exporter"),
                        "export_s": exp.get("export_s"), "export_errors": exp.get("export_errors")}
                tmp = sidecar_path(args, rid) + ".tmp"
                with open(tmp, "w") as f:
                    json.dump(side, f, default=str)
                os.replace(tmp, sidecar_path(args, rid))
                if not exp.get("exporter"):
                    errors.append("export: " + json.dumps(exp.get("export_errors"))[:200])
                elif args.warm_check:
                    # Before torch.compile: kept (flushed) even when the worker is killed during the compile.
                    info = describe_onnx(path)
                    info["input_shapes"] = {n: list(t.shape) for n, t in zip(model["input_names"], inputs)}
                    res["tessel_check"] = warm_tessel_check(args, rid, path, shape_args_for(info))
                    res["warm_phase"] = "failed: worker stopped after the Tessel check, before torch.compile ended"
                    results[rid] = res
                    flush()
                if do_compile:
                    try:
                        log("warm %s: torch.compile" % rid)
                        res["warm_compile_s"] = warm_compile_once(torch, module, inputs)
                    except Exception as e:
                        errors.append("compile: " + short_error(e, 200))
                    if model["family"] == "transformers" and not args.no_sdpa:
                        if sdpa_module is None:
                            try:
                                sdpa_module = model["build"](torch, "sdpa").eval().half().cuda()
                                sdpa_module.load_state_dict(module.state_dict(), strict=False)
                            except Exception as e:
                                errors.append("sdpa build: " + short_error(e, 200))
                                sdpa_module = False
                        if sdpa_module:
                            try:
                                log("warm %s: sdpa torch.compile" % rid)
                                res["warm_sdpa_compile_s"] = warm_compile_once(torch, sdpa_module, inputs)
                            except Exception as e:
                                errors.append("sdpa compile: " + short_error(e, 200))
                del inputs
            except Exception as e:
                errors.append(short_error(e, 300))
            finally:
                free_cuda(torch)
            res["warm_s"] = time.time() - t_case
            res["warm_phase"] = "ok" if not errors else ("failed: " + "; ".join(errors))[:500]
            results[rid] = res
            flush()
            log("warm %s: %s (%.0f s)" % (rid, res["warm_phase"][:200], res["warm_s"]))
            if not cuda_healthy(torch):
                for other in real:
                    results.setdefault(other, {"warm_phase": "failed: CUDA context unusable after an earlier "
                                                             "case of this worker"})
                flush()
                poisoned = True
                break
        del module, sdpa_module
        free_cuda(torch)
        if poisoned:
            break
    # Bundled models: the Tessel check only (a subprocess: this worker's CUDA context plays no part).
    for rid in sorted(wanted - real):
        if rid in results:
            continue
        t_case = time.time()
        if rid not in bundled:
            results[rid] = {"warm_phase": "failed: not a case of this script"}
        else:
            chk = warm_tessel_check(args, rid, bundled[rid])
            results[rid] = {"tessel_check": chk, "warm_s": time.time() - t_case,
                            "warm_phase": "ok" if chk.get("status") not in ("error", "skipped")
                            else "failed: Tessel check %s: %s" % (chk.get("status"), chk.get("why"))}
        flush()
    return 0


def run_warm_phase(args, ids, timeout):
    """Starts min(--warm-jobs, len(ids)) workers at once, waits for them (killing the process groups of
    those still running after timeout s, and of the Tessel check each was running). Returns ({case id:
    row fields, with the warm Tessel check under "tessel_check"}, metadata)."""
    t0 = time.time()
    n = max(1, min(args.warm_jobs, len(ids)))
    deadline = t0 + timeout
    # Tessel's NVRTC compiles and reference interpreter: the cores shared out as Inductor's are.
    tessel_threads = max(1, (os.cpu_count() or 16) // n)
    parts = [ids[w::n] for w in range(n)]
    wdir = os.path.join(args.work, "warm")
    os.makedirs(wdir, exist_ok=True)
    env = dict(os.environ)
    if "TORCHINDUCTOR_COMPILE_THREADS" not in env:
        # Inductor's compile pool: the CPU cores shared out, not each worker's pool as large as the machine.
        env["TORCHINDUCTOR_COMPILE_THREADS"] = str(max(1, (os.cpu_count() or 16) // n))
    workers = []
    for w, part in enumerate(parts):
        out = os.path.join(wdir, "worker-%d.json" % w)
        logf = os.path.join(wdir, "worker-%d.log" % w)
        for f in (out, logf, out + ".tessel-pgid"):
            if os.path.exists(f):
                os.remove(f)
        cmd = [sys.executable, os.path.abspath(__file__), "--warm-compile"] + part + [
            "--warm-out", out, "--warm-token", args.warm_token, "--work", args.work]
        if args.warm_check:
            cmd += ["--warm-check", "--tessel", args.tessel, "--hw", args.hw, "--tessel-threads", str(tessel_threads),
                    "--tessel-timeout", repr(args.tessel_timeout), "--call-limit", repr(args.call_limit),
                    "--t-start", repr(T_START), "--warm-deadline", repr(deadline)]
        for flag in ("no_compile", "no_sdpa", "no_torch_timing"):
            if getattr(args, flag):
                cmd.append("--" + flag.replace("_", "-"))
        wk = {"cases": part, "out": out, "log": logf, "status": None}
        try:
            with open(logf, "w") as lf:
                wk["proc"] = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                              env=env, start_new_session=True)
        except OSError as e:
            wk["status"] = "error: " + short_error(e, 200)
        workers.append(wk)
    log("warm phase: %d workers for %d cases (timeout %.0f s, Inductor cache %s, %s compile threads each; %s)"
        % (n, len(ids), timeout, os.environ.get("TORCHINDUCTOR_CACHE_DIR"), env["TORCHINDUCTOR_COMPILE_THREADS"],
           "Tessel checks with %d threads each" % tessel_threads if args.warm_check else "no Tessel check"))
    while True:
        running = [wk for wk in workers if wk.get("proc") and wk["status"] is None]
        for wk in running:
            rc = wk["proc"].poll()
            if rc is not None:
                wk["status"], wk["wall_s"] = rc, time.time() - t0
                log("  warm worker %d done: status %s after %.0f s" % (workers.index(wk), rc, wk["wall_s"]))
        running = [wk for wk in workers if wk.get("proc") and wk["status"] is None]
        if not running:
            break
        if time.time() >= deadline:
            for wk in running:
                try:
                    os.killpg(wk["proc"].pid, signal.SIGKILL)
                except OSError:
                    pass
                try:
                    wk["proc"].wait(timeout=30)
                except Exception:
                    pass
                # The Tessel check it was running (its own process group), if any.
                try:
                    with open(wk["out"] + ".tessel-pgid") as f:
                        pgid = int(f.read().strip())
                    os.killpg(pgid, signal.SIGKILL)
                    log("  warm worker %d: its tessel run (process group %d) killed" % (workers.index(wk), pgid))
                except (OSError, ValueError):
                    pass
                try:
                    os.remove(wk["out"] + ".tessel-pgid")
                except OSError:
                    pass
                wk["status"], wk["wall_s"] = "timeout", time.time() - t0
                log("  warm worker %d killed after %.0f s" % (workers.index(wk), wk["wall_s"]))
            break
        time.sleep(1.0)
    fields, meta_workers = {}, []
    for w, wk in enumerate(workers):
        try:
            with open(wk["out"]) as f:
                got = json.load(f)
        except Exception:
            got = {}
        try:
            with open(wk["log"], errors="replace") as f:
                text = f.read()
        except Exception:
            text = ""
        for rid in wk["cases"]:
            r = got.get(rid) if isinstance(got.get(rid), dict) else None
            if r is None:
                if wk["status"] == "timeout":
                    why = "worker killed after the warm timeout (%.0f s) before this case finished" % timeout
                else:
                    why = "worker ended (status %s) without a result for this case: %s" % (
                        wk["status"], (tail(text, 200).strip().splitlines() or [""])[-1])
                r = {"warm_phase": "failed: " + why}
            r.setdefault("warm_phase", "failed: no status in the worker's result")
            fields[rid] = r
        mw = {"cases": wk["cases"], "status": wk["status"], "wall_s": wk.get("wall_s"), "log": wk["log"]}
        if wk["status"] != 0:
            mw["log_tail"] = tail(text, 1500)
        meta_workers.append(mw)
    for rid in ids:
        if fields[rid]["warm_phase"] != "ok":
            log("  warm %s: %s" % (rid, fields[rid]["warm_phase"][:200]))
    meta = {"jobs": n, "timeout_s": timeout, "seconds": time.time() - t0, "cases": len(ids),
            "ok": sum(1 for r in fields.values() if r.get("warm_phase") == "ok"),
            "inductor_cache_dir": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
            "compile_threads_per_worker": env.get("TORCHINDUCTOR_COMPILE_THREADS"),
            "autotune_local_cache": False, "workers": meta_workers,
            "tessel_check": bool(args.warm_check),
            "tessel_threads_per_worker": tessel_threads if args.warm_check else None}
    if args.warm_check:
        verdicts = [warm_check_verdict(args, r.get("tessel_check"))[0] for r in fields.values()]
        meta["tessel_checked"] = {"passed": verdicts.count("passed"), "failed": verdicts.count("failed"),
                                  "not_checked": verdicts.count(None)}
    log("warm phase done in %.0f s: %d of %d cases ok%s" % (
        meta["seconds"], meta["ok"], len(ids), "; Tessel checks %s" % meta["tessel_checked"] if args.warm_check else ""))
    return fields, meta


# ---- Tessel side -----------------------------------------------------------------------------------

def run_group(cmd, timeout, stream_stderr=False, pgid_file=None):
    """Runs cmd in its own process group with a timeout (the whole group is killed on expiry).
    Returns (status or "timeout" or "error", stdout + stderr, wall seconds). pgid_file: a file that
    holds the child's process group id while it runs (a warm worker's, for the phase's killer)."""
    t0 = time.time()
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                stderr=None if stream_stderr else subprocess.STDOUT,
                                text=True, start_new_session=True)
    except OSError as e:
        return "error", short_error(e), time.time() - t0
    if pgid_file:
        try:
            with open(pgid_file, "w") as f:
                f.write(str(proc.pid))
        except OSError:
            pass
    try:
        out, _ = proc.communicate(timeout=max(1.0, timeout))
        return proc.returncode, out or "", time.time() - t0
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            out, _ = proc.communicate(timeout=30)
        except Exception:
            out = ""
        return "timeout", out or "", time.time() - t0
    finally:
        if pgid_file:
            try:
                os.remove(pgid_file)
            except OSError:
                pass


def tessel_timeout(args):
    """--tessel-timeout, cut to what is left of --call-limit (counted from the main script's start,
    which a warm worker is given as --t-start), never under 20 s."""
    start = args.t_start if getattr(args, "t_start", None) else T_START
    left = args.call_limit - (time.time() - start) - 10
    return min(args.tessel_timeout, max(20.0, left))


def tessel_cache_dir(args, rid):
    """The per-case compile cache: the warm check fills it, the serial run reads it."""
    return os.path.join(args.work, "cache", rid.replace("/", "_"))


def tessel_report_path(args, rid, kind):
    """WORK/reports/ID.tessel.json (the serial run) or WORK/reports/ID.check.json (the warm check)."""
    reports = os.path.join(args.work, "reports")
    os.makedirs(reports, exist_ok=True)
    return os.path.join(reports, "%s.%s.json" % (rid.replace("/", "_"), kind))


def read_report(path, row):
    """The report json ({} when missing or unreadable; the reason in row["tessel_report_error"])."""
    if not os.path.exists(path):
        return {}
    try:
        with open(path) as f:
            rep = json.load(f) or {}
        return rep if isinstance(rep, dict) else {}
    except Exception as e:
        row["tessel_report_error"] = short_error(e, 200)
        return {}


def report_fields(status, rep, text, timed):
    """Row fields of one `tessel run` from its exit status, report and output. Correct: status 0 and
    every output of the report ok. The output's tail is kept when not correct (or, when timed, when
    there is no time)."""
    row = {}
    outputs = rep.get("outputs") or []
    row["tessel_correct"] = (status == 0 and bool(outputs) and
                             all(isinstance(o, dict) and o.get("ok") is True for o in outputs))
    median_s = rep.get("median_s")
    row["tessel_ms"] = 1e3 * median_s if isinstance(median_s, (int, float)) and median_s > 0 else None
    pred = rep.get("predicted_s")
    row["tessel_predicted_ms"] = 1e3 * pred if isinstance(pred, (int, float)) else None
    for key in ("kernels", "launches_per_run", "schedule_s", "codegen_s", "toolchain_s", "compile_s",
                "cache_hits", "peak_memory_bytes", "policy", "checked", "check_mode", "timing", "kernel_templates"):
        if key in rep:
            row["tessel_" + key if key in ("policy", "checked", "compile_s", "cache_hits", "timing") else key] = rep.get(key)
    if any(k in rep for k in ("schedule_s", "codegen_s", "toolchain_s")):
        row["tessel_compile_cold_s"] = sum(rep.get(k) or 0 for k in ("schedule_s", "codegen_s", "toolchain_s"))
    errs = [o.get("rel_l2_error") for o in outputs if isinstance(o, dict) and isinstance(o.get("rel_l2_error"), (int, float))]
    row["rel_l2_error"] = max(errs) if errs else None
    row["tessel_outputs"] = outputs
    if not row["tessel_correct"] or (timed and row["tessel_ms"] is None):
        row["tessel_log"] = tail(text, 4000)
        mismatch = [l for l in (text or "").splitlines() if l.startswith("MISMATCH")]
        if mismatch:
            row["tessel_mismatch"] = mismatch[:5]
    return row


def tessel_check(args, rid, model_path, timeout, shape_args=(), threads=None, pgid_file=None):
    """Warm phase: one cold `tessel run --check` (no --time) into the case's cache, which the serial
    run then reads. Returns {token, status, wall_s, report, cmd, fields: row fields of the check}."""
    cache = tessel_cache_dir(args, rid)
    shutil.rmtree(cache, ignore_errors=True)
    report = tessel_report_path(args, rid, "check")
    if os.path.exists(report):
        os.remove(report)
    cmd = [args.tessel, "run", model_path, "--device", "cuda", "--hw", args.hw, "--cache", cache,
           "--check", "--report", report]
    if threads:
        cmd += ["--threads", str(threads)]
    cmd += list(shape_args)
    log("warm %s: tessel run --check (timeout %.0f s, %s threads)" % (rid, timeout, threads or "all"))
    status, text, wall = run_group(cmd, timeout, pgid_file=pgid_file)
    res = {"token": args.warm_token, "status": status, "wall_s": wall, "timeout_s": timeout, "threads": threads,
           "report": report, "cmd": " ".join(cmd)}
    problems = {}
    res["fields"] = f = report_fields(status, read_report(report, problems), text, timed=False)
    f.update(problems)
    f.pop("tessel_ms", None)
    res["correct"] = f["tessel_correct"]
    log("warm %s: tessel check status %s, %s (%.0f s)" % (
        rid, status, "correct" if res["correct"] else "NOT correct", wall))
    return res


def warm_check_verdict(args, chk):
    """("passed" | "failed" | None, words): what the warm phase's Tessel check of this run says.
    passed: exit 0 and every output ok; failed: exit 1 (a mismatch) with the outputs in the report;
    None (not checked there: the serial loop checks): no check, another run's, a skip, a timeout, a
    crash, another exit status."""
    if not isinstance(chk, dict):
        return None, "not checked in the warm phase"
    if chk.get("unused"):
        return None, chk["unused"]
    if chk.get("token") != args.warm_token or not args.warm_token:
        return None, "warm check of another run"
    status, fields = chk.get("status"), chk.get("fields") or {}
    if status == 0 and fields.get("tessel_correct"):
        return "passed", "passed"
    if status == 1 and fields.get("tessel_outputs") and not fields.get("tessel_correct"):
        return "failed", "failed (exit 1: mismatch)"
    if status == "skipped":
        return None, "skipped: %s" % chk.get("why")
    return None, "no verdict (status %s after %.0f s%s)" % (
        status, chk.get("wall_s") or 0, ": " + str(chk["why"]) if chk.get("why") else "")


def cubin_files(cache):
    """The kernel cache's entries (NAME.cubin files)."""
    try:
        return {f for f in os.listdir(cache) if f.endswith(".cubin")}
    except OSError:
        return set()


def tessel_part(args, rid, model_path, timeout, shape_args=(), warm_check=None):
    """The serial Tessel part of one case; its row fields. When the warm phase of this run checked the
    case (warm_check, its ONNX file being the one the serial loop uses): passed, `tessel run --time N`
    without --check from the case's cache, correctness and the cold compile from the check; failed, no
    run (code that failed its check is not timed). Otherwise, or when the timing run compiled a kernel
    anew (not the checked code), one cold `tessel run --check --time N`."""
    verdict, words = warm_check_verdict(args, warm_check)
    cache = tessel_cache_dir(args, rid)
    report = tessel_report_path(args, rid, "tessel")
    if os.path.exists(report):
        os.remove(report)
    if warm_check is not None:
        log("  %s: warm Tessel check: %s" % (rid, words))
    if verdict is not None:
        row = dict(warm_check.get("fields") or {})
        row.update({"tessel_check_phase": "warm", "tessel_warm_check": words,
                    "tessel_check_status": warm_check.get("status"), "tessel_check_wall_s": warm_check.get("wall_s"),
                    "tessel_check_threads": warm_check.get("threads"), "tessel_check_report": warm_check.get("report"),
                    "tessel_check_cmd": warm_check.get("cmd"), "tessel_check_timeout_s": warm_check.get("timeout_s")})
        row["tessel_ms"] = None
        if verdict == "failed":
            row["tessel_status"] = warm_check.get("status")
            log("  %s: failed its warm check: not timed%s" % (
                rid, ":\n" + "\n".join(row.get("tessel_mismatch") or [])))
            return row
        cmd = [args.tessel, "run", model_path, "--device", "cuda", "--hw", args.hw, "--cache", cache,
               "--time", str(args.repeats), "--report", report]
        if args.cold_l2:
            cmd.append("--cold-l2")
        cmd += list(shape_args)
        log("  %s: tessel run --time %d from the compile cache (timeout %.0f s)" % (rid, args.repeats, timeout))
        before = cubin_files(cache)
        status, text, wall = run_group(cmd, timeout)
        new_cubins = len(cubin_files(cache) - before)
        row.update({"tessel_status": status, "tessel_wall_s": wall, "tessel_timeout_s": timeout,
                    "tessel_cmd": " ".join(cmd), "tessel_time_report": report})
        rep = read_report(report, row)
        median_s = rep.get("median_s")
        if status == 0 and isinstance(median_s, (int, float)) and median_s > 0:
            row["tessel_ms"] = 1e3 * median_s
        if "timing" in rep:
            row["tessel_timing"] = rep.get("timing")
        if any(k in rep for k in ("schedule_s", "codegen_s", "toolchain_s")):
            row["tessel_compile_cached_s"] = sum(rep.get(k) or 0 for k in ("schedule_s", "codegen_s", "toolchain_s"))
        if "cache_hits" in rep:
            row["tessel_time_cache_hits"] = rep.get("cache_hits")
        if rep.get("kernels") is not None and rep.get("kernels") != row.get("kernels"):
            row["tessel_time_kernels"] = rep.get("kernels")
        # Every kernel must come from the cache the check filled (an entry's key hashes the kernel's
        # source): a kernel compiled anew means code that was not checked; then check and time here.
        missed = new_cubins > 0 or (status == 0 and rep.get("cache_hits") == 0 and (rep.get("kernels") or 0) > 0)
        if missed:
            words = ("passed, but the timing run compiled kernels anew (%d new cubins, %s cache hits): "
                     "its time discarded, checked again here" % (new_cubins, rep.get("cache_hits")))
            discarded = {k: row.get(k) for k in ("tessel_ms", "tessel_status", "tessel_wall_s", "tessel_cmd",
                                                 "tessel_time_cache_hits", "tessel_check_wall_s", "tessel_check_report")}
            discarded["new_cubins"] = new_cubins
            log("  %s: %s" % (rid, words))
            timeout = max(20.0, timeout - wall)
        elif row["tessel_ms"] is None:
            row["tessel_time_log"] = tail(text, 4000)
            log("  %s: tessel timing status %s%s" % (rid, status, "" if status == "timeout" else ":\n" + tail(text, 800)))
        else:
            hits, kernels = rep.get("cache_hits"), rep.get("kernels")
            log("  %s: tessel %.4f ms, %s kernels (%s from the cache), correct (warm check)" % (
                rid, row["tessel_ms"], kernels, hits))
        if not missed:
            return row

    shutil.rmtree(cache, ignore_errors=True)
    if os.path.exists(report):
        os.remove(report)
    cmd = [args.tessel, "run", model_path, "--device", "cuda", "--hw", args.hw, "--cache", cache,
           "--check", "--time", str(args.repeats), "--report", report]
    if args.cold_l2:
        cmd.append("--cold-l2")
    cmd += list(shape_args)
    log("  %s: tessel run --check --time %d (timeout %.0f s)" % (rid, args.repeats, timeout))
    status, text, wall = run_group(cmd, timeout)
    row = {"tessel_status": status, "tessel_wall_s": wall, "tessel_timeout_s": timeout,
           "tessel_cmd": " ".join(cmd), "tessel_check_phase": "serial"}
    if warm_check is not None or (getattr(args, "warm_check", False) and args.warm_token):
        row["tessel_warm_check"] = words
    if verdict == "passed":  # only here after a timing run that missed the cache
        row["tessel_warm_timing_discarded"] = discarded
    row.update(report_fields(status, read_report(report, row), text, timed=True))
    if not row["tessel_correct"] or row["tessel_ms"] is None:
        log("  %s: tessel status %s%s" % (rid, status, "" if status == "timeout" else ":\n" + tail(text, 800)))
    else:
        log("  %s: tessel %.4f ms, %s kernels, correct" % (rid, row["tessel_ms"], row.get("kernels")))
    return row


def shape_args_for(row):
    """--shape NAME=AxB for inputs the exporter left symbolic (not expected: export is static)."""
    out = []
    shapes = row.get("input_shapes") or {}
    for i in row.get("onnx_inputs") or []:
        if any(not isinstance(d, int) for d in i.get("shape", [])) and i.get("name") in shapes:
            out += ["--shape", "%s=%s" % (i["name"], "x".join(str(d) for d in shapes[i["name"]]))]
    return out


# ---- Derived columns, output -------------------------------------------------------------------------

def derive(row):
    t = row.get("tessel_ms")
    baselines = {k: row.get(k + "_ms") for k in ("eager", "compile", "sdpa_eager", "sdpa_compile")}
    baselines = {k: v for k, v in baselines.items() if isinstance(v, (int, float)) and v > 0}
    if baselines:
        best = min(baselines, key=baselines.get)
        row["best_baseline"], row["best_baseline_ms"] = best, baselines[best]
    if t and row.get("compile_ms"):
        row["compile_over_tessel"] = row["compile_ms"] / t
    if t and row.get("best_baseline_ms"):
        row["best_over_tessel"] = row["best_baseline_ms"] / t
    if t and row.get("tessel_predicted_ms"):
        row["predicted_over_measured"] = row["tessel_predicted_ms"] / t
    return row


def geomean(values):
    values = [v for v in values if isinstance(v, (int, float)) and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


CSV_COLUMNS = ["id", "model", "family", "kind", "batch", "seq", "dtype", "exporter", "opset", "onnx_nodes",
               "params", "tessel_correct", "tessel_status", "tessel_ms", "eager_ms", "compile_ms", "sdpa_eager_ms",
               "sdpa_compile_ms", "best_baseline", "best_baseline_ms", "compile_over_tessel", "best_over_tessel",
               "kernels", "launches_per_run", "tessel_predicted_ms", "predicted_over_measured", "rel_l2_error",
               "tessel_compile_cold_s", "schedule_s", "toolchain_s", "tessel_wall_s", "torch_compile_s",
               "sdpa_torch_compile_s", "export_s", "eager_method", "compile_method", "sdpa_eager_method",
               "sdpa_compile_method", "attn_implementation", "check_mode", "tessel_check_phase", "tessel_warm_check",
               "tessel_check_wall_s", "tessel_compile_cached_s", "warm_phase", "warm_compile_s",
               "warm_sdpa_compile_s", "note", "error"]


def first_error(row):
    for k in ("torch_error", "export_errors", "tessel_error", "eager_error", "compile_error", "sdpa_error",
              "sdpa_eager_error", "sdpa_compile_error", "tessel_report_error"):
        if row.get(k):
            return (k + ": " + (json.dumps(row[k]) if not isinstance(row[k], str) else row[k]))[:300]
    if row.get("tessel_status") not in (None, 0):
        return "tessel status %s" % row["tessel_status"]
    return None


def write_outputs(args, doc, final):
    rows = [derive(r) for r in doc["rows"]]
    correct = [r for r in rows if r.get("tessel_correct")]
    doc["summary"] = {
        "rows": len(rows), "correct": len(correct),
        "geomean_compile_over_tessel": geomean([r.get("compile_over_tessel") for r in correct]),
        "geomean_best_over_tessel": geomean([r.get("best_over_tessel") for r in correct]),
        "rows_in_compile_geomean": sum(1 for r in correct if r.get("compile_over_tessel")),
        "rows_in_best_geomean": sum(1 for r in correct if r.get("best_over_tessel")),
    }
    os.makedirs(args.out, exist_ok=True)
    tmp = os.path.join(args.out, "real_models.json.tmp")
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, default=str)
    os.replace(tmp, os.path.join(args.out, "real_models.json"))
    with open(os.path.join(args.out, "real_models.csv"), "w", newline="") as f:
        wr = csv.DictWriter(f, CSV_COLUMNS, extrasaction="ignore")
        wr.writeheader()
        for r in rows:
            wr.writerow(dict(r, error=first_error(r)))
    if not final:
        return
    print_table(doc, rows)
    plot(args, doc, rows)


def exporter_shown(r):
    """The exporter column of the table: "cached (warm phase: torchscript)" shown as torchscript."""
    e = r.get("exporter") or ("json" if r.get("family") == "bundled" else "FAILED")
    prefix = "cached (warm phase: "
    return e[len(prefix):].rstrip(")") if e.startswith(prefix) else e


def print_table(doc, rows):
    def fmt(v, spec="%.3f"):
        if v is None or v == "":
            return "-"
        return spec % v if isinstance(v, float) else str(v)
    env = doc.get("env", {})
    print("%s, %s; torch %s, torchvision %s, transformers %s, timm %s; tessel: %s" % (
        doc.get("gpu"), doc.get("date"), env.get("torch"), env.get("torchvision"), env.get("transformers"),
        env.get("timm"), (doc.get("tessel_version") or "").splitlines()[0] if doc.get("tessel_version") else "-"))
    print("times: GPU time, median of %s CUDA-graph replays each between CUDA events, L2 %s "
          "(PyTorch rows timed as a loop are marked *); fp16 (bundled: f32)" % (doc.get("repeats"), doc.get("l2")))
    w = doc.get("warm_phase")
    if isinstance(w, dict):
        checked = w.get("tessel_checked")
        print("warm phase: %d workers, %.0f s, %d of %d cases warmed (export%s and torch.compile, untimed, before "
              "the serial timed loop)%s" % (
                  w.get("jobs", 0), w.get("seconds") or 0, w.get("ok", 0), w.get("cases", 0),
                  ", Tessel compile + check" if w.get("tessel_check") else "",
                  "; Tessel checks there: %d passed, %d failed, %d not checked (checked in the serial loop)" % (
                      checked.get("passed", 0), checked.get("failed", 0), checked.get("not_checked", 0))
                  if isinstance(checked, dict) else ""))
    head = "%-24s %5s %-11s %7s %9s %9s %9s %8s %8s %7s %9s %6s" % (
        "model", "batch", "exporter", "correct", "tessel", "eager", "compile", "comp/T", "best/T", "kernels",
        "pred ms", "p/m")
    print(head)
    print("-" * len(head))
    for r in rows:
        loop = lambda k: "*" if (r.get(k + "_method") or "graph") != "graph" else ""
        batch = str(r.get("batch", "-")) + ("x%d" % r["seq"] if r.get("seq") else "")
        correct = "yes" if r.get("tessel_correct") else ("-" if r.get("tessel_status") is None else "NO")
        print("%-24s %5s %-11s %7s %9s %9s %9s %8s %8s %7s %9s %6s" % (
            (r.get("id") if r.get("family") == "bundled" else r.get("model", r.get("id")))[:24], batch,
            exporter_shown(r)[:11],
            correct, fmt(r.get("tessel_ms")), fmt(r.get("eager_ms")) + loop("eager"),
            fmt(r.get("compile_ms")) + loop("compile"), fmt(r.get("compile_over_tessel"), "%.2f"),
            fmt(r.get("best_over_tessel"), "%.2f"), fmt(r.get("kernels")), fmt(r.get("tessel_predicted_ms")),
            fmt(r.get("predicted_over_measured"), "%.2f")))
    s = doc.get("summary", {})
    print("correct %d of %d rows; geomean torch.compile / Tessel %s over %d rows, best baseline / Tessel %s over %d "
          "rows (best of eager, torch.compile and, for transformers, their SDPA variants)" % (
              s.get("correct", 0), s.get("rows", 0), fmt(s.get("geomean_compile_over_tessel"), "%.2f"),
              s.get("rows_in_compile_geomean", 0), fmt(s.get("geomean_best_over_tessel"), "%.2f"),
              s.get("rows_in_best_geomean", 0)))
    for r in rows:
        e = first_error(r)
        if e:
            print("  %s: %s" % (r.get("id"), e.splitlines()[0][:200] if e else e))
    for note in doc.get("notes", []):
        print("note:", note)
    for nr in doc.get("not_run", []):
        print("not run: %s (%s)" % (nr.get("id"), nr.get("reason")))


def plot(args, doc, rows):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:
        log("matplotlib not available: no plot (real_models.csv has the numbers)")
        return
    try:
        shown = [r for r in rows if r.get("compile_over_tessel") and r.get("tessel_correct")]
        if not shown:
            log("no row with both Tessel and torch.compile times: no plot")
            return
        fig, ax = plt.subplots(figsize=(max(8, 0.55 * len(shown) + 2), 4.8))
        xs = list(range(len(shown)))
        ax.bar(xs, [r["compile_over_tessel"] for r in shown], color="#3b7dd8", label="Tessel vs torch.compile")
        best = [r.get("best_over_tessel") for r in shown]
        ax.scatter([x for x, b in zip(xs, best) if b], [b for b in best if b], marker="_", s=300, color="black",
                   label="Tessel vs best PyTorch baseline", zorder=3)
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.set_xticks(xs)
        ax.set_xticklabels([r["id"] for r in shown], rotation=40, ha="right", fontsize=8)
        ax.set_yscale("log")
        try:
            from matplotlib.ticker import FormatStrFormatter
            ax.yaxis.set_major_formatter(FormatStrFormatter("%.2g"))
            ax.yaxis.set_minor_formatter(FormatStrFormatter("%.2g"))
        except Exception:
            pass
        ax.set_ylabel("speedup (PyTorch time / Tessel time)")
        ax.set_title("Real models on %s (%s), fp16, L2 %s" % (doc.get("gpu"), doc.get("date"), doc.get("l2")))
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, "real_models.png"), dpi=120)
        plt.close(fig)
    except Exception as e:
        log("plot failed: %s" % short_error(e, 300))


# ---- Main ------------------------------------------------------------------------------------------

def render(args):
    docs = []
    for path in args.render:
        try:
            with open(path) as f:
                docs.append(json.load(f))
        except Exception as e:
            log("cannot read %s: %s" % (path, short_error(e, 200)))
    if not docs:
        log("nothing to render")
        return 1
    latest = {}
    not_run, notes = {}, []
    for d in docs:
        for r in d.get("rows", []):
            if "id" not in r:
                continue
            latest.pop(r["id"], None)
            latest[r["id"]] = r
            not_run.pop(r["id"], None)
        for nr in d.get("not_run", []):
            if nr.get("id") not in latest:
                not_run[nr.get("id")] = nr
        for n in d.get("notes", []):
            if n not in notes:
                notes.append(n)
    order = {}
    for m in MODELS:
        for c in m["cases"]:
            order[case_id(m, c)] = len(order)
    rows = sorted(latest.values(), key=lambda r: (order.get(r["id"], len(order)), r["id"] if r["id"] not in order else ""))
    gpus = sorted({d.get("gpu") for d in docs if d.get("gpu")})
    if len(gpus) > 1:
        notes.append("merged runs from different GPUs: %s" % ", ".join(gpus))
    l2s = sorted({d.get("l2") for d in docs if d.get("l2")})
    if len(l2s) > 1:
        notes.append("merged runs with different L2 states: %s" % ", ".join(l2s))
    base = dict(docs[-1])
    base.update({"rows": rows, "not_run": list(not_run.values()), "notes": notes,
                 "merged_from": [os.path.abspath(p) for p in args.render],
                 "dates": sorted({d.get("date") for d in docs if d.get("date")}),
                 # per merged run (a run's warm phase says nothing of the others')
                 "warm_phase": [d.get("warm_phase", "off") for d in docs],
                 "warm_phase_s": [d.get("warm_phase_s") for d in docs]})
    write_outputs(args, base, final=True)
    return 0


def child_main(args):
    model = next(m for m in MODELS if m["name"] == args.child)
    cases = [c for c in model["cases"] if case_id(model, c) in (args.child_cases or [case_id(model, c)])]
    results = torch_part(model, cases, args)
    with open(args.child_out, "w") as f:
        json.dump(results, f, default=str)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="models: " + ", ".join(m["name"] for m in MODELS) + ", and the bundled "
                                       "ones (bundled, or their file names); --only also takes families "
                                       "(torchvision, timm, transformers, bundled) and row ids (resnet50_b8)")
    p.add_argument("--tessel", default=os.path.join(ROOT, "dist", "tessel", "bin", "tessel"))
    p.add_argument("--hw", default=os.path.join(ROOT, "hw_specs", "nvidia-h100-sxm.json"))
    p.add_argument("--out", default=os.environ.get("OUT") or "real-models-out")
    p.add_argument("--work", default="/tmp/tessel-real-models", help="ONNX files, compile caches, reports")
    p.add_argument("--only", nargs="+", help="model names, families, row ids or bundled file names")
    p.add_argument("--repeats", type=int, default=30, help="timed replays on each side (default 30)")
    p.add_argument("--cold-l2", action="store_true", help="flush L2 before every timed replay, on both sides")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--no-sdpa", action="store_true", help="skip the SDPA variants of transformers models")
    p.add_argument("--no-torch-timing", action="store_true", help="export only, no PyTorch timings")
    p.add_argument("--skip-bundled", action="store_true", help="no bundled experiments/models/*.json rows")
    p.add_argument("--isolate", action="store_true",
                   help="run each model's export and PyTorch timings in a child process (automatic after a "
                        "failure leaves the CUDA context unusable)")
    p.add_argument("--torch-timeout", type=float, default=420, help="limit of an isolated child (s)")
    p.add_argument("--tessel-timeout", type=float, default=300, help="limit of one tessel run (s)")
    p.add_argument("--time-budget", type=float, default=540,
                   help="start no new model after this many seconds (default 540)")
    p.add_argument("--call-limit", type=float, default=595,
                   help="hard wall-clock limit of the whole call (s); tessel timeouts are cut to stay inside it")
    p.add_argument("--warm-jobs", type=int, default=6,
                   help="worker processes of the warm phase (ONNX export and one torch.compile per case, in "
                        "parallel, before the serial timed loop); 0: no warm phase (default 6)")
    p.add_argument("--warm-timeout", type=float, default=300,
                   help="limit of the whole warm phase (s; default 300, cut to what is left of --time-budget)")
    p.add_argument("--no-warm-check", action="store_true",
                   help="no Tessel compile + check in the warm phase: each case's `tessel run --check --time N` "
                        "runs whole in the serial loop, as without the warm phase")
    p.add_argument("--render", nargs="+", metavar="REAL_MODELS_JSON",
                   help="only merge these runs' rows (a later run's row replaces an earlier one's) and write outputs")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--child-out", help=argparse.SUPPRESS)
    p.add_argument("--child-cases", nargs="*", help=argparse.SUPPRESS)
    p.add_argument("--warm-compile", nargs="+", metavar="ID", help=argparse.SUPPRESS)
    p.add_argument("--warm-out", help=argparse.SUPPRESS)
    p.add_argument("--warm-token", help=argparse.SUPPRESS)
    p.add_argument("--warm-check", action="store_true", help=argparse.SUPPRESS)  # a worker: Tessel checks too
    p.add_argument("--tessel-threads", type=int, help=argparse.SUPPRESS)
    p.add_argument("--t-start", type=float, help=argparse.SUPPRESS)  # the main script's start (epoch s)
    p.add_argument("--warm-deadline", type=float, help=argparse.SUPPRESS)  # the warm phase's end (epoch s)
    args = p.parse_args()
    args.work = os.path.abspath(args.work)
    args.out = os.path.abspath(args.out)
    if args.warm_compile:
        return warm_main(args)
    if args.child:
        return child_main(args)
    if args.render:
        return render(args)

    os.makedirs(args.work, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    if args.warm_jobs > 0:
        # Before torch is imported here: both phases (and their children) use this Inductor cache.
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(args.work, "inductor"))
    ensure_tessel(args)
    args.tessel = os.path.abspath(args.tessel) if os.path.exists(args.tessel) else args.tessel
    doc = {"gpu": gpu_name(), "date": time.strftime("%Y-%m-%d", time.gmtime()),
           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
           "env": versions(), "tessel_version": tessel_version(args), "hw_spec": args.hw,
           "repeats": args.repeats, "l2": "cold" if args.cold_l2 else "warm",
           "timing": "GPU time on both sides: Tessel `tessel run --time N` (CUDA-graph replays, CUDA events); "
                     "PyTorch experiments/timing/gpu_timing.py GpuTimer (CUDA graph, events; 'loop' rows "
                     "could not be captured). Median of the replays.",
           "rows": [], "not_run": [], "notes": [], "warm_phase": "off", "warm_phase_s": 0.0}
    log("GPU %s; tessel %s; %s" % (doc["gpu"], (doc["tessel_version"] or "").splitlines()[0:1], doc["env"]))
    if not os.path.exists(args.tessel):
        doc["notes"].append("tessel binary %s not found: no Tessel columns" % args.tessel)

    def save(final=False):
        doc["elapsed_s"] = time.time() - T_START
        try:
            write_outputs(args, doc, final)
        except Exception as e:
            log("writing the outputs failed: %s" % short_error(e))
            traceback.print_exc()

    def over_budget():
        return time.time() - T_START > args.time_budget

    have_timm = True
    try:
        import timm  # noqa: F401
    except Exception as e:
        have_timm = False
        timm_error = short_error(e, 200)
    torch_problem = None
    try:
        import torch
        if not torch.cuda.is_available():
            torch_problem = "torch.cuda.is_available() is False"
    except Exception as e:
        torch_problem = "torch not importable: " + short_error(e, 200)
    if torch_problem:
        doc["notes"].append(torch_problem + ": no real model ran (bundled models only)")
        log(torch_problem)
    def selected_cases(model):
        return [c for c in model["cases"] if selected(args.only, model["name"], model["family"], case_id(model, c))]

    # Warm phase: exports, Tessel compile + check and torch.compile of every case the loops below will run,
    # in parallel, untimed (the bundled models: their Tessel check).
    warm, warm_checks = {}, {}
    args.warm_check = args.warm_jobs > 0 and not args.no_warm_check and os.path.exists(args.tessel)
    if args.warm_jobs > 0:
        warm_ids = [] if torch_problem else [
            case_id(m, c) for m in MODELS if m["family"] != "timm" or have_timm for c in selected_cases(m)]
        if args.warm_check:
            warm_ids += [rid for rid, _ in bundled_models(args)]
        cases = len(warm_ids)
        reserve = min(0.5 * args.time_budget, SERIAL_S_PER_CASE * cases)
        timeout = min(args.warm_timeout, args.time_budget - (time.time() - T_START) - reserve)
        if timeout < args.warm_timeout:
            log("warm phase limited to %.0f s: %.0f s of the %.0f s budget left to the serial loop's %d cases"
                % (max(timeout, 0), reserve, args.time_budget, cases))
        if warm_ids and timeout > 0:
            args.warm_token = "%d-%d" % (os.getpid(), int(time.time() * 1e6))
            t_warm = time.time()
            try:
                warm, doc["warm_phase"] = run_warm_phase(args, warm_ids, timeout)
                doc["warm_phase_s"] = doc["warm_phase"]["seconds"]
            except Exception as e:  # never fatal: the serial loop does everything itself
                log("warm phase failed: %s" % short_error(e))
                traceback.print_exc()
                doc["notes"].append("warm phase failed: %s" % short_error(e, 300))
                warm = {i: {"warm_phase": "failed: " + short_error(e, 300)} for i in warm_ids}
                doc["warm_phase_s"] = time.time() - t_warm
            save()
    isolate = args.isolate
    for model in MODELS:
        cases = selected_cases(model)
        if not cases:
            continue
        ids = [case_id(model, c) for c in cases]
        if torch_problem:
            # In not_run, not as failed rows: a merge (--render) must not replace measured rows with these.
            doc["not_run"] += [{"id": i, "reason": torch_problem} for i in ids]
            continue
        if model["family"] == "timm" and not have_timm:
            doc["notes"].append("timm not importable (%s): %s skipped" % (timm_error, model["name"]))
            doc["not_run"] += [{"id": i, "reason": "timm not importable"} for i in ids]
            save()
            continue
        if over_budget():
            doc["not_run"] += [{"id": i, "reason": "time budget (%.0f s) spent" % args.time_budget} for i in ids]
            log("time budget spent: %s not started" % model["name"])
            continue
        try:
            log("== %s (%s): %s" % (model["name"], model["family"], ", ".join(ids)))
            if isolate:
                results = torch_part_isolated(model, cases, args,
                                              max(30.0, min(args.torch_timeout, args.call_limit - (time.time() - T_START) - 30)))
            else:
                results = torch_part(model, cases, args)
                if any(r.get("cuda_poisoned") for r in results.values()):
                    isolate = True
                    doc["notes"].append("CUDA context broken during %s: later models ran in child processes"
                                        % model["name"])
            new_rows = []
            for c, rid in zip(cases, ids):
                row = {"id": rid, "model": model["name"], "family": model["family"], "kind": model["kind"],
                       "batch": c["batch"], "seq": c.get("seq"), "dtype": "f16"}
                if model.get("description"):
                    row["description"] = model["description"]
                wf = dict(warm.get(rid) or {"warm_phase": "off"})
                warm_checks[rid] = wf.pop("tessel_check", None)
                row.update(wf)
                row.update(results.get(rid, {}))
                doc["rows"].append(row)
                new_rows.append(row)
            save()
            # Tessel only after the PyTorch model is freed (or its process gone).
            for row in new_rows:
                if not row.get("onnx"):
                    continue
                if not os.path.exists(args.tessel):
                    continue
                chk = warm_checks.get(row["id"])
                if chk is not None and not str(row.get("exporter") or "").startswith("cached (warm phase"):
                    chk = {"unused": "warm check not used: the serial loop exported the model again"}
                try:
                    row.update(tessel_part(args, row["id"], row["onnx"], tessel_timeout(args), shape_args_for(row),
                                           warm_check=chk))
                except Exception as e:
                    row["tessel_error"] = short_error(e)
                    log("  %s: tessel part failed: %s" % (row["id"], short_error(e)))
                save()

        except Exception as e:  # never fatal: the model's rows say what happened
            log("%s: unexpected failure: %s" % (model["name"], short_error(e)))
            traceback.print_exc()
            doc["notes"].append("%s: unexpected failure in the driver: %s" % (model["name"], short_error(e, 300)))
            save()

    if not args.skip_bundled:
        for rid, path in bundled_models(args):
            stem = rid[len("bundled/"):]
            if over_budget():
                doc["not_run"].append({"id": rid, "reason": "time budget (%.0f s) spent" % args.time_budget})
                continue
            row = {"id": rid, "model": stem, "family": "bundled", "kind": "bundled JSON model", "batch": 1,
                   "dtype": "f32", "exporter": None, "note": BUNDLED_NOTE, "model_file": os.path.relpath(path, ROOT)}
            wf = dict(warm.get(rid) or {"warm_phase": "off"})
            chk = wf.pop("tessel_check", None)
            row.update(wf)
            if not os.path.exists(args.tessel):
                row["tessel_error"] = "tessel binary not found"
            else:
                log("== %s" % rid)
                try:
                    row.update(tessel_part(args, rid, path, tessel_timeout(args), warm_check=chk))
                except Exception as e:
                    row["tessel_error"] = short_error(e)
            doc["rows"].append(row)
            save()

    save(final=True)
    # A run that selected PyTorch cases and timed none of them did not measure anything: say so in
    # the exit status (the device script's summary then reads FAIL, not PASS).
    timed = [r for r in doc["rows"] if r.get("tessel_ms") and (r.get("compile_ms") or r.get("eager_ms"))]
    wanted = [r for r in doc["rows"] if r.get("family") != "bundled"] + \
        [n for n in doc["not_run"] if not str(n.get("id", "")).startswith("bundled/")]
    if wanted and not timed and not args.no_torch_timing and not torch_problem:
        log("no case was timed on both sides (%d selected): exit status 1" % len(wanted))
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        log("interrupted")
        sys.exit(130)
