// python/convert.hpp — values between Python and Sheaf (table in docs/python.md).
// In: numpy arrays become tensors (kept dtypes f32 f16 i32 u32 bool without a copy when the
// array is C-contiguous, aligned and native-endian; f64 → f32, int64 → i32 and the narrow
// integer types → i32 with a copy, as the file loaders of SPEC §7 do), dicts with str keys →
// dicts, lists → bracket lists, tuples → tuples, int/float/bool/None/str → int/float/bool/nil/
// string. Out: tensors → read-only numpy arrays over the tensor's bytes (bf16 → float32 copy;
// rank 0 → numpy scalars), dicts → dicts, lists → lists, tuples → tuples, functions → callables.
// Both directions run with the GIL held, on the caller's thread.
#pragma once
#include <pybind11/pybind11.h>

#include <string>

#include "model.hpp"

namespace sheaf::python {

// `where` names the value in errors ("argument 2"); unsupported Python types raise TypeError,
// values out of range ValueError. Function and Value objects of another model are refused.
Value to_sheaf(pybind11::handle obj, const std::string& where, const ModelPtr& model);

pybind11::object to_python(const Value& v, const ModelPtr& model);

}  // namespace sheaf::python
