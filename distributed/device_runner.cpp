#include "distributed/device_runner.h"

#include <set>

#include "cost_model/collective_cost.h"
#include "tilegraph/error.h"

namespace tessel {

namespace {

/// The interconnect level's overlap_units for `t`'s mesh axis (0 without a spec or a level): the
/// level of device 0's group, as the cost model prices it, so every rank agrees (a rank limiting
/// its shift splits a communicator, which every rank must join).
int64_t overlap_units_of(const CompileRequest& base, const SpmdProgram& program, const Transfer& t) {
  if (!base.spec) return 0;
  const auto level = collective_level(*base.spec, program.mesh.group(0, t.step.mesh_axis));
  return level ? level->overlap_units : 0;
}

}  // namespace

DeviceSpmdRunner::DeviceSpmdRunner(SpmdProgram program, const CompileRequest& base, DeviceContext& context,
                                   DeviceCommunicator& comm)
    : program_(std::move(program)), cut_(cut_program(program_)), ctx_(context), comm_(comm) {
  const OpGraph& g = program_.local;
  // Which segment or transfer makes each tensor (ids: segment k, transfer segments + k).
  const int segments = static_cast<int>(cut_.segments.size());
  made_by_.assign(g.num_tensors(), -1);
  for (int k = 0; k < segments; ++k)
    for (TensorId t : cut_.segments[k].outputs) made_by_[t] = k;
  for (size_t k = 0; k < program_.transfers.size(); ++k) made_by_[program_.transfers[k].result] = segments + static_cast<int>(k);
  // Segments that run at the same time as a ring shift -- neither needed for its block nor reading
  // what it brings, directly or through others -- are scheduled for the compute units its level
  // leaves them (InterconnectLevel::overlap_units).
  std::vector<int64_t> reserve(cut_.segments.size(), 0);
  shift_units_.assign(program_.transfers.size(), 0);
  {
    const int steps = segments + static_cast<int>(program_.transfers.size());
    std::vector<std::vector<bool>> before(steps, std::vector<bool>(steps, false));  // before[x][y]: y must end before x
    auto after = [&](int x, int y) {  // x runs after y (y < 0: nothing)
      if (y < 0) return;
      before[x][y] = true;
      for (int z = 0; z < steps; ++z)
        if (before[y][z]) before[x][z] = true;
    };
    auto depend = [&](int x, TensorId t) { after(x, made_by_[t]); };
    // Each stream also runs its work in order: a segment after the segment before it, a
    // collective after the collective before it.
    int last_segment = -1, last_transfer = -1;
    for (const ProgramCut::Step& step : cut_.steps) {
      if (step.segment >= 0) {
        for (TensorId in : cut_.segments[step.segment].inputs) depend(step.segment, in);
        after(step.segment, last_segment);
        last_segment = step.segment;
      } else {
        const int x = segments + step.transfer;
        depend(x, program_.transfers[step.transfer].source);
        after(x, last_transfer);
        last_transfer = x;
      }
    }
    for (size_t t = 0; t < program_.transfers.size(); ++t) {
      if (program_.transfers[t].step.collective != Collective::shift) continue;
      shift_units_[t] = overlap_units_of(base, program_, program_.transfers[t]);
      const int x = segments + static_cast<int>(t);
      for (int k = 0; k < segments; ++k)
        if (!before[x][k] && !before[k][x]) reserve[k] = std::max(reserve[k], shift_units_[t]);
    }
  }
  home_.assign(g.num_tensors(), 0);
  ctx_.make_current();
  // Homes: the given pieces and the transfers' results get buffers of their own; a segment's
  // outputs live in its executable's output buffers.
  const size_t given = g.inputs().size() - program_.transfers.size();
  for (size_t i = 0; i < given; ++i) home_[g.inputs()[i]] = ctx_.alloc(bytes_of(g.inputs()[i]));
  for (const Transfer& t : program_.transfers) home_[t.result] = ctx_.alloc(bytes_of(t.result));
  for (size_t k = 0; k < cut_.segments.size(); ++k) {
    const ProgramCut::Segment& seg = cut_.segments[k];
    CompileRequest r = base;
    if (r.spec && reserve[k] > 0 && reserve[k] < r.spec->compute.units) r.spec->compute.units -= reserve[k];
    r.model_path.clear();
    r.model = nullptr;
    r.graph = &seg.graph;
    r.last = Stage::load;
    r.options.context = &ctx_;
    compiled_.push_back(std::make_unique<Compilation>(compile(r)));
    const Executable::DeviceIo* io = compiled_.back()->executable->device_io();
    if (!io) throw UserError("", "", cat("backend '", r.backend, "' cannot keep tensors on the device between segments"));
    TESSEL_ASSERT(io->outputs.size() == seg.outputs.size(), "a segment's executable has ", io->outputs.size(), " outputs");
    // The segment reads its inputs where they live (made by earlier steps): nothing is copied.
    std::vector<uint64_t> at;
    for (TensorId t : seg.inputs) {
      TESSEL_ASSERT(home_[t] != 0, "segment input '", g.tensor(t).name, "' has no home before the segment");
      at.push_back(home_[t]);
    }
    compiled_.back()->executable->bind_inputs(at);
    for (size_t k = 0; k < seg.outputs.size(); ++k) home_[seg.outputs[k]] = io->outputs[k];
  }
}

DeviceSpmdRunner::~DeviceSpmdRunner() = default;

int64_t DeviceSpmdRunner::bytes_of(TensorId t) const {
  const TensorType& type = program_.local.tensor(t).type;
  return type.num_elements() * dtype_bytes(type.dtype);
}

void DeviceSpmdRunner::set_inputs(const std::vector<HostTensor>& pieces) {
  const OpGraph& g = program_.local;
  TESSEL_ASSERT(pieces.size() == g.inputs().size() - program_.transfers.size(), "one piece per graph input");
  ctx_.make_current();
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].type() != g.tensor(g.inputs()[i]).type)
      throw UserError("", cat("input '", g.tensor(g.inputs()[i]).name, "'"),
                      cat("this device's piece is ", pieces[i].type().print(), ", the program needs ", g.tensor(g.inputs()[i]).type.print()));
    ctx_.upload(home_[g.inputs()[i]], pieces[i]);
  }
}

void DeviceSpmdRunner::enqueue_step() {
  ctx_.make_current();
  // Kernels on the first queue, collectives on the side queue, each waiting only for what it reads:
  // a collective for the segment that made its source, a segment for the collectives whose results
  // it reads. Both queues start from the step's start and the first ends waiting for the side.
  // (A program without transfers never touches the side queue: a capture must join every stream it
  // pulls in.)
  const bool side = !program_.transfers.empty();
  if (events_.empty())
    for (size_t k = 0; k < cut_.segments.size() + program_.transfers.size() + 1; ++k) events_.push_back(ctx_.make_event());
  const int start = events_.back();
  if (side) {
    ctx_.record(start, 0);
    ctx_.wait(start, 1);
  }
  int side_last = -1;  // the last event recorded on the side queue
  for (const ProgramCut::Step& step : cut_.steps) {
    if (step.segment >= 0) {
      const ProgramCut::Segment& seg = cut_.segments[step.segment];
      Executable& exe = *compiled_[step.segment]->executable;
      std::set<int> waited;
      for (TensorId t : seg.inputs) {
        const int by = made_by_[t];
        if (by >= static_cast<int>(cut_.segments.size()) && waited.insert(by).second) ctx_.wait(events_[by], 0);
      }
      exe.enqueue();  // (its inputs bound where they live)
      ctx_.record(events_[step.segment], 0);
      continue;
    }
    const Transfer& t = program_.transfers[step.transfer];
    if (const int by = made_by_[t.source]; by >= 0 && by < static_cast<int>(cut_.segments.size())) ctx_.wait(events_[by], 1);
    const std::vector<int64_t> group = program_.mesh.group(comm_.rank(), t.step.mesh_axis);
    const TensorType& src = program_.local.tensor(t.source).type;
    const int64_t parts = static_cast<int64_t>(group.size());
    void* stream = ctx_.side_stream();
    switch (t.step.collective) {
      case Collective::all_reduce:
        comm_.all_reduce(home_[t.source], home_[t.result], src.num_elements(), src.dtype, t.step.op, group, stream);
        break;
      case Collective::all_gather:
        comm_.all_gather(home_[t.source], home_[t.result], src.num_elements(), src.dtype, group, stream);
        break;
      case Collective::reduce_scatter:
        comm_.reduce_scatter(home_[t.source], home_[t.result], src.num_elements() / parts, src.dtype, t.step.op, group, stream);
        break;
      case Collective::all_to_all:
        comm_.all_to_all(home_[t.source], home_[t.result], src.num_elements() / parts, src.dtype, group, stream);
        break;
      case Collective::shift:
        comm_.shift(home_[t.source], home_[t.result], src.num_elements(), src.dtype, group, shift_units_[step.transfer], stream);
        break;
      case Collective::none: TESSEL_ASSERT(false, "a transfer without a collective");
    }
    side_last = events_[cut_.segments.size() + step.transfer];
    ctx_.record(side_last, 1);
  }
  if (side) ctx_.wait(side_last, 0);
}

std::vector<HostTensor> DeviceSpmdRunner::outputs() {
  ctx_.make_current();
  ctx_.synchronize();
  std::vector<HostTensor> out;
  for (TensorId t : program_.outputs) {
    const TensorInfo& info = program_.local.tensor(t);
    if (info.kind == TensorKind::weight) {
      out.push_back(program_.local.weight_values(t));
      continue;
    }
    TESSEL_ASSERT(home_[t] != 0, "output '", info.name, "' has no home");
    out.push_back(ctx_.download(home_[t], info.type));
  }
  return out;
}

double DeviceSpmdRunner::predicted_kernels_s() const {
  double total = 0;
  for (const auto& c : compiled_) total += c->schedule.predicted_latency_s;
  return total;
}

std::vector<double> DeviceSpmdRunner::time(const TimingOptions& options, bool* graph_used) {
  return ctx_.time([this] { enqueue_step(); }, options, graph_used);
}

}  // namespace tessel
