// backend/ref_backend.hpp — the reference executor as a Backend (--device ref): a compiled graph
// runs op by op on the eager kernels (backend/ref/executor.hpp), with the plan that releases
// every value after its last reader. It is also what a native backend runs when it cannot build
// a function (reference_fallback).
#pragma once
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>

#include "backend/backend.hpp"

namespace sheaf {

struct SheafError;

class RefBackend final : public Backend {
 public:
  std::string_view name() const override { return "ref"; }
  std::unique_ptr<CompiledGraph> compile(const ir::Graph& g, const CompileContext& c) override;
  void report(std::ostream& os, double dispatch_s) const override;
};

// `g` on the reference executor (`g` outlives it).
std::unique_ptr<CompiledGraph> on_reference(const ir::Graph& g);
// The native backend `backend` could not build `fn` (`e`): a one-line notice naming both, then
// on_reference(g).
std::unique_ptr<CompiledGraph> reference_fallback(std::string_view backend, const std::string& fn, const SheafError& e,
                                                  const ir::Graph& g);
// The "f32 products" line of --jit-profile: the BLAS that host backends multiply with.
void report_host_products(std::ostream& os);

}  // namespace sheaf
