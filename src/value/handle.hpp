// value/handle.hpp — lazy, file-backed views of tensors (SPEC §7.3), seen by the evaluator
// through this interface: `(h i)`, `(h 100:200)`, `(get h key)`, `(len h)`, `(keys h)`, and
// materialisation where a pytree is needed. Concrete handles live in src/io.
#pragma once
#include <string>
#include <vector>

#include "value/value.hpp"

namespace sheaf {

struct HandleObj : Obj {
  // "<handle npy f32[60000x784]>", "<handle safetensors 12 tensors>"
  virtual std::string describe() const = 0;
  // Rows along axis 0 (number of tensors for safetensors).
  virtual int64_t length() const = 0;
  // Reads by row index (int or rank-0 tensor), slice value (A:B), index tensor/list, or name.
  // Missing names give nil; bad indices are errors.
  virtual Value read(const Value& key, SrcLoc loc) const = 0;
  // Top-level names (safetensors); empty for row-indexed handles.
  virtual std::vector<std::string> keys() const { return {}; }
  // The whole content as an ordinary value (a tensor, or a nested dict of tensors).
  virtual Value materialize(SrcLoc loc) const = 0;
};

}  // namespace sheaf
