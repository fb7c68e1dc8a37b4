// Streaming stores (streaming_stores.h): the post-optimization marking step.
#include "kernels/cpu/streaming_stores.h"

#include <set>

#include <llvm/IR/Constants.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Metadata.h>
#include <llvm/IR/Module.h>

namespace tessel::cpu {

int mark_streaming_stores(llvm::Module& module) {
  const llvm::NamedMDNode* listed = module.getNamedMetadata(kStreamingScopes);
  if (!listed) return 0;
  std::set<const llvm::MDNode*> scopes;
  for (const llvm::MDNode* scope : listed->operands()) scopes.insert(scope);
  llvm::LLVMContext& ctx = module.getContext();
  llvm::MDNode* nontemporal =
      llvm::MDNode::get(ctx, {llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(llvm::Type::getInt32Ty(ctx), 1))});
  const llvm::DataLayout& layout = module.getDataLayout();
  int marked = 0;
  for (llvm::Function& f : module)
    for (llvm::BasicBlock& block : f)
      for (llvm::Instruction& inst : block) {
        auto* store = llvm::dyn_cast<llvm::StoreInst>(&inst);
        if (!store || !store->getValueOperand()->getType()->isVectorTy()) continue;
        // The emitter gives every access the one-element scope list of its tensor; the vectorizer
        // keeps it on the wide store.
        const llvm::MDNode* list = store->getMetadata(llvm::LLVMContext::MD_alias_scope);
        if (!list || list->getNumOperands() != 1) continue;
        const auto* scope = llvm::dyn_cast<llvm::MDNode>(list->getOperand(0));
        if (!scope || !scopes.count(scope)) continue;
        const uint64_t bytes = layout.getTypeStoreSize(store->getValueOperand()->getType()).getFixedValue();
        if (store->getAlign().value() < bytes) continue;  // not provably aligned: an ordinary store
        store->setMetadata(llvm::LLVMContext::MD_nontemporal, nontemporal);
        ++marked;
      }
  return marked;
}

}  // namespace tessel::cpu
