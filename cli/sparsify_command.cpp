// `tessel sparsify`: give a model's linear weights a sparsity attribute (docs/sparsity.md): block
// sparsity pruned to a density with the block shape chosen per weight (pattern search in Fractal's
// spirit: every candidate block is scored by the weight magnitude it keeps, a cheap accuracy
// proxy, and by the cost model's predicted time); N:M (2:4) sparsity along each weight's
// reduction dimension, scored by the kept magnitude only; or either pattern detected in weights
// already pruned elsewhere (their all-zero blocks, or at most n non-zeros in every m values).
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include "cli/args.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "driver/compile.h"
#include "tilegraph/error.h"
#include "hw_specs/hw_spec.h"
#include "tilegraph/import/load_model.h"
#include "tilegraph/import/model_json.h"
#include "tilegraph/sparsity.h"

namespace tessel {
namespace {

const char* kSparsifyHelp =
    "usage: tessel sparsify MODEL --hw SPEC -o OUT.json (--density D | --detect [--min-zero F])\n"
    "                       [--blocks RxC,...] [--weights NAME,...] [--tolerance T] [--policy P]\n"
    "       tessel sparsify MODEL --pattern nm [--n N] [--m M] -o OUT.json [--weights NAME,...]\n"
    "  Gives the linear weights of MODEL (.json or .onnx: the rank-2 float weights that a MatMul or\n"
    "  Gemm multiplies by) a sparsity attribute and writes the model as JSON (docs/sparsity.md).\n"
    "  --pattern P   block (default) or nm\n"
    "  --pattern nm  N:M: every weight keeps the --n (default 2) values of largest magnitude in every\n"
    "                --m (default 4) consecutive values along its reduction dimension (K: dimension 0\n"
    "                of MatMul's [K, N] weight, 1 of Gemm's with transB). Prints the fraction of the\n"
    "                weight's L1 magnitude kept (a cheap proxy for accuracy, not a measurement of\n"
    "                it). No time is predicted for N:M (the model is not scheduled).\n"
    "  --density D   prune each weight to this fraction of blocks, by block L1 magnitude. Every block\n"
    "                shape of --blocks is scored per weight: the fraction of the weight's L1 magnitude\n"
    "                it keeps (a cheap proxy for accuracy, not a measurement of it) and the time the\n"
    "                cost model predicts for the weight's kernel on SPEC (dense or block-sparse, as\n"
    "                the policy would choose). Kept: the fastest block whose kept magnitude is within\n"
    "                --tolerance (default 0.02) of the best block's.\n"
    "  --detect      keep the values; mark each weight whose all-zero blocks are at least --min-zero\n"
    "                (default 0.5) of its blocks, with the largest such block of --blocks; else, when\n"
    "                every --m (default 4) values along its reduction dimension hold at most --n\n"
    "                (default 2) non-zeros, with that N:M pattern (a weight pruned by its attribute\n"
    "                is written out as its pruned values)\n"
    "  --blocks      candidate block shapes (default 32x32,64x64,128x128)\n"
    "  --weights     only these weights (default: every linear weight)\n"
    "  Then `tessel explain OUT.json --hw SPEC` shows each kernel's choice, `tessel run OUT.json\n"
    "  --device cuda --time N` measures it.\n";

struct Block {
  int64_t rows = 0, cols = 0;
};

std::vector<Block> parse_blocks(const std::string& text) {
  std::vector<Block> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    Block b;
    char x = 0;
    std::stringstream one(item);
    if (!(one >> b.rows >> x >> b.cols) || x != 'x' || b.rows <= 0 || b.cols <= 0 || !one.eof())
      throw UserError("command line", "--blocks", cat("expected ROWSxCOLS blocks separated by commas, got \"", item, "\""));
    out.push_back(b);
  }
  if (out.empty()) throw UserError("command line", "--blocks", "no block shape given");
  return out;
}

double parse_fraction(const Args& args, const std::string& name, double dflt, bool open_low) {
  const auto v = args.option(name);
  if (!v) return dflt;
  char* end = nullptr;
  const double d = std::strtod(v->c_str(), &end);
  if (end == v->c_str() || *end != '\0' || !(open_low ? d > 0 : d >= 0) || d > 1)
    throw UserError("command line", "--" + name, cat("expected a number in ", open_low ? "(0, 1]" : "[0, 1]", ", got \"", *v, "\""));
  return d;
}

/// The weight's values as the model gives them (pruned already if it declares a density).
HostTensor values_of(const WeightDef& w) { return weight_source_values(w.source, w.type, w.sparsity); }

/// A linear weight: a rank-2 float weight read as the second operand of a MatMul or Gemm (the
/// weight of x W or x W^T), and its reduction dimension in the first such op (0 for MatMul's
/// [K, N]; 1 for Gemm's [N, K] with transB).
struct LinearWeight {
  int index = 0;           // into ModelDef::weights
  int reduction_axis = 0;
};

std::vector<LinearWeight> linear_weights(const ModelDef& m) {
  std::vector<LinearWeight> out;
  for (size_t i = 0; i < m.weights.size(); ++i) {
    const WeightDef& w = m.weights[i];
    if (w.type.rank() != 2 || !is_float(w.type.dtype)) continue;
    for (const OpDef& op : m.ops)
      if ((op.op_type == "MatMul" || op.op_type == "Gemm") && op.inputs.size() >= 2 && op.inputs[1] == w.name) {
        const auto trans_b = op.attrs.find("transB");
        const bool transposed = op.op_type == "Gemm" && trans_b != op.attrs.end() && std::holds_alternative<int64_t>(trans_b->second) &&
                                std::get<int64_t>(trans_b->second) != 0;
        out.push_back(LinearWeight{static_cast<int>(i), transposed ? 1 : 0});
        break;
      }
  }
  return out;
}

/// `w` with the attribute `s`. An attribute that pruned the values on load (a block density, or
/// N:M) and is replaced by another: the pruned values `values` are written out, so the new
/// attribute keeps them.
void set_sparsity(WeightDef& w, const HostTensor& values, const Sparsity& s) {
  const bool pruned = w.sparsity && (w.sparsity->pattern == Sparsity::Pattern::nm || w.sparsity->density > 0);
  if (pruned && *w.sparsity != s) w.source = std::make_shared<const HostTensor>(values);
  w.sparsity = s;
}

/// The N:M attribute along `lw`'s reduction dimension.
Sparsity nm_sparsity(const LinearWeight& lw, int n, int m) {
  return Sparsity{.pattern = Sparsity::Pattern::nm, .nm_n = n, .nm_m = m, .axis = lw.reduction_axis};
}

/// Gives every chosen weight the n:m attribute along its reduction dimension (its values are
/// pruned to it when materialized), printing the magnitude each keeps; returns how many.
int sparsify_nm(ModelDef& model, const std::vector<LinearWeight>& chosen, int n, int m) {
  std::cout << std::left << std::setw(28) << "weight" << "  pattern                kept |w|\n";
  int pruned = 0;
  for (const LinearWeight& lw : chosen) {
    WeightDef& w = model.weights[lw.index];
    const Sparsity s = nm_sparsity(lw, n, m);
    std::cout << std::setw(28) << w.name << "  " << std::setw(21) << print_sparsity(s) << "  ";
    if (std::string why = check_sparsity(s, w.type.shape); !why.empty()) {
      std::cout << "- (left dense: " << why << ")\n";
      continue;
    }
    const HostTensor v = values_of(w), kept = apply_sparsity(v, s);
    double all = 0, held = 0;
    for (int64_t e = 0; e < v.size(); ++e) all += std::fabs(v[e]), held += std::fabs(kept[e]);
    std::cout << std::round((all > 0 ? held / all : 1.0) * 1000) / 1000 << "\n";
    set_sparsity(w, v, s);
    ++pruned;
  }
  return pruned;
}

/// Each sparse weight's kernel as the policy chose it: "<kind> <predicted ms>" from the group's
/// kind_choice and prediction, by weight name.
std::map<std::string, std::pair<std::string, double>> predicted(const ModelDef& m, const HwSpec& spec, const Policy* policy) {
  CompileRequest r;
  r.model = &m;
  r.spec = spec;
  r.backend.clear();
  r.policy = policy;
  r.last = Stage::schedule;
  const Compilation c = compile(r);
  std::map<std::string, std::pair<std::string, double>> out;
  for (const ScheduleGroup& g : c.schedule.groups) {
    if (g.kind_choice.empty()) continue;
    const size_t q1 = g.kind_choice.find('\''), q2 = g.kind_choice.find('\'', q1 + 1);
    if (q1 == std::string::npos || q2 == std::string::npos) continue;
    const std::string name = g.kind_choice.substr(q1 + 1, q2 - q1 - 1);
    out[name] = {g.kind_choice.substr(0, g.kind_choice.find_first_of(" :")), g.predicted.latency_s};
  }
  return out;
}

}  // namespace

int cmd_sparsify(const std::vector<std::string>& argv) {
  Args args("sparsify", argv, {"help", "detect"},
            {"hw", "o", "density", "blocks", "weights", "tolerance", "min-zero", "policy", "pattern", "n", "m"});
  if (args.flag("help")) {
    std::cout << kSparsifyHelp;
    return 0;
  }
  const std::string path = args.one_positional("MODEL");
  const auto out_path = args.option("o");
  if (!out_path) throw UserError("command line", "", "'tessel sparsify' needs -o OUT.json");
  const bool detect = args.flag("detect");
  const std::string pattern = args.option_or("pattern", "block");
  if (pattern != "block" && pattern != "nm")
    throw UserError("command line", "--pattern", cat("expected block or nm, got \"", pattern, "\""));
  const bool nm = pattern == "nm";
  if (nm && detect) throw UserError("command line", "--pattern", "--detect looks for both patterns; --pattern chooses how to prune");
  if (nm) {
    for (const char* block_only : {"density", "blocks", "tolerance", "min-zero", "hw", "policy"})
      if (args.option(block_only))
        throw UserError("command line", cat("--", block_only), "applies to the block pattern, not to --pattern nm");
  } else if (!detect) {
    for (const char* nm_only : {"n", "m"})
      if (args.option(nm_only)) throw UserError("command line", cat("--", nm_only), "applies to --pattern nm and --detect");
  }
  if (!nm && detect == args.option("density").has_value())
    throw UserError("command line", "", "give exactly one of --density D (prune) and --detect (mark weights pruned elsewhere)");
  const int m = static_cast<int>(args.int_option("m", 4, 2, 1 << 20));
  const int n = static_cast<int>(args.int_option("n", 2, 1, m - 1));
  const std::vector<Block> blocks = parse_blocks(args.option_or("blocks", "32x32,64x64,128x128"));
  ModelDef model = load_model(path);
  std::vector<LinearWeight> linear = linear_weights(model);
  if (auto only = args.option("weights")) {
    std::vector<LinearWeight> picked;
    std::stringstream in(*only);
    for (std::string name; std::getline(in, name, ',');) {
      auto it = std::find_if(linear.begin(), linear.end(), [&](const LinearWeight& lw) { return model.weights[lw.index].name == name; });
      if (it == linear.end()) throw UserError("command line", "--weights", cat("\"", name, "\" is not a linear weight of the model"));
      picked.push_back(*it);
    }
    linear = picked;
  }
  if (linear.empty()) throw UserError(path, "", "the model has no linear weight (a rank-2 float weight multiplied by a MatMul or Gemm)");
  std::vector<int> chosen;
  for (const LinearWeight& lw : linear) chosen.push_back(lw.index);

  if (nm) {
    const int pruned = sparsify_nm(model, linear, n, m);
    save_model_json(model, *out_path);
    std::cout << "pruned " << pruned << " of " << linear.size() << " linear weights to " << n << ":" << m
              << " along their reduction dimension (kept |w|: the fraction of each weight's L1 magnitude the kept values "
              << "hold, a proxy for accuracy; no time is predicted for N:M); wrote " << *out_path << "\n";
    return 0;
  }

  if (detect) {
    const double min_zero = parse_fraction(args, "min-zero", 0.5, false);
    int marked = 0;
    std::cout << std::left << std::setw(28) << "weight" << "  pattern   zero blocks\n";
    for (const LinearWeight& lw : linear) {
      WeightDef& w = model.weights[lw.index];
      const HostTensor v = values_of(w);
      std::optional<Sparsity> best;
      double best_zero = 0;
      for (const Block& b : blocks) {
        const Sparsity s{Sparsity::Pattern::block, b.rows, b.cols, 0};
        if (!check_sparsity(s, w.type.shape).empty() || b.rows % kNonzeroUnit != 0 || b.cols % kNonzeroUnit != 0) continue;
        const double zero = 1.0 - nonzero_map(v).density(b.rows, b.cols);
        if (zero >= min_zero && (!best || b.rows * b.cols > best->block_rows * best->block_cols)) best = s, best_zero = zero;
      }
      // Not block-sparse by the rule above: N:M along the reduction dimension, if the values are.
      if (!best && is_nm_sparse(v, n, m, lw.reduction_axis)) {
        best = nm_sparsity(lw, n, m);
        std::cout << std::setw(28) << w.name << "  " << print_sparsity(*best) << "\n";
      } else {
        std::cout << std::setw(28) << w.name << "  "
                  << (best ? cat(best->block_rows, "x", best->block_cols, "    ", std::round(best_zero * 1000) / 1000)
                           : cat("-         below --min-zero, not ", n, ":", m))
                  << "\n";
      }
      if (best) {
        set_sparsity(w, v, *best);
        ++marked;
      }
    }
    save_model_json(model, *out_path);
    std::cout << "marked " << marked << " of " << chosen.size() << " linear weights; wrote " << *out_path << "\n";
    return 0;
  }

  const double density = parse_fraction(args, "density", 1, true);
  const double tolerance = parse_fraction(args, "tolerance", 0.02, false);
  auto hw = args.option("hw");
  if (!hw) throw UserError("command line", "", "--hw SPEC is required: the cost model predicts each block's time on it");
  const HwSpec spec = load_cli_hw_spec(*hw);
  const std::unique_ptr<Policy> policy = find_policy(args.option_or("policy", std::string(policies().front()->name())));
  // Per block shape: every chosen weight pruned with it, the model scheduled once.
  struct Score {
    double kept = 0, seconds = 0;
    std::string kind;
    bool legal = false;
  };
  std::vector<std::vector<Score>> score(chosen.size(), std::vector<Score>(blocks.size()));
  for (size_t b = 0; b < blocks.size(); ++b) {
    ModelDef trial = model;
    for (size_t c = 0; c < chosen.size(); ++c) {
      WeightDef& w = trial.weights[chosen[c]];
      const Sparsity s{Sparsity::Pattern::block, blocks[b].rows, blocks[b].cols, density};
      if (!check_sparsity(s, w.type.shape).empty()) continue;
      const HostTensor v = values_of(w), pruned = apply_sparsity(v, s);
      set_sparsity(w, v, s);  // (values an earlier attribute pruned are kept)
      double all = 0, kept = 0;
      for (int64_t e = 0; e < v.size(); ++e) all += std::fabs(v[e]), kept += std::fabs(pruned[e]);
      score[c][b].kept = all > 0 ? kept / all : 1.0;
      score[c][b].legal = true;
    }
    const auto times = predicted(trial, spec, policy.get());
    for (size_t c = 0; c < chosen.size(); ++c)
      if (auto it = times.find(trial.weights[chosen[c]].name); it != times.end())
        score[c][b].kind = it->second.first, score[c][b].seconds = it->second.second;
  }
  std::cout << std::left << std::setw(28) << "weight" << "  block      kept |w|  kernel        predicted\n";
  for (size_t c = 0; c < chosen.size(); ++c) {
    WeightDef& w = model.weights[chosen[c]];
    double best_kept = 0;
    for (const Score& s : score[c])
      if (s.legal) best_kept = std::max(best_kept, s.kept);
    int pick = -1;
    for (size_t b = 0; b < blocks.size(); ++b) {
      const Score& s = score[c][b];
      if (!s.legal || s.kept < best_kept - tolerance) continue;
      if (pick < 0 || (s.seconds > 0 && (score[c][pick].seconds <= 0 || s.seconds < score[c][pick].seconds))) pick = static_cast<int>(b);
    }
    for (size_t b = 0; b < blocks.size(); ++b) {
      const Score& s = score[c][b];
      std::cout << std::setw(28) << (b == 0 ? w.name : "") << "  " << std::setw(9) << cat(blocks[b].rows, "x", blocks[b].cols) << "  ";
      if (!s.legal) {
        std::cout << "(larger than the weight)\n";
        continue;
      }
      std::cout << std::setw(8) << std::round(s.kept * 1000) / 1000 << "  " << std::setw(12) << (s.kind.empty() ? "-" : s.kind) << "  "
                << (s.seconds > 0 ? cat(std::round(s.seconds * 1e6) / 1e3, " ms") : std::string("-"))
                << (static_cast<int>(b) == pick ? "  <- kept" : "") << "\n";
    }
    if (pick >= 0) set_sparsity(w, values_of(w), Sparsity{Sparsity::Pattern::block, blocks[pick].rows, blocks[pick].cols, density});
  }
  save_model_json(model, *out_path);
  std::cout << "pruned " << chosen.size() << " linear weights to density " << density << " (kept |w|: the fraction of each "
            << "weight's L1 magnitude its blocks keep, a proxy for accuracy; predicted: the weight's kernel on " << spec.name
            << "); wrote " << *out_path << "\n";
  return 0;
}

}  // namespace tessel
