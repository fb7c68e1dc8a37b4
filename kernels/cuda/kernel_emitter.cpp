// One kernel per fused group, of the family the schedule records (see kernel_emitter.h); the
// templates are in emitter.cpp and emit_*.cpp (emitter.h lists them).
#include "kernels/cuda/kernel_emitter.h"

#include <algorithm>
#include <string_view>

#include "kernels/cuda/emitter.h"
#include "kernels/tile_plans.h"
#include "tilegraph/error.h"
#include "tilegraph/hash.h"

namespace tessel::cuda {

using namespace emitter;  // NOLINT: the emitter's internals


// Placeholder of the kernel's name in the emitted source until its hash is known.
constexpr const char* kPlaceholder = "TESSEL_KERNEL_NAME";

// Names the kernel by a hash of its code without comments (which name the model's nodes), so that
// identical groups (the layers of a transformer) share one name, one compilation and one cache
// entry; the header comment and the manifest say which group it is.
void finish_kernel(GeneratedKernel& k, std::string source, const OpGraph& graph, const Schedule& schedule, int index) {
  k.canonical = strip_comments(source);
  k.name = cat("tessel_", short_hash(k.canonical));
  replace_all(source, kPlaceholder, k.name);
  replace_all(k.canonical, kPlaceholder, k.name);
  k.source = cat("// group ", index, " of the schedule (", schedule.policy, "): ", group_names(graph, schedule.groups[index].group), "\n",
                 source);
}

namespace {

/// The recorded reason a family was declined ("mma: ..."), or "".
std::string declined(const KernelChoice& k, std::string_view family) {
  const std::string prefix = cat(family, ": ");
  for (const std::string& r : k.rejected)
    if (r.rfind(prefix, 0) == 0) return r.substr(prefix.size());
  return "";
}

/// The comments naming why the families before the recorded one were not taken.
std::string declined_comments(const KernelChoice& k) {
  std::string out;
  const std::pair<const char*, const char*> labels[] = {{"flash", "streamed attention kernel not used: "},
                                                        {"wgmma", "warpgroup MMA not used: "},
                                                        {"mma", "tiled contraction kernel not used: "},
                                                        {"row", "row kernel not used: "},
                                                        {"transpose", "tiled transpose not used: "},
                                                        {"vector", "vector kernel not used: "}};
  for (const auto& [family, label] : labels)
    if (const std::string why = declined(k, family); !why.empty()) out += cat("// ", label, why, "\n");
  return out;
}

}  // namespace

GeneratedKernel emit_group_kernel(const OpGraph& graph, const Schedule& schedule, int index, const HwSpec& spec) {
  TESSEL_ASSERT(index >= 0 && index < static_cast<int>(schedule.groups.size()), "group ", index);
  const ScheduledGroup& group = schedule.groups[index].group;
  const KernelChoice& choice = group.kernel;
  TESSEL_ASSERT(!choice.family.empty(), "group ", index, " of the schedule records no kernel family (record_missing_kernel_families)");
  const std::string where = cat("/groups/", index, "/kernel");
  // The tile kinds' load/store plans: the tensor-core kernels also walk BSR blocks and read 2:4
  // compressed weights (contraction_plan.h).
  require_emittable_tiles(graph, group, index, "cuda",
                          choice.family == "mma" || choice.family == "wgmma"
                              ? std::vector<LoadKind>{LoadKind::bsr_blocks, LoadKind::nm_compressed}
                              : std::vector<LoadKind>{});
  GeneratedKernel k;
  k.path = choice.family;
  k.attention_reason = declined(choice, "flash");
  k.mma_reason = declined(choice, "mma");
  k.row_reason = declined(choice, "row");
  k.vector_reason = declined(choice, "vector");
  k.transpose_reason = declined(choice, "transpose");
  const GroupPlan generic = plan_group(graph, group, spec);
  // The recorded family's plan, derived from the group; its parameters must be the recorded ones.
  auto illegal = [&](const std::string& why) {
    return UserError("schedule", where, cat("kernel family '", choice.family, "' cannot emit this group: ", why));
  };
  // (Each recorded parameter must be the plan's; one left out is the plan's own: a variant written
  // by hand may record only what it chooses, e.g. a flash plan's rows, stages, key_split and chunk.)
  auto check_params = [&](const std::map<std::string, int64_t>& derived) {
    if (std::all_of(choice.params.begin(), choice.params.end(), [&](const auto& p) {
          const auto it = derived.find(p.first);
          return it != derived.end() && it->second == p.second;
        }))
      return;
    std::string want, got;
    for (const auto& [name, value] : choice.params) want += cat(" ", name, "=", value);
    for (const auto& [name, value] : derived) got += cat(" ", name, "=", value);
    throw UserError("schedule", where + "/params",
                    cat("recorded parameters", want, " differ from the ones family '", choice.family,
                        "' derives from the group's tiles (", got, " ); parameters are recorded, not yet taken as input"));
  };
  std::string source;
  // Every family but the generic one: its planner's match (or why not), its recorded parameters
  // checked against the plan's, the plan kept, its launch plan, and its emitter.
  auto emit = [&](const auto& match, auto& slot, auto launch_plan, auto emitter) {
    if (!match.plan) throw illegal(match.reason);
    check_params(family_params(*match.plan));
    slot = match.plan;
    k.plan = launch_plan(generic, *match.plan);
    Emitter e(graph, k.plan, spec);
    source = (e.*emitter)(kPlaceholder, *match.plan);
  };
  if (choice.family == "flash") {
    if (group.stream_chunk <= 0) throw illegal("the group does not stream attention (stream_chunk 0)");
    emit(plan_attention(graph, group, generic, spec), k.attention, attention_group_plan, &Emitter::flash_kernel);
  } else if (choice.family == "wgmma" || choice.family == "mma" || choice.family == "simt" || choice.family == "gemv") {
    const ContractionMatch match = plan_contraction(graph, group, generic, spec);
    if (match.plan && match.plan->gemv != (choice.family == "gemv"))
      throw illegal(match.plan->gemv ? cat("its ", match.plan->m, " rows take the gemv family")
                                     : cat("it is not a product of at most ", kGemvMaxRows, " rows (the gemv family)"));
    if (match.plan && !match.plan->gemv && match.plan->simt != (choice.family == "simt"))
      throw illegal(match.plan->simt ? "its operands are f32 (the simt family)" : "its operands are not f32 (the simt family takes f32)");
    if (match.plan && !match.plan->gemv && !match.plan->simt && (match.plan->warpgroup || match.plan->nm_wgmma) != (choice.family == "wgmma"))
      throw illegal(match.plan->warpgroup ? "the spec and tiles select warpgroup MMA (wgmma)"
                                          : cat("no warpgroup MMA: ", match.plan->warpgroup_reason));
    emit(match, k.contraction, mma_group_plan, &Emitter::mma_kernel);
  } else if (choice.family == "row") {
    emit(plan_rows(graph, group, generic, spec), k.rows, row_group_plan, &Emitter::row_kernel);
  } else if (choice.family == "transpose") {
    emit(plan_transpose(graph, group, generic, spec), k.transpose, transpose_group_plan, &Emitter::transpose_kernel);
  } else if (choice.family == "vector") {
    emit(plan_vector(graph, group, generic, spec), k.vector, vector_group_plan, &Emitter::vector_kernel);
  } else if (choice.family == "generic") {
    check_params(family_params(graph, group, generic));
    k.plan = generic;
    Emitter e(graph, k.plan, spec);
    source = e.kernel(kPlaceholder);
  } else {
    throw UserError("schedule", where + "/family",
                    cat("unknown CUDA kernel family '", choice.family, "' (flash, wgmma, mma, simt, gemv, row, transpose, vector, generic)"));
  }
  finish_kernel(k, cat(declined_comments(choice), source), graph, schedule, index);
  return k;
}

}  // namespace tessel::cuda

namespace tessel::cuda {

extern const char* const kDeviceLibrarySource;  // device_library.cpp, generated at build time

const std::string& device_library_source() {
  static const std::string source(kDeviceLibrarySource);
  return source;
}

}  // namespace tessel::cuda
