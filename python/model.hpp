// python/model.hpp — what the Python objects of the binding hold.
// A Model owns one interpreter (a program loaded by sheaf.load); a Function is a Sheaf function
// value of a model (a global, or one returned by a call) and keeps its model alive; a Value is
// any other Sheaf value without a Python counterpart (data handles), passed back unchanged.
#pragma once
#include <pybind11/pybind11.h>

#include <memory>
#include <ostream>
#include <streambuf>
#include <string>
#include <unordered_map>

#include "eval/interp.hpp"

namespace sheaf::python {

// The program's output, sent to Python's sys.stdout a line at a time (and at the end of each
// call), so that redirect_stdout, pytest's capture and notebooks see it.
class PyStdoutBuf : public std::streambuf {
 protected:
  int overflow(int c) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;

 private:
  std::string pending_;
  void emit();
};

struct ModelState {
  std::string path;  // as given to sheaf.load
  PyStdoutBuf out_buf;
  std::ostream out{&out_buf};
  std::unique_ptr<Interp> interp;
  // Python name → (global name, global), filled by lookups; globals are never redefined. Touched
  // only with the GIL held (or by the teardown job).
  std::unordered_map<std::string, std::pair<std::string, Interp::Global>> resolved;

  ModelState() = default;
  ModelState(const ModelState&) = delete;
  ModelState& operator=(const ModelState&) = delete;
  ~ModelState();  // the interpreter is torn down on the worker (see model.cpp)
};
using ModelPtr = std::shared_ptr<ModelState>;

struct Function {
  ModelPtr model;
  Value fn;          // Kind::Fn or Kind::Builtin
  std::string name;  // the global's name, or the function's own ("<lambda>" when anonymous)
};

struct OpaqueValue {
  ModelPtr model;
  Value value;
};

}  // namespace sheaf::python
