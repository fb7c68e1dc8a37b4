// `tessel sparsify`: give a model's linear weights a block-sparsity attribute (docs/sparsity.md),
// either pruned to a density with the block shape chosen per weight (pattern search in Fractal's
// spirit: every candidate block is scored by the weight magnitude it keeps, a cheap accuracy
// proxy, and by the cost model's predicted time), or detected from weights already pruned
// elsewhere (their all-zero blocks).
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
    "  Gives the linear weights of MODEL (.json or .onnx: the rank-2 float weights that a MatMul or\n"
    "  Gemm multiplies by) a block-sparsity attribute and writes the model as JSON (docs/sparsity.md).\n"
    "  --density D   prune each weight to this fraction of blocks, by block L1 magnitude. Every block\n"
    "                shape of --blocks is scored per weight: the fraction of the weight's L1 magnitude\n"
    "                it keeps (a cheap proxy for accuracy, not a measurement of it) and the time the\n"
    "                cost model predicts for the weight's kernel on SPEC (dense or block-sparse, as\n"
    "                the policy would choose). Kept: the fastest block whose kept magnitude is within\n"
    "                --tolerance (default 0.02) of the best block's.\n"
    "  --detect      keep the values; mark each weight whose all-zero blocks are at least --min-zero\n"
    "                (default 0.5) of its blocks, with the largest such block of --blocks (a weight\n"
    "                pruned by a density attribute is written out as its pruned values)\n"
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

/// The linear weights: rank-2 float weights read as the second operand of a MatMul or Gemm (the
/// weight of x W or x W^T).
std::vector<int> linear_weights(const ModelDef& m) {
  std::vector<int> out;
  for (size_t i = 0; i < m.weights.size(); ++i) {
    const WeightDef& w = m.weights[i];
    if (w.type.rank() != 2 || !is_float(w.type.dtype)) continue;
    for (const OpDef& op : m.ops)
      if ((op.op_type == "MatMul" || op.op_type == "Gemm") && op.inputs.size() >= 2 && op.inputs[1] == w.name) {
        out.push_back(static_cast<int>(i));
        break;
      }
  }
  return out;
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
  Args args("sparsify", argv, {"help", "detect"}, {"hw", "o", "density", "blocks", "weights", "tolerance", "min-zero", "policy"});
  if (args.flag("help")) {
    std::cout << kSparsifyHelp;
    return 0;
  }
  const std::string path = args.one_positional("MODEL");
  const auto out_path = args.option("o");
  if (!out_path) throw UserError("command line", "", "'tessel sparsify' needs -o OUT.json");
  const bool detect = args.flag("detect");
  if (detect == args.option("density").has_value())
    throw UserError("command line", "", "give exactly one of --density D (prune) and --detect (mark weights pruned elsewhere)");
  const std::vector<Block> blocks = parse_blocks(args.option_or("blocks", "32x32,64x64,128x128"));
  ModelDef model = load_model(path);
  std::vector<int> chosen = linear_weights(model);
  if (auto only = args.option("weights")) {
    std::vector<int> picked;
    std::stringstream in(*only);
    for (std::string name; std::getline(in, name, ',');) {
      auto it = std::find_if(chosen.begin(), chosen.end(), [&](int i) { return model.weights[i].name == name; });
      if (it == chosen.end()) throw UserError("command line", "--weights", cat("\"", name, "\" is not a linear weight of the model"));
      picked.push_back(*it);
    }
    chosen = picked;
  }
  if (chosen.empty()) throw UserError(path, "", "the model has no linear weight (a rank-2 float weight multiplied by a MatMul or Gemm)");

  if (detect) {
    const double min_zero = parse_fraction(args, "min-zero", 0.5, false);
    int marked = 0;
    std::cout << std::left << std::setw(28) << "weight" << "  block     zero blocks\n";
    for (int i : chosen) {
      WeightDef& w = model.weights[i];
      const HostTensor v = values_of(w);
      std::optional<Sparsity> best;
      double best_zero = 0;
      for (const Block& b : blocks) {
        const Sparsity s{Sparsity::Pattern::block, b.rows, b.cols, 0};
        if (!check_sparsity(s, w.type.shape).empty() || b.rows % kNonzeroUnit != 0 || b.cols % kNonzeroUnit != 0) continue;
        const double zero = 1.0 - nonzero_map(v).density(b.rows, b.cols);
        if (zero >= min_zero && (!best || b.rows * b.cols > best->block_rows * best->block_cols)) best = s, best_zero = zero;
      }
      std::cout << std::setw(28) << w.name << "  "
                << (best ? cat(best->block_rows, "x", best->block_cols, "    ", std::round(best_zero * 1000) / 1000) : std::string("-         below --min-zero"))
                << "\n";
      if (best) {
        // A density pruned the values on load; the new attribute keeps the values as they are,
        // so the pruned values are written out.
        if (w.sparsity && w.sparsity->density > 0) w.source = std::make_shared<const HostTensor>(v);
        w.sparsity = best;
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
      w.sparsity = s;
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
    if (pick >= 0) w.sparsity = Sparsity{Sparsity::Pattern::block, blocks[pick].rows, blocks[pick].cols, density};
  }
  save_model_json(model, *out_path);
  std::cout << "pruned " << chosen.size() << " linear weights to density " << density << " (kept |w|: the fraction of each "
            << "weight's L1 magnitude its blocks keep, a proxy for accuracy; predicted: the weight's kernel on " << spec.name
            << "); wrote " << *out_path << "\n";
  return 0;
}

}  // namespace tessel
