#include "distributed/spmd_runner.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "tilegraph/error.h"
#include "tilegraph/files.h"
#include "tilegraph/sha256.h"
#include "tilegraph/interpreter.h"

namespace tessel {

std::string segment_key(const OpGraph& segment) { return sha256_hex(segment.print()).substr(0, 16); }

SegmentCompiler compiled_segments(const CompileRequest& base, std::mutex* one_at_a_time, SegmentSchedules schedules) {
  return [base, one_at_a_time, schedules](const OpGraph& segment) -> SegmentRun {
    CompileRequest request = base;
    request.model_path.clear();
    request.model = nullptr;
    request.graph = &segment;
    request.last = Stage::load;
    const std::string file = cat("segment-", segment_key(segment), ".json");
    if (!schedules.load_dir.empty()) {
      const std::string path = (std::filesystem::path(schedules.load_dir) / file).string();
      std::error_code ec;
      if (!std::filesystem::exists(path, ec))
        throw UserError(path, "", "no saved schedule for this segment of the mesh program (saved for another model, mesh or plan?)");
      request.schedule_json = read_regular_file(path, kMaxScheduleFileBytes, "a segment's saved schedule");
      request.schedule_source = path;
    }
    std::unique_lock<std::mutex> hold;
    if (one_at_a_time) hold = std::unique_lock<std::mutex>(*one_at_a_time);
    auto compiled = std::make_shared<Compilation>(compile(request));
    if (!schedules.save_dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(schedules.save_dir, ec);
      if (ec) throw UserError(schedules.save_dir, "", cat("cannot create the folder for segment schedules: ", ec.message()));
      write_file_atomically((std::filesystem::path(schedules.save_dir) / file).string(), compiled->dump(Stage::schedule));
    }
    return [compiled](const std::vector<HostTensor>& inputs) { return compiled->executable->run(inputs); };
  };
}

SegmentCompiler interpreter_segments() {
  return [](const OpGraph& segment) -> SegmentRun {
    auto graph = std::make_shared<OpGraph>(segment);
    return [graph](const std::vector<HostTensor>& inputs) { return interpret(*graph, inputs); };
  };
}

namespace {

/// One ring step over the host communicator: the previous member's block out of an all-gather
/// (host ranks check programs; they do not overlap, so the extra bytes cost only time).
std::vector<double> previous_block(const std::vector<double>& mine, const std::vector<int64_t>& group, int64_t rank, Communicator& comm) {
  const std::vector<double> all = comm.all_gather(mine, group);
  const int64_t parts = static_cast<int64_t>(group.size());
  const int64_t me = std::find(group.begin(), group.end(), rank) - group.begin();
  const int64_t from = (me + parts - 1) % parts;
  const auto n = static_cast<std::ptrdiff_t>(mine.size());
  return std::vector<double>(all.begin() + from * n, all.begin() + (from + 1) * n);
}

// The communicator carries doubles; an i64 value crosses it as its bit pattern in a double's 8
// bytes (collectives that only move values leave the bytes alone), and is read back exactly.
std::vector<double> int64_bits(const HostTensor& t) {
  std::vector<double> bits(static_cast<size_t>(t.size()));
  if (!bits.empty()) std::memcpy(bits.data(), t.int64_data(), bits.size() * sizeof(double));
  return bits;
}

HostTensor from_int64_bits(TensorType type, const double* bits) {
  std::vector<int64_t> values(static_cast<size_t>(type.num_elements()));
  if (!values.empty()) std::memcpy(values.data(), bits, values.size() * sizeof(int64_t));
  return HostTensor::from_integers(std::move(type), std::move(values));
}

// An i64 transfer: all-gathers and all-to-alls move the bit patterns; a reduction gathers every
// member's bits and combines them here in int64 (wrapping sums: the double sum of the
// communicator would round past 2^53).
HostTensor run_int64_transfer(const LayoutStep& s, const HostTensor& source, const std::vector<int64_t>& group,
                              Communicator& comm) {
  const int64_t parts = static_cast<int64_t>(group.size());
  std::vector<int64_t> shape = source.shape();
  const std::vector<double> mine = int64_bits(source);
  switch (s.collective) {
    case Collective::all_gather:
      shape.insert(shape.begin(), parts);
      return from_int64_bits(TensorType{DType::i64, shape}, comm.all_gather(mine, group).data());
    case Collective::all_to_all:
      return from_int64_bits(TensorType{DType::i64, shape}, comm.all_to_all(mine, group).data());
    case Collective::shift: return from_int64_bits(TensorType{DType::i64, shape}, previous_block(mine, group, comm.rank(), comm).data());
    case Collective::all_reduce:
    case Collective::reduce_scatter: {
      const std::vector<double> everyone = comm.all_gather(mine, group);
      const HostTensor all = from_int64_bits(TensorType{DType::i64, {parts, static_cast<int64_t>(mine.size())}}, everyone.data());
      // A reduce-scatter keeps this member's block (the first dimension split in group order).
      int64_t first = 0, count = static_cast<int64_t>(mine.size());
      if (s.collective == Collective::reduce_scatter) {
        count /= parts;
        first = count * (std::find(group.begin(), group.end(), comm.rank()) - group.begin());
        shape.erase(shape.begin());
      }
      std::vector<int64_t> combined(all.int64_data() + first, all.int64_data() + first + count);
      for (int64_t k = 1; k < parts; ++k)
        for (int64_t i = 0; i < count; ++i)
          combined[i] = combine_integers(s.op, combined[i], all.int64_data()[k * static_cast<int64_t>(mine.size()) + first + i]);
      return HostTensor::from_integers(TensorType{DType::i64, shape}, std::move(combined));
    }
    case Collective::none: break;
  }
  TESSEL_ASSERT(false, "a transfer without a collective");
}

}  // namespace

HostTensor run_transfer(const Transfer& t, const HostTensor& source, const Mesh& mesh, Communicator& comm) {
  const LayoutStep& s = t.step;
  const std::vector<int64_t> group = mesh.group(comm.rank(), s.mesh_axis);
  if (source.holds_int64()) return run_int64_transfer(s, source, group, comm);
  const int64_t parts = static_cast<int64_t>(group.size());
  std::vector<int64_t> shape = source.shape();
  std::vector<double> values = source.values();
  switch (s.collective) {
    case Collective::all_reduce: comm.all_reduce(values, s.op, group); break;
    case Collective::all_gather:
      values = comm.all_gather(values, group);
      shape.insert(shape.begin(), parts);
      break;
    case Collective::reduce_scatter:
      values = comm.reduce_scatter(values, s.op, group);
      shape.erase(shape.begin());
      break;
    case Collective::all_to_all: values = comm.all_to_all(values, group); break;
    case Collective::shift: values = previous_block(values, group, comm.rank(), comm); break;
    case Collective::none: TESSEL_ASSERT(false, "a transfer without a collective");
  }
  return HostTensor(TensorType{source.dtype(), shape}, std::move(values));
}

ProgramCut cut_program(const SpmdProgram& program) {
  ProgramCut cut;
  const OpGraph& g = program.local;
  std::set<TensorId> ready(g.inputs().begin(), g.inputs().begin() + static_cast<long>(g.inputs().size() - program.transfers.size()));
  for (TensorId w : g.weights()) ready.insert(w);
  std::vector<bool> done(g.num_nodes(), false);
  const std::vector<NodeId> order = g.topological_order();
  size_t next_transfer = 0;
  int left = g.num_nodes();
  // Ring shifts (docs/distributed.md, "Overlap") are cut so that each runs beside work that does
  // not need it: a segment closes at the node making a shift's block (the shift starts as soon as
  // the block exists), and nodes reading the block a shift just brought wait one round (so the
  // piece on the block before it is a segment of its own, which the shift runs beside).
  std::set<TensorId> fresh;  // results of the shifts emitted in the round before
  while (left > 0 || next_transfer < program.transfers.size()) {
    const Transfer* next = next_transfer < program.transfers.size() ? &program.transfers[next_transfer] : nullptr;
    const bool shift_waits = next && next->step.collective == Collective::shift && !ready.count(next->source);
    std::vector<NodeId> nodes;
    for (int pass = 0; pass < 2 && nodes.empty(); ++pass) {
      if (pass == 1) {
        if (fresh.empty()) break;
        fresh.clear();  // nothing else is ready: the fresh blocks' readers go now
      }
      for (NodeId n : order) {
        if (done[n]) continue;
        const auto& ins = g.node_inputs(n);
        if (!std::all_of(ins.begin(), ins.end(), [&](TensorId t) { return ready.count(t) > 0 && !fresh.count(t); })) continue;
        nodes.push_back(n);
        done[n] = true;
        ready.insert(g.node_output(n));
        --left;
        if (shift_waits && g.node_output(n) == next->source) break;
      }
    }
    fresh.clear();
    if (!nodes.empty()) {
      ProgramCut::Segment seg;
      seg.graph = extract_subgraph(g, nodes);
      for (TensorId t : seg.graph.inputs()) seg.inputs.push_back(*g.find_tensor(seg.graph.tensor(t).name));
      for (TensorId t : seg.graph.outputs()) seg.outputs.push_back(*g.find_tensor(seg.graph.tensor(t).name));
      cut.steps.push_back({static_cast<int>(cut.segments.size()), -1});
      cut.segments.push_back(std::move(seg));
    }
    bool moved = !nodes.empty();
    while (next_transfer < program.transfers.size() && ready.count(program.transfers[next_transfer].source)) {
      const bool shift = program.transfers[next_transfer].step.collective == Collective::shift;
      ready.insert(program.transfers[next_transfer].result);
      cut.steps.push_back({-1, static_cast<int>(next_transfer++)});
      moved = true;
      // One shift per round: the piece on its block becomes a segment of its own, which the next
      // shift runs beside.
      if (shift) {
        fresh.insert(program.transfers[next_transfer - 1].result);
        break;
      }
    }
    TESSEL_ASSERT(moved, "an SPMD program whose segments and transfers cannot be ordered");
  }
  return cut;
}

SpmdRunner::SpmdRunner(SpmdProgram program, SegmentCompiler compile) : program_(std::move(program)), cut_(cut_program(program_)) {
  for (const ProgramCut::Segment& seg : cut_.segments) runs_.push_back(compile(seg.graph));
}

std::vector<HostTensor> SpmdRunner::run(const std::vector<HostTensor>& pieces, Communicator& comm) const {
  const OpGraph& g = program_.local;
  std::map<TensorId, HostTensor> values;
  const size_t given = g.inputs().size() - program_.transfers.size();
  TESSEL_ASSERT(pieces.size() == given, "SpmdRunner::run takes one piece per graph input");
  for (size_t i = 0; i < given; ++i) {
    if (pieces[i].type() != g.tensor(g.inputs()[i]).type)
      throw UserError("", cat("input '", g.tensor(g.inputs()[i]).name, "'"),
                      cat("this device's piece is ", pieces[i].type().print(), ", the program needs ",
                          g.tensor(g.inputs()[i]).type.print()));
    values[g.inputs()[i]] = pieces[i];
  }
  for (const ProgramCut::Step& step : cut_.steps) {
    if (step.segment >= 0) {
      const ProgramCut::Segment& seg = cut_.segments[step.segment];
      std::vector<HostTensor> ins;
      for (TensorId t : seg.inputs) ins.push_back(values.at(t));
      std::vector<HostTensor> outs = runs_[step.segment](ins);
      for (size_t k = 0; k < seg.outputs.size(); ++k) values[seg.outputs[k]] = std::move(outs[k]);
    } else {
      const Transfer& t = program_.transfers[step.transfer];
      values[t.result] = run_transfer(t, values.at(t.source), program_.mesh, comm);
    }
  }
  std::vector<HostTensor> out;
  for (TensorId t : program_.outputs) out.push_back(values.count(t) ? values.at(t) : g.weight_values(t));
  return out;
}

std::vector<HostTensor> run_sharded(const OpGraph& graph, const ShardPlan& plan, const std::vector<HostTensor>& inputs,
                                    Communicator& comm, const SegmentCompiler& compile, ShardedTiming* timing) {
  TESSEL_ASSERT(comm.size() == plan.mesh.devices(), "run_sharded: the communicator's ranks are not the mesh's devices");
  SpmdRunner runner(partition(graph, plan, comm.rank()), compile);
  std::vector<HostTensor> pieces;
  for (size_t i = 0; i < inputs.size(); ++i) pieces.push_back(take_piece(inputs[i], plan.inputs[i], plan.mesh, comm.rank()));
  std::vector<HostTensor> local = runner.run(pieces, comm);
  std::vector<int64_t> everyone(plan.mesh.devices());
  for (int64_t d = 0; d < plan.mesh.devices(); ++d) everyone[d] = d;
  if (timing && timing->repeats > 0) {
    // Every device starts a step together (a meeting), times its own part, and the step's time
    // is the slowest device's (the maximum, which is also the next step's meeting).
    std::vector<double> meet{0};
    comm.all_reduce(meet, Combiner::max, everyone);
    for (int k = 0; k < timing->repeats; ++k) {
      const auto start = std::chrono::steady_clock::now();
      runner.run(pieces, comm);
      std::vector<double> t{std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
      comm.all_reduce(t, Combiner::max, everyone);
      timing->step_s.push_back(t[0]);
    }
  }
  std::vector<HostTensor> out;
  for (size_t i = 0; i < local.size(); ++i) {
    const TensorLayout& layout = plan.outputs[i];
    const bool whole = std::all_of(layout.begin(), layout.end(), [](const AxisLayout& l) { return l.kind == AxisLayout::Kind::replicate; });
    if (whole) {
      out.push_back(std::move(local[i]));
      continue;
    }
    const bool exact = local[i].holds_int64();
    const std::vector<double> all = comm.all_gather(exact ? int64_bits(local[i]) : local[i].values(), everyone);
    const auto n = static_cast<size_t>(local[i].size());
    std::vector<HostTensor> per_device;
    for (int64_t d = 0; d < plan.mesh.devices(); ++d)
      per_device.push_back(exact ? from_int64_bits(local[i].type(), all.data() + d * n)
                                 : HostTensor(local[i].type(), std::vector<double>(all.begin() + d * n, all.begin() + (d + 1) * n)));
    out.push_back(assemble(per_device, graph.tensor(graph.outputs()[i]).type.shape, layout, plan.mesh));
  }
  return out;
}

}  // namespace tessel
