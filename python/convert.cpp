// python/convert.cpp — see convert.hpp.
#include "convert.hpp"

#include <fmt/format.h>
#include <pybind11/numpy.h>

#include <cstring>
#include <limits>
#include <optional>

#include "io/elements.hpp"
#include "value/function.hpp"

namespace py = pybind11;

namespace sheaf::python {
namespace {

constexpr int kMaxDepth = 500;  // nesting of lists/dicts/tuples (a cycle ends here too)

py::module_& numpy() {
  static auto* np = new py::module_(py::module_::import("numpy"));  // never released
  return *np;
}

std::string type_name(py::handle h) { return Py_TYPE(h.ptr())->tp_name; }

[[noreturn]] void unsupported(const std::string& where, const std::string& what) {
  throw py::type_error(fmt::format("{}: {}", where, what));
}

// The array a tensor wraps is released by the tensor's last owner, on any thread.
void release_array(PyObject* a) {
  if (!Py_IsInitialized()) return;
  if (PyGILState_Check()) {
    Py_DECREF(a);
    return;
  }
#if PY_VERSION_HEX >= 0x030D0000
  if (Py_IsFinalizing()) return;
#else
  if (_Py_IsFinalizing()) return;  // another thread may not take the GIL any more: leak it
#endif
  PyGILState_STATE s = PyGILState_Ensure();
  Py_DECREF(a);
  PyGILState_Release(s);
}

// How an array's elements become a tensor: kept as they are (possibly without a copy), decoded
// by the file loaders' rules, or widened here (uint16, uint64: no file format has them).
struct ElementRule {
  std::optional<DType> kept;
  std::optional<Elem> decoded;
  bool u16 = false, u64 = false;
};

std::optional<ElementRule> element_rule(const py::dtype& dt) {
  size_t n = static_cast<size_t>(dt.itemsize());
  ElementRule r;
  switch (dt.kind()) {
    case 'f':
      if (n == 4) r.kept = DType::F32;
      else if (n == 2) r.kept = DType::F16;
      else if (n == 8) r.decoded = Elem::F64;
      else return std::nullopt;
      return r;
    case 'i':
      if (n == 4) r.kept = DType::I32;
      else if (n == 8) r.decoded = Elem::I64;
      else if (n == 2) r.decoded = Elem::I16;
      else if (n == 1) r.decoded = Elem::I8;
      else return std::nullopt;
      return r;
    case 'u':
      if (n == 4) r.kept = DType::U32;
      else if (n == 1) r.decoded = Elem::U8;
      else if (n == 2) r.u16 = true;
      else if (n == 8) r.u64 = true;
      else return std::nullopt;
      return r;
    case 'b':
      r.kept = DType::Bool;
      return r;
    case 'V':  // ml_dtypes' bfloat16 (JAX arrays)
      if (n == 2 && py::str(static_cast<const py::handle&>(dt)).cast<std::string>() == "bfloat16") {
        r.kept = DType::BF16;
        return r;
      }
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

Tensor array_to_tensor(py::array arr, const std::string& where) {
  py::dtype dt = arr.dtype();
  std::optional<ElementRule> rule = element_rule(dt);
  if (!rule)
    unsupported(where, fmt::format("numpy arrays of dtype {} are not supported (float32 float16 int32 uint32 bool are kept; "
                                   "float64 → f32 and int8..int64, uint8, uint16, uint64 → i32 are converted)",
                                   py::str(static_cast<const py::handle&>(dt)).cast<std::string>()));
  constexpr auto kAligned = py::detail::npy_api::NPY_ARRAY_ALIGNED_;
  bool usable = (arr.flags() & py::array::c_style) && (py::detail::array_proxy(arr.ptr())->flags & kAligned) &&
                dt.attr("isnative").cast<bool>();
  if (!usable)  // a C-contiguous, aligned, native-endian copy
    arr = numpy().attr("ascontiguousarray")(arr, py::arg("dtype") = dt.attr("newbyteorder")("=")).cast<py::array>();
  Shape shape(arr.shape(), arr.shape() + arr.ndim());
  const auto* bytes = static_cast<const std::byte*>(arr.data());
  if (rule->kept) {  // the tensor shares the array's memory and keeps the array alive
    PyObject* owner = arr.inc_ref().ptr();
    std::shared_ptr<std::byte> data(const_cast<std::byte*>(bytes), [owner](std::byte*) { release_array(owner); });
    return Tensor::wrap(*rule->kept, std::move(shape), std::move(data));
  }
  if (rule->decoded) {
    try {
      return decode(*rule->decoded, shape, bytes, where);
    } catch (const SheafError& e) {  // an int64 outside the i32 range
      throw py::value_error(e.what());
    }
  }
  Tensor t = Tensor::empty(DType::I32, shape);
  int32_t* dst = t.mutable_data<int32_t>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint64_t v = rule->u16 ? reinterpret_cast<const uint16_t*>(bytes)[i] : reinterpret_cast<const uint64_t*>(bytes)[i];
    if (v > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
      throw py::value_error(fmt::format("{}: uint64 value {} at element {} does not fit in i32", where, v, i));
    dst[i] = static_cast<int32_t>(v);
  }
  return t;
}

Value to_sheaf_at(py::handle obj, const std::string& where, const ModelPtr& model, int depth) {
  if (depth > kMaxDepth) throw py::value_error(fmt::format("{}: nested deeper than {} levels (a cycle?)", where, kMaxDepth));
  PyObject* p = obj.ptr();
  if (obj.is_none()) return Value::nil();
  if (PyBool_Check(p)) return Value::boolean(p == Py_True);
  if (py::isinstance<py::array>(obj)) return Value::tensor(array_to_tensor(py::reinterpret_borrow<py::array>(obj), where));
  if (PyLong_Check(p)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(p, &overflow);
    if (overflow) throw py::value_error(fmt::format("{}: int {} does not fit in 64 bits", where, py::str(obj).cast<std::string>()));
    if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
    return Value::integer(v);
  }
  if (PyFloat_Check(p)) return Value::real(static_cast<float>(PyFloat_AS_DOUBLE(p)));
  if (PyUnicode_Check(p)) return Value::string(obj.cast<std::string>());
  if (PyDict_Check(p)) {
    std::vector<std::pair<std::string, Value>> entries;
    for (auto [k, v] : py::reinterpret_borrow<py::dict>(obj)) {
      if (!PyUnicode_Check(k.ptr()))
        unsupported(where, fmt::format("dict key {} ({}) is not a str", py::repr(k).cast<std::string>(), type_name(k)));
      std::string key = k.cast<std::string>();
      std::string at = fmt::format("{}['{}']", where, key);
      entries.emplace_back(std::move(key), to_sheaf_at(v, at, model, depth + 1));
    }
    return make_dict(std::move(entries));
  }
  if (PyList_Check(p) || PyTuple_Check(p)) {
    bool tuple = PyTuple_Check(p);
    py::sequence seq = py::reinterpret_borrow<py::sequence>(obj);
    std::vector<Value> items;
    items.reserve(seq.size());
    for (size_t i = 0; i < seq.size(); ++i) items.push_back(to_sheaf_at(seq[i], fmt::format("{}[{}]", where, i), model, depth + 1));
    return tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items), ListKind::Bracket);
  }
  if (py::isinstance<Function>(obj) || py::isinstance<OpaqueValue>(obj)) {
    bool fn = py::isinstance<Function>(obj);
    const ModelPtr& owner = fn ? obj.cast<const Function&>().model : obj.cast<const OpaqueValue&>().model;
    if (owner != model)
      unsupported(where, fmt::format("a {} of another model ('{}') cannot be passed", fn ? "function" : "value", owner->path));
    return fn ? obj.cast<const Function&>().fn : obj.cast<const OpaqueValue&>().value;
  }
  // numpy scalars (np.float32(1.5), np.int64(3), np.bool_(True)) and objects that convert to an
  // array (__array__, __array_interface__: JAX, PyTorch on the CPU) go through numpy.asarray.
  if (py::isinstance(obj, numpy().attr("generic")) || py::hasattr(obj, "__array__") || py::hasattr(obj, "__array_interface__"))
    return Value::tensor(array_to_tensor(numpy().attr("asarray")(obj).cast<py::array>(), where));
  unsupported(where, fmt::format("unsupported Python type '{}' (sheaf takes numpy arrays, int, float, bool, None, str, "
                                 "and dict, list, tuple of them)",
                                 type_name(obj)));
}

py::object str_out(const std::string& s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(o);
}

py::object tensor_to_python(const Tensor& t) {
  if (t.is_symbolic()) throw std::logic_error("a traced tensor reached Python");
  static const char* const kNames[] = {"float32", "float16", "float32", "int32", "uint32", "bool"};  // DType order
  const char* name = kNames[static_cast<int>(t.dtype())];
  if (t.rank() == 0) {  // a numpy scalar of the dtype, as numpy's own reductions return
    double x = t.get(0);
    py::object v = is_float(t.dtype()) ? py::object(py::float_(x))
                   : t.dtype() == DType::Bool ? py::object(py::bool_(x != 0))
                                              : py::object(py::int_(static_cast<int64_t>(x)));
    return numpy().attr(name == std::string("bool") ? "bool_" : name)(v);
  }
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  py::array a;
  if (t.dtype() == DType::BF16) {  // numpy has no bfloat16: a float32 copy
    py::array_t<float> f(shape);
    float* dst = f.mutable_data();
    const auto* src = t.data<uint16_t>();
    for (int64_t i = 0; i < t.numel(); ++i) dst[i] = bf16_to_float(src[i]);
    a = f;
  } else if (t.numel() == 0) {
    a = py::array(py::dtype(name), shape);
  } else {  // no copy: the capsule owns a reference to the tensor's storage
    py::capsule owner(new Tensor(t), [](void* p) { delete static_cast<Tensor*>(p); });
    a = py::array(py::dtype(name), shape, const_cast<std::byte*>(t.bytes()), owner);
  }
  // Tensors are immutable and may be shared (a global, the JIT's recycled buffers): read-only.
  py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return a;
}

py::object to_python_at(const Value& v, const ModelPtr& model, int depth) {
  if (depth > kMaxDepth) throw py::value_error(fmt::format("result nested deeper than {} levels", kMaxDepth));
  switch (v.kind()) {
    case Kind::Nil: return py::none();
    case Kind::Bool: return py::bool_(v.as_bool());
    case Kind::Int: return py::int_(v.as_int());
    case Kind::Float: return py::float_(static_cast<double>(v.as_float()));
    case Kind::Str:
    case Kind::Keyword:
    case Kind::Symbol: return str_out(v.as_str());
    case Kind::Tensor: return tensor_to_python(v.as_tensor());
    case Kind::List: {
      const ListObj& l = v.as_list();
      if (l.kind == ListKind::Tuple) {
        py::tuple t(l.items.size());
        for (size_t i = 0; i < l.items.size(); ++i) t[i] = to_python_at(l.items[i], model, depth + 1);
        return t;
      }
      py::list out(l.items.size());
      for (size_t i = 0; i < l.items.size(); ++i) out[i] = to_python_at(l.items[i], model, depth + 1);
      return out;
    }
    case Kind::Dict: {
      py::dict d;
      for (const auto& [k, x] : v.as_dict().entries) d[str_out(k)] = to_python_at(x, model, depth + 1);
      return d;
    }
    case Kind::Fn:
    case Kind::Builtin: {
      std::string name = v.is(Kind::Fn) ? v.as<FnObj>().name : std::string(v.as<BuiltinObj>().def->name);
      return py::cast(Function{model, v, name.empty() ? "<lambda>" : name});
    }
    case Kind::Slice: {
      const SliceObj& s = v.as_slice();
      return py::reinterpret_steal<py::object>(
          PySlice_New(py::int_(s.start).ptr(), s.end ? py::int_(*s.end).ptr() : Py_None, Py_None));
    }
    default:  // data handles: kept as they are, usable as arguments
      return py::cast(OpaqueValue{model, v});
  }
}

}  // namespace

Value to_sheaf(py::handle obj, const std::string& where, const ModelPtr& model) { return to_sheaf_at(obj, where, model, 0); }

py::object to_python(const Value& v, const ModelPtr& model) { return to_python_at(v, model, 0); }

}  // namespace sheaf::python
