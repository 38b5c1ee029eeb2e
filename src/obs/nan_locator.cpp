// obs/nan_locator.cpp — the first IR node producing a NaN or ±Inf (see nan_locator.hpp).
#include "obs/nan_locator.hpp"

#include <fmt/format.h>

#include "backend/ref/executor.hpp"
#include "emit/stablehlo.hpp"
#include "obs/summary.hpp"

namespace sheaf::obs {
namespace {

// The text of the form at `loc` (its span on the line, cut at 60 characters), or "".
std::string form_text(const SrcLoc& loc) {
  std::string_view line = sources::line_text(loc.file, loc.line);
  if (loc.col == 0 || loc.col > line.size()) return "";
  std::string_view form = line.substr(loc.col - 1, loc.len ? loc.len : std::string_view::npos);
  return form.size() > 60 ? std::string(form.substr(0, 57)) + "..." : std::string(form);
}

std::string describe(const ir::Node& n, std::span<const Tensor> operands) {
  std::string ops;
  for (const Tensor& t : operands) ops += (ops.empty() ? "" : ", ") + tensor_brief(t);
  std::string where;
  if (n.loc.valid()) {
    std::string form = form_text(n.loc);
    where = " at " + sources::describe(n.loc) + (form.empty() ? "" : " " + form);
  }
  return fmt::format("{}{} (operands {})", emit::stablehlo_name(n), where, ops.empty() ? "none" : ops);
}

}  // namespace

std::optional<std::string> first_nonfinite(const ir::Graph& g, std::span<const Tensor> inputs) {
  std::vector<Tensor> values(g.types.size());
  for (size_t i = 0; i < g.params.size() && i < inputs.size(); ++i) values[static_cast<size_t>(g.params[i])] = inputs[i];
  std::optional<std::string> first_any;
  for (const ir::Node& n : g.nodes) {
    if (n.op == ir::Op::Parameter) continue;
    std::vector<Tensor> operands;
    for (int32_t v : n.in) operands.push_back(values[static_cast<size_t>(v)]);
    std::vector<Tensor> results = ref::run_node(g, n, operands);
    bool bad = false;
    for (size_t k = 0; k < results.size(); ++k) {
      bad = bad || has_nonfinite(results[k]);
      values[static_cast<size_t>(n.out) + k] = std::move(results[k]);
    }
    if (!bad || n.op == ir::Op::Constant || n.op == ir::Op::Iota) continue;
    bool clean_operands = true;
    for (const Tensor& t : operands) clean_operands = clean_operands && !has_nonfinite(t);
    if (clean_operands) return describe(n, operands);
    if (!first_any) first_any = describe(n, operands);
  }
  return first_any;
}

}  // namespace sheaf::obs
