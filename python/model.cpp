// python/model.cpp — the program's output stream and the teardown of a model.
#include "model.hpp"

#include <cstdio>
#include <cstring>

#include "worker.hpp"

namespace py = pybind11;

namespace sheaf::python {

// True when this thread may not use Python (before/after the interpreter's life, or while it is
// finalizing and another thread holds it).
static bool python_unusable() {
  if (!Py_IsInitialized()) return true;
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() && !PyGILState_Check();
#else
  return _Py_IsFinalizing() && !PyGILState_Check();
#endif
}

int PyStdoutBuf::overflow(int c) {
  if (c == traits_type::eof()) return traits_type::not_eof(c);
  pending_.push_back(static_cast<char>(c));
  if (c == '\n') emit();
  return c;
}

std::streamsize PyStdoutBuf::xsputn(const char* s, std::streamsize n) {
  pending_.append(s, static_cast<size_t>(n));
  if (std::memchr(s, '\n', static_cast<size_t>(n))) emit();
  return n;
}

int PyStdoutBuf::sync() {
  emit();
  return 0;
}

void PyStdoutBuf::emit() {
  if (pending_.empty()) return;
  std::string text;
  text.swap(pending_);
  if (python_unusable()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return;
  }
  py::gil_scoped_acquire gil;
  py::error_scope keep;  // a Python error pending on this thread stays as it was
  PyObject* out = PySys_GetObject("stdout");  // borrowed
  PyObject* s = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
  PyObject* r = out && out != Py_None && s ? PyObject_CallMethod(out, "write", "O", s) : nullptr;
  if (!r && (!out || out == Py_None)) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  }
  if (!r) PyErr_Clear();  // a broken sys.stdout does not fail the Sheaf program
  Py_XDECREF(r);
  Py_XDECREF(s);
}

ModelState::~ModelState() {
  // The interpreter ends on the worker (another model's job may be running there); inline where
  // Python cannot wait for it (interpreter shutdown) or is not held.
  if (interp && !on_worker() && !python_unusable() && PyGILState_Check()) {
    try {
      run_on_worker([&] {
        resolved.clear();
        interp.reset();
      });
    } catch (...) {  // the worker reports no errors from a teardown; run it here instead
    }
  }
  resolved.clear();
  interp.reset();
}

}  // namespace sheaf::python
