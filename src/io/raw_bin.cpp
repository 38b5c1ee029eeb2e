// io/raw_bin.cpp — headerless little-endian 1-D data (SPEC §7.6): `tokens.bin` with a dtype flag
// (:f32 :f16 :bf16 :i32 :i16 :u32 :bool; i16 widens to i32). A glob of shards forms one virtual
// 1-D tensor. Saving writes a tensor's elements in its own dtype.
#include <fmt/format.h>

#include "base/error.hpp"
#include "io/atomic_write.hpp"
#include "io/formats.hpp"
#include "io/row_handle.hpp"

namespace sheaf {

Value load_bin(const std::vector<std::string>& paths, Elem elem) {
  std::vector<RowShard> shards;
  for (const std::string& p : paths) {
    FilePtr m = open_data_file(p);
    size_t es = elem_size(elem);
    if (m->size % es != 0)
      throw SheafError(fmt::format("'{}': size {} bytes is not a multiple of the {}-byte {} element", p, m->size, es,
                                   elem_name(elem)));
    shards.push_back({m, 0, static_cast<int64_t>(m->size / es)});
  }
  return Value::object(Kind::Handle, std::make_shared<RowHandle>("bin", elem, Shape{}, std::move(shards)));
}

void save_bin(const std::string& path, const Value& v, std::optional<Elem> elem) {
  Tensor t = tensor_to_save(v, path, "bin");
  if (elem && *elem != elem_of(t.dtype()))
    throw SheafError(fmt::format("'{}': the tensor is {} but the dtype flag is :{}; cast it first", path,
                                 dtype_name(t.dtype()), elem_name(*elem)));
  AtomicFile f(path);
  f.write(t.bytes(), t.nbytes());
  f.commit();
}

}  // namespace sheaf
