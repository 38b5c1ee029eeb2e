// python/sheaf_module.cpp — `import sheaf` (SPEC §10, docs/python.md).
//   m = sheaf.load("model.shf")          runs the program in a fresh interpreter (as the CLI does)
//   loss, p = m.train_step(p, x, y)      calls the global `train-step` (snake_case → kebab-case)
//   m["config"], m.get("config")         global values
// Sheaf errors raise sheaf.SheafError carrying the rendered diagnostic (file:line:col, notes).
// Every evaluation runs on the worker thread (worker.hpp) with the GIL released; conversions
// (convert.hpp) run on the caller's thread.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <filesystem>
#include <optional>

#include "base/error.hpp"
#include "base/malloc_policy.hpp"
#include "builtins/init_runtime.hpp"
#include "convert.hpp"
#include "model.hpp"
#include "obs/guards.hpp"
#include "runtime/device_choice.hpp"
#include "runtime/jit.hpp"
#include "value/printer.hpp"
#include "worker.hpp"

namespace py = pybind11;

namespace sheaf::python {
namespace {

PyObject* g_sheaf_error = nullptr;  // the sheaf.SheafError class (kept for the process)

// `text`: str() of the exception, the rendered diagnostic unless given (a guard report).
void raise_sheaf_error(const SheafError& e, std::string text = {}) {
  if (text.empty()) text = render_error(e, false);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  py::object exc = py::reinterpret_borrow<py::object>(g_sheaf_error)(text);
  exc.attr("message") = std::string(e.what());
  bool at = e.loc.valid();
  exc.attr("file") = at ? py::object(py::str(sources::path(e.loc.file))) : py::none();
  exc.attr("line") = at ? py::object(py::int_(e.loc.line)) : py::none();
  exc.attr("col") = at && e.loc.col ? py::object(py::int_(e.loc.col)) : py::none();
  exc.attr("notes") = e.notes;
  exc.attr("hint") = e.hint.empty() ? py::none() : py::object(py::str(e.hint));
  PyErr_SetObject(g_sheaf_error, exc.ptr());
}

// Flushes the program's output when a job ends, however it ends.
struct FlushOutput {
  Interp& in;
  ~FlushOutput() { in.out().flush(); }
};

std::string kebab(std::string s) {
  std::replace(s.begin(), s.end(), '_', '-');
  return s;
}

// `train-step` → `train_step`; nullopt when the result is no Python identifier (`valid?`).
std::optional<std::string> snake(const std::string& s) {
  std::string out = s;
  std::replace(out.begin(), out.end(), '-', '_');
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) return std::nullopt;
  for (char c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && static_cast<unsigned char>(c) < 0x80) return std::nullopt;
  return out;
}

bool is_function(const Interp::Global& g) { return g.type != Interp::Global::Type::Macro && g.value.is_callable(); }

struct Lookup {
  std::optional<std::pair<std::string, Interp::Global>> found;
  std::vector<std::string> near;       // when not found: similar global names
  std::vector<std::string> functions;  // when not found and nothing is similar: some functions
};

// The global a Python name stands for: the name itself, else with '_' → '-'. Cached per model.
Lookup lookup(const ModelPtr& m, const std::string& name) {
  auto hit = m->resolved.find(name);
  if (hit != m->resolved.end()) return Lookup{hit->second, {}, {}};
  Lookup r;
  run_on_worker([&] {
    Interp& in = *m->interp;
    for (const std::string& candidate : {name, kebab(name)})
      if (const Interp::Global* g = in.global(symbols::intern(candidate))) {
        r.found.emplace(candidate, *g);
        return;
      }
    std::vector<std::string> names;
    for (const auto& [id, g] : in.globals())
      if (g.type != Interp::Global::Type::Macro) names.push_back(symbols::name(id));
    r.near = suggest_names(kebab(name), names);
    for (const auto& [id, g] : in.globals())
      if (g.module.empty() && is_function(g)) r.functions.push_back(symbols::name(id));
    std::sort(r.functions.begin(), r.functions.end());
  });
  if (r.found) m->resolved.emplace(name, *r.found);
  return r;
}

std::string python_spelling(const std::string& global) {
  std::optional<std::string> s = snake(global);
  return s && *s != global ? fmt::format("{} (m.{})", global, *s) : global;
}

std::string not_found(const ModelPtr& m, const std::string& name, const Lookup& r, std::string_view what) {
  std::string msg = fmt::format("sheaf program '{}' has no {} '{}'", m->path, what, name);
  if (kebab(name) != name) msg += fmt::format(" (nor '{}')", kebab(name));
  std::vector<std::string> near;
  for (const std::string& n : r.near) near.push_back(python_spelling(n));
  if (!near.empty()) return msg + fmt::format("; did you mean {}?", fmt::join(near, ", "));
  if (r.functions.empty()) return msg;
  size_t shown = std::min<size_t>(r.functions.size(), 12);
  return msg + fmt::format("; its functions: {}{}", fmt::join(r.functions.begin(), r.functions.begin() + static_cast<long>(shown), ", "),
                           shown < r.functions.size() ? ", ..." : "");
}

py::object function_attr(const ModelPtr& m, const std::string& name) {
  if (name.starts_with("__")) throw py::attribute_error(name);  // Python's own protocol probes
  Lookup r = lookup(m, name);
  if (!r.found) throw py::attribute_error(not_found(m, name, r, "function"));
  const auto& [global, g] = *r.found;
  if (g.type == Interp::Global::Type::Macro) throw py::attribute_error(fmt::format("'{}' is a macro; only functions can be called from Python", global));
  if (!is_function(g))
    throw py::attribute_error(fmt::format("'{}' is a value ({}), not a function: read it with m[\"{}\"]", global, kind_name(g.value.kind()), name));
  return py::cast(Function{m, g.value, global});
}

py::object global_value(const ModelPtr& m, const std::string& name) {
  Lookup r = lookup(m, name);
  if (!r.found) throw py::key_error(not_found(m, name, r, "global"));
  if (r.found->second.type == Interp::Global::Type::Macro) throw py::key_error(fmt::format("'{}' is a macro, not a value", r.found->first));
  if (r.found->second.value.is_callable()) return py::cast(Function{m, r.found->second.value, r.found->first});
  return to_python(r.found->second.value, m);
}

py::object call(const Function& f, py::args args, py::kwargs kwargs) {
  if (kwargs && !kwargs.empty())
    throw py::type_error(fmt::format("{}() takes positional arguments only (pass a dict for {{:keys [...]}} parameters)", f.name));
  std::vector<Value> in_args;
  in_args.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) in_args.push_back(to_sheaf(args[i], fmt::format("{}() argument {}", f.name, i + 1), f.model));
  Interp& in = *f.model->interp;
  Value result;
  run_on_worker(
      [&] {
        in.interrupt = false;
        FlushOutput flush{in};
        try {
          result = in.call(f.fn, in_args, {});
        } catch (SheafError& e) {
          if (f.fn.is(Kind::Fn)) {
            if (!e.loc.valid()) e.loc = f.fn.as<FnObj>().loc;  // raised at the call itself (arity): the definition
            if (e.notes.size() < 8) e.notes.push_back(fmt::format("in {}, called from Python", f.name));
          }
          throw;
        }
      },
      [&] { in.interrupt = true; });
  return to_python(result, f.model);
}

ModelPtr load(const std::filesystem::path& path, bool jit, const std::string& device, const std::vector<std::string>& args, bool progress) {
  const DeviceNames python_devices{{"cpu", "ref"}, false};  // compiled code on the CPU, named (docs/python.md)
  try {
    check_device_name(device, python_devices);
  } catch (const SheafError& e) {
    throw py::value_error(e.what());
  }
  if (path.extension() != ".shf") {
    std::string warning = fmt::format("'{}' does not have the .shf extension", path.string());
    if (PyErr_WarnEx(PyExc_UserWarning, warning.c_str(), 1) < 0) throw py::error_already_set();
  }
  auto m = std::make_shared<ModelState>();
  m->path = path.string();
  std::atomic<Interp*> live{nullptr};
  run_on_worker(
      [&] {
        m->interp = std::make_unique<Interp>(m->out);
        Interp& in = *m->interp;
        in.program_args = args;
        in.progress_bars = progress;
        if (!jit) {
          in.jit.reset();
        } else {  // compiled code on the CPU, cached in __sheaf__/ beside the file (SPEC §7.9)
          choose_device(*jit_of(in), device, python_devices,
                        {.cache_dir = cache_beside(std::filesystem::absolute(path).parent_path().string())});
        }
        live = &in;
        FlushOutput flush{in};
        in.run_file(path.string());
      },
      [&] {
        if (Interp* in = live.load()) in->interrupt = true;
      });
  return m;
}

std::string describe_model(const ModelPtr& m) {
  size_t functions = 0, values = 0;
  run_on_worker([&] {
    for (const auto& [id, g] : m->interp->globals())
      if (g.module.empty()) ++(is_function(g) ? functions : values);
  });
  return fmt::format("<sheaf.Model '{}': {} functions, {} values>", m->path, functions, values);
}

std::vector<std::string> program_names(const ModelPtr& m, bool functions_only) {
  std::vector<std::string> names;
  run_on_worker([&] {
    for (const auto& [id, g] : m->interp->globals())
      if (g.module.empty() && g.type != Interp::Global::Type::Macro && (!functions_only || is_function(g))) names.push_back(symbols::name(id));
  });
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace
}  // namespace sheaf::python

PYBIND11_MODULE(sheaf, mod) {
  using namespace sheaf;
  using namespace sheaf::python;
  set_process_malloc_policy();  // as the CLI: the worker thread would get an arena of its own
  init_runtime();

  mod.doc() = "Sheaf, a Lisp for neural networks: load a .shf program and call its functions with numpy arrays.";
  mod.attr("__version__") = SHEAF_VERSION;

  py::exception<SheafError> error(mod, "SheafError", PyExc_Exception);
  error.doc() =
      "An error raised by a Sheaf program. str() is the rendered diagnostic (message, file:line:col, the\n"
      "quoted line, notes, hint); attributes: message, file, line, col (None when unknown), notes, hint.";
  g_sheaf_error = error.inc_ref().ptr();
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const SheafError& e) {
      raise_sheaf_error(e);
    } catch (const obs::GuardBreach& b) {
      raise_sheaf_error(SheafError(b.what()), b.what());
    }
  });

  py::class_<Function>(mod, "Function", "A Sheaf function of a loaded program; call it with Python/numpy values.")
      .def("__call__", &call)
      .def_property_readonly("name", [](const Function& f) { return f.name; })
      .def("__repr__", [](const Function& f) {
        std::string params = f.fn.is(Kind::Fn) ? " " + f.fn.as<FnObj>().params.describe() : "";
        return fmt::format("<sheaf.Function {}{}>", f.name, params);
      });

  py::class_<OpaqueValue>(mod, "Value", "A Sheaf value with no Python counterpart (a data handle); pass it back as an argument.")
      .def("__repr__", [](const OpaqueValue& v) { return fmt::format("<sheaf.Value {}>", print_value(v.value, false)); });

  py::class_<ModelState, ModelPtr>(mod, "Model", "A loaded Sheaf program: its functions as attributes, its globals by name.")
      .def("__getattr__", &function_attr, py::arg("name"))
      .def("__getitem__", &global_value, py::arg("name"))
      .def(
          "get",
          [](const ModelPtr& m, const std::string& name, py::object fallback) {
            return lookup(m, name).found ? global_value(m, name) : fallback;
          },
          py::arg("name"), py::arg("default") = py::none(), "The global `name` (or its kebab-case spelling), else `default`.")
      .def("__contains__",
           [](const ModelPtr& m, const std::string& name) {
             Lookup r = lookup(m, name);
             return r.found && r.found->second.type != Interp::Global::Type::Macro;
           })
      .def(
          "names", [](const ModelPtr& m) { return program_names(m, false); },
          "The program's global names as written in the program (kebab-case), sorted.")
      .def("__dir__",
           [](py::object self) {
             py::list out = py::module_::import("builtins").attr("object").attr("__dir__")(self);
             for (const std::string& n : program_names(self.cast<ModelPtr>(), true))
               if (std::optional<std::string> s = snake(n)) out.append(*s);
             return out;
           })
      .def_property_readonly("path", [](const ModelPtr& m) { return m->path; })
      .def("__repr__", &describe_model);

  mod.def("load", &load, py::arg("path"), py::kw_only(), py::arg("jit") = true, py::arg("device") = "cpu",
          py::arg("args") = std::vector<std::string>{}, py::arg("progress") = false,
          "Runs the .shf program at `path` in a fresh interpreter and returns its Model.\n"
          "jit: compile pure functions (cached in __sheaf__/ beside the file); device: 'cpu' or 'ref';\n"
          "args: what the program's (argv) returns; progress: draw progress bars on stderr.\n"
          "Raises SheafError when the file cannot be read or the program fails.");
}
