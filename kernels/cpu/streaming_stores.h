// Streaming (non-temporal) stores for the outputs of groups that move more data than the caches
// hold (kernels/cpu/README.md, "Streaming stores").
//
// A group whose memory traffic (every tensor it reads from memory plus every output it writes,
// once each) is at least the largest cache of the spec cannot expect its outputs to still be
// cached when a later group reads them. An ordinary store first reads the line it writes (read
// for ownership) and then evicts useful data for it; a non-temporal store writes the line
// without reading it. plan_cpu_group decides which outputs stream (CpuNodeBuffer::streamed);
// the emitter lists their alias scopes in the module's named metadata kStreamingScopes, assumes
// what it knows about their alignment, and ends the kernel with a fence (non-temporal stores are
// weakly ordered: the fence makes them visible before the thread pool reports the task range
// done). LLVM's loop vectorizer does not vectorize a loop with a `!nontemporal` store, so the
// stores are emitted plain and mark_streaming_stores flags them after the optimizer ran: every
// vector store into a streamed tensor whose alignment LLVM proved to be at least its size (the
// condition for a single non-temporal vector store). Scalar stores, loop tails and stores whose
// alignment is unknown stay ordinary stores.
#pragma once

namespace llvm {
class Module;
}  // namespace llvm

namespace tessel::cpu {

/// The module's named metadata listing the alias scopes of streamed tensors.
inline constexpr const char* kStreamingScopes = "tessel.streaming_scopes";

/// Flags every qualifying vector store (above) with `!nontemporal`; returns how many. Runs after
/// LLVM's optimization pipeline (optimize_module), before code generation.
int mark_streaming_stores(llvm::Module& module);

}  // namespace tessel::cpu
