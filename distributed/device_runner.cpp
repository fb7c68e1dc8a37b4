#include "distributed/device_runner.h"

#include "tilegraph/error.h"

namespace tessel {

DeviceSpmdRunner::DeviceSpmdRunner(SpmdProgram program, const CompileRequest& base, DeviceContext& context,
                                   DeviceCommunicator& comm)
    : program_(std::move(program)), cut_(cut_program(program_)), ctx_(context), comm_(comm) {
  const OpGraph& g = program_.local;
  home_.assign(g.num_tensors(), 0);
  ctx_.make_current();
  // Homes: the given pieces and the transfers' results get buffers of their own; a segment's
  // outputs live in its executable's output buffers.
  const size_t given = g.inputs().size() - program_.transfers.size();
  for (size_t i = 0; i < given; ++i) home_[g.inputs()[i]] = ctx_.alloc(bytes_of(g.inputs()[i]));
  for (const Transfer& t : program_.transfers) home_[t.result] = ctx_.alloc(bytes_of(t.result));
  for (const ProgramCut::Segment& seg : cut_.segments) {
    CompileRequest r = base;
    r.model_path.clear();
    r.model = nullptr;
    r.graph = &seg.graph;
    r.last = Stage::load;
    r.options.context = &ctx_;
    compiled_.push_back(std::make_unique<Compilation>(compile(r)));
    const Executable::DeviceIo* io = compiled_.back()->executable->device_io();
    if (!io) throw UserError("", "", cat("backend '", r.backend, "' cannot keep tensors on the device between segments"));
    TESSEL_ASSERT(io->outputs.size() == seg.outputs.size(), "a segment's executable has ", io->outputs.size(), " outputs");
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
  for (const ProgramCut::Step& step : cut_.steps) {
    if (step.segment >= 0) {
      const ProgramCut::Segment& seg = cut_.segments[step.segment];
      Executable& exe = *compiled_[step.segment]->executable;
      const Executable::DeviceIo* io = exe.device_io();
      for (size_t i = 0; i < seg.inputs.size(); ++i) {
        TESSEL_ASSERT(home_[seg.inputs[i]] != 0, "segment input '", program_.local.tensor(seg.inputs[i]).name, "' has no home");
        ctx_.copy(io->inputs[i], home_[seg.inputs[i]], bytes_of(seg.inputs[i]));
      }
      exe.enqueue();
      continue;
    }
    const Transfer& t = program_.transfers[step.transfer];
    const std::vector<int64_t> group = program_.mesh.group(comm_.rank(), t.step.mesh_axis);
    const TensorType& src = program_.local.tensor(t.source).type;
    const int64_t parts = static_cast<int64_t>(group.size());
    void* stream = ctx_.stream();
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
      case Collective::none: TESSEL_ASSERT(false, "a transfer without a collective");
    }
  }
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
