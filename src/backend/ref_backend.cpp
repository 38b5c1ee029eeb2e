// backend/ref_backend.cpp — the reference executor behind the Backend interface (ref_backend.hpp).
#include "backend/ref_backend.hpp"

#include <ostream>

#include <fmt/format.h>

#include "backend/ref/executor.hpp"
#include "base/error.hpp"
#include "base/notice.hpp"
#include "tensor/blas.hpp"

namespace sheaf {
namespace {

class OnReference final : public CompiledGraph {
 public:
  explicit OnReference(const ir::Graph& g) : g_(g), plan_(ref::plan(g)) {}
  std::vector<Tensor> run(std::span<const Tensor> inputs, bool) override { return ref::run(g_, plan_, inputs); }

 private:
  const ir::Graph& g_;
  ref::Plan plan_;
};

}  // namespace

std::unique_ptr<CompiledGraph> on_reference(const ir::Graph& g) { return std::make_unique<OnReference>(g); }

std::unique_ptr<CompiledGraph> RefBackend::compile(const ir::Graph& g, const CompileContext&) { return on_reference(g); }

void RefBackend::report(std::ostream& os, double) const { report_host_products(os); }

std::unique_ptr<CompiledGraph> reference_fallback(std::string_view backend, const std::string& fn, const SheafError& e,
                                                  const ir::Graph& g) {
  std::string msg = e.what();
  notice(fmt::format("the {} backend could not build '{}' ({}); it runs on the reference executor", backend, fn,
                     msg.substr(0, msg.find('\n'))));
  return on_reference(g);
}

void report_host_products(std::ostream& os) { os << fmt::format("  f32 products: {}\n", blas_description()); }

}  // namespace sheaf
