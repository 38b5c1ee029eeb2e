// cli/build.cpp — `sheaf build FILE -o OUT [-S] [--config JSON] [--trace-with] [--backend B] [-v]`
// (SPEC §8): ahead-of-time compilation of every top-level `defn` whose argument shapes are known,
// and of the value-and-grad closure `f-vag` of each f the program differentiates.
// Shapes come from --config (parameter name → shape, nested objects for dict parameters, `[]` a
// scalar, or {"shape": [..], "dtype": "i32"}) — then only the file's definitions are evaluated —
// or from --trace-with, which runs the whole program and records each function's first call.
// Each function is traced and optimised like a JIT compilation; the module is StableHLO text
// (`-S` or OUT ending in .mlir) or, for OUT ending in .vmfb, compiled by IREE's iree-compile.
// Beside OUT goes OUT.manifest.json with each function's content hash. `--ir` writes the
// readable tensor IR instead (an extension, used by tests/ir).
#include "cli/build.hpp"

#include <CLI/CLI.hpp>
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>

#include "autodiff/value_and_grad.hpp"
#include "base/error.hpp"
#include "emit/stablehlo.hpp"
#include "eval/interp.hpp"
#include "eval/typed_params.hpp"
#include "io/atomic_write.hpp"
#include "io/data_file.hpp"
#include "passes/passes.hpp"
#include "reader/reader.hpp"
#include "runtime/content_hash.hpp"
#include "runtime/jit.hpp"
#include "trace/tracer.hpp"

namespace sheaf {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct BuildOptions {
  std::string file, out, config, backend = "llvm-cpu";
  bool stablehlo = false, trace_with = false, verbose = false, ir = false;
};

// A config leaf or subtree as an example argument: zero tensors of the given shapes.
Value example_value(const json& j, const std::string& where) {
  if (j.is_array()) {
    Shape s;
    for (const json& d : j) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) throw SheafError("--config: '" + where + "': a shape is a list of sizes ≥ 0");
      s.push_back(d.get<int64_t>());
    }
    if (s.empty()) return Value::real(0.0f);
    return Value::tensor(Tensor(DType::F32, s));
  }
  if (j.is_object() && j.contains("shape")) {
    std::string dt = j.value("dtype", "f32");
    auto d = dtype_from_name(dt);
    if (!d) throw SheafError("--config: '" + where + "': unknown dtype '" + dt + "'");
    Value shape = example_value(j["shape"], where);
    Shape s = shape.is(Kind::Tensor) ? shape.as_tensor().shape() : Shape{};
    return Value::tensor(Tensor(*d, s));
  }
  if (j.is_object()) {
    std::vector<std::pair<std::string, Value>> entries;
    for (const auto& [k, v] : j.items()) entries.emplace_back(k, example_value(v, where + "." + k));
    return make_dict(std::move(entries));
  }
  throw SheafError("--config: '" + where + "': expected a shape list or an object");
}

bool is_definition(const Value& form) {
  if (!form.is_list() || form.as_list().items.empty() || !form.as_list().items[0].is(Kind::Symbol)) return false;
  const std::string& head = symbols::name(form.as_list().items[0].symbol());
  return head == "def" || head == "defn" || head == "defmacro" || head == "use";
}

void evaluate_definitions(Interp& in, const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw SheafError("cannot open file '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  in.current_dir = fs::absolute(path).parent_path().string();
  uint32_t file = sources::add(path, ss.str(), false);
  for (const Value& form : read_all(ss.str(), file)) {
    Value e = in.expand(form);
    if (is_definition(e)) in.eval(e, std::make_shared<Env>());
  }
}

// Names f of the `(value-and-grad f)` forms anywhere in `form`.
void differentiated_names(const Value& form, std::set<std::string>& out) {
  if (!form.is_list()) return;
  const auto& items = form.as_list().items;
  if (items.size() == 2 && items[0].is(Kind::Symbol) && symbols::name(items[0].symbol()) == "value-and-grad" &&
      items[1].is(Kind::Symbol))
    out.insert(symbols::name(items[1].symbol()));
  for (const Value& x : items) differentiated_names(x, out);
}

// A function to compile: its name in the module, the function, and the function whose
// parameters name its --config shapes (a value-and-grad closure f-vag takes f's).
struct Compiled {
  std::string name;
  Value fn;
  Value shapes_of;
};

// The program's own functions in source order, each followed by its value-and-grad closure
// when the program differentiates it (SPEC §8: named <f>-vag).
std::vector<Compiled> user_functions(const Interp& in, const std::string& path) {
  std::vector<std::pair<std::string, Value>> fns;
  for (const auto& [id, g] : in.globals())
    if (g.type == Interp::Global::Type::Defn && g.module.empty()) fns.emplace_back(symbols::name(id), g.value);
  std::sort(fns.begin(), fns.end(), [](const auto& a, const auto& b) {
    SrcLoc x = a.second.template as<FnObj>().loc, y = b.second.template as<FnObj>().loc;
    return std::tie(x.line, x.col, a.first) < std::tie(y.line, y.col, b.first);
  });
  std::set<std::string> differentiated;
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  for (const Value& form : read_all(ss.str(), sources::add(path, ss.str(), false))) differentiated_names(form, differentiated);
  std::vector<Compiled> out;
  for (const auto& [name, fn] : fns) {
    out.push_back({name, fn, fn});
    if (differentiated.count(name))
      out.push_back({name + "-vag", make_value_and_grad(fn, true, fn.as<FnObj>().loc), fn});
  }
  return out;
}

std::optional<std::vector<Value>> config_args(const FnObj& fn, const json& config, std::string& why) {
  if (!fn.params.rest.is_nil()) {
    why = "it takes & rest arguments";
    return std::nullopt;
  }
  std::vector<Value> args;
  for (const Value& pattern : fn.params.patterns) {
    const Value& p = param_name(pattern);
    if (!p.is(Kind::Symbol)) {
      why = "a destructured parameter has no name to look up in --config";
      return std::nullopt;
    }
    const std::string& name = symbols::name(p.symbol());
    if (!config.contains(name)) {
      why = "no shape for parameter '" + name + "' in --config";
      return std::nullopt;
    }
    args.push_back(example_value(config[name], name));
  }
  return args;
}

std::string find_iree_compile() {
  if (const char* e = std::getenv("IREE_COMPILE"); e && *e) return e;
  if (const char* path = std::getenv("PATH"))
    for (std::string_view rest = path; !rest.empty();) {
      size_t c = rest.find(':');
      fs::path p = fs::path(std::string(rest.substr(0, c))) / "iree-compile";
      if (std::error_code ec; fs::exists(p, ec)) return p.string();
      rest = c == std::string_view::npos ? std::string_view{} : rest.substr(c + 1);
    }
  return "";
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

int build(const BuildOptions& o) {
  std::ostringstream program_out;
  Interp in(o.trace_with ? static_cast<std::ostream&>(std::cout) : program_out);
  std::map<std::string, std::vector<Value>> first_calls;
  auto log = [&](const std::string& s) {
    if (o.verbose) std::cerr << "build: " << s << "\n";
  };
  json config = json::object();
  if (!o.config.empty()) {
    try {
      config = json::parse(o.config);
    } catch (const json::exception& e) {
      throw SheafError(std::string("--config is not valid JSON: ") + e.what());
    }
    if (!config.is_object()) throw SheafError("--config must be a JSON object mapping parameter names to shapes");
  }
  if (o.trace_with) {
    log("running " + o.file + " to record the first call of each function");
    jit_of(in)->observe = [&](const Value& fn, std::span<const Value> args) {
      const std::string& name = fn.as<FnObj>().name;
      if (!first_calls.count(name)) first_calls[name] = std::vector<Value>(args.begin(), args.end());
    };
    in.run_file(o.file);
    jit_of(in)->observe = nullptr;
  } else {
    log("evaluating the definitions of " + o.file);
    evaluate_definitions(in, o.file);
  }

  std::vector<ir::Graph> graphs;
  json manifest = {{"functions", json::object()}};
  for (const auto& [name, fn, shapes_of] : user_functions(in, o.file)) {
    std::string why;
    std::optional<std::vector<Value>> args;
    if (auto it = first_calls.find(name); it != first_calls.end()) args = it->second;
    else if (!o.trace_with) args = config_args(shapes_of.as<FnObj>(), config, why);
    else why = "it was not called with tensor arguments";
    if (!args) {
      log("skipping '" + name + "': " + why);
      continue;
    }
    try {
      trace::Traced t = trace::trace_call(in, fn, *args, fn.as<FnObj>().loc, false);
      t.graph.name = name;
      if (t.guarded) {  // an exported module has no way to report: its guards are dropped
        t.graph.results.pop_back();
        std::cerr << "warning: the guards in '" << name << "' are not checked by the compiled module\n";
      }
      passes::optimize(t.graph);
      log(fmt::format("compiled '{}': {} IR nodes", name, t.graph.nodes.size()));
      graphs.push_back(std::move(t.graph));
      manifest["functions"][name] = {{"hash", content_hash(in, fn)}, {"code", code_hash(in, fn)}};
    } catch (const TraceAbort& e) {
      std::string reason = e.what();
      if (reason.find("has effects") != std::string::npos || reason.find("I/O") != std::string::npos)
        std::cerr << "warning: '" << name << "' has side effects (print, io) and cannot be compiled\n";
      else
        std::cerr << "warning: '" << name << "' cannot be compiled: " << reason << "\n";
    } catch (const SheafError& e) {
      std::cerr << "warning: '" << name << "' cannot be compiled: " << e.what() << "\n";
    }
  }
  if (graphs.empty()) throw SheafError("nothing could be compiled: give argument shapes with --config or run the program with --trace-with");

  std::vector<const ir::Graph*> ptrs;
  for (const ir::Graph& g : graphs) ptrs.push_back(&g);
  if (o.ir) {  // the readable tensor IR after the passes, for inspection and tests/ir
    std::string text;
    for (const ir::Graph* g : ptrs) text += ir::print(*g);
    if (o.out == "-") std::cout << text;
    else write_file_atomic(o.out, text);
    return 0;
  }
  std::string module = emit::emit_stablehlo(ptrs);
  bool mlir = o.stablehlo || fs::path(o.out).extension() == ".mlir";
  if (mlir) {
    if (o.out == "-") std::cout << module;
    else write_file_atomic(o.out, module);
  } else if (fs::path(o.out).extension() == ".vmfb") {
    std::string compiler = find_iree_compile();
    if (compiler.empty())
      throw SheafError("building a .vmfb needs IREE's iree-compile: install it (pip install iree-base-compiler) or set IREE_COMPILE");
    std::string work = (fs::temp_directory_path() / "sheaf-build-XXXXXX").string();
    if (!::mkdtemp(work.data())) throw SheafError(fmt::format("cannot create a temporary directory for iree-compile: {}", std::strerror(errno)));
    struct RemoveWork {
      std::string dir;
      ~RemoveWork() {
        std::error_code ec;
        fs::remove_all(dir, ec);
      }
    } remove_work{work};
    std::string tmp_mlir = work + "/module.mlir", tmp_out = work + "/module.vmfb";
    write_file_atomic(tmp_mlir, module);
    std::string cmd = fmt::format("{} --iree-hal-target-backends={}{} {} -o {}", shell_quote(compiler), shell_quote(o.backend),
                                  o.backend == "llvm-cpu" ? " --iree-llvmcpu-target-cpu=host" : "", shell_quote(tmp_mlir),
                                  shell_quote(tmp_out));
    log("running " + cmd);
    int rc = std::system(cmd.c_str());
    if (rc != 0) throw SheafError(fmt::format("iree-compile failed (status {}) on the module for {}", rc, o.file));
    write_file_atomic(o.out, read_file(tmp_out));
  } else {
    throw SheafError("sheaf build writes StableHLO (-S or OUT.mlir) or an IREE module (OUT.vmfb); native CPU artifacts are "
                     "made just in time and cached in __sheaf__/");
  }
  std::error_code ec;  // no manifest beside a device or a pipe (-o /dev/null)
  if (o.out != "-" && fs::is_regular_file(o.out, ec)) write_file_atomic(o.out + ".manifest.json", manifest.dump(2) + "\n");
  log(fmt::format("wrote {} ({} function{})", o.out, graphs.size(), graphs.size() == 1 ? "" : "s"));
  return 0;
}

}  // namespace

int build_main(int argc, char** argv) {
  BuildOptions o;
  CLI::App app{"Ahead-of-time compilation of a Sheaf program's pure functions.", "sheaf build"};
  app.add_option("file", o.file, "Program (.shf)")->required();
  app.add_option("-o", o.out, "Output: OUT.mlir (StableHLO), OUT.vmfb (IREE module), or - for stdout with -S")->required();
  app.add_flag("-S", o.stablehlo, "Write the StableHLO module (MLIR generic form)");
  app.add_option("--config", o.config, "JSON object: parameter name → shape (nested objects for dicts)");
  app.add_flag("--trace-with", o.trace_with, "Run the program and record each function's first call");
  app.add_option("--backend", o.backend, "IREE target backend for .vmfb (llvm-cpu, cuda, vulkan-spirv)");
  app.add_flag("-v", o.verbose, "Report each stage and every skipped function");
  app.add_flag("--ir", o.ir, "Write the optimised tensor IR (readable text) instead of StableHLO");
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  try {
    return build(o);
  } catch (const SheafError& e) {
    std::cout.flush();
    std::cerr << render_error(e, isatty(2) && !std::getenv("NO_COLOR"));
    return 1;
  }
}

}  // namespace sheaf
