// ir/node_key.hpp — structural identity of a node: the key CSE, graph equality and the reverse
// sweep's value numbering compare, and a map over such keys that allocates per key only when
// it grows (NodeKeyMap).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/ir.hpp"

namespace sheaf::ir {

// Byte string identifying node `n` of `g` read with operands `in`: equal keys ⇔ equal op,
// operands, result types and attributes (floats compared by bits). Constants are keyed by
// their bytes up to kConstantKeyBytes, larger ones by storage identity; regions (while, case)
// by the identity of their graphs. Locations are ignored.
inline constexpr size_t kConstantKeyBytes = 4096;
std::string node_key(const Graph& g, const Node& n, std::span<const int32_t> in);
// The same key written into `key` (cleared first), reusing its storage.
void write_node_key(std::string& key, const Graph& g, const Node& n, std::span<const int32_t> in);

// Node keys → int32 values (a first result id, a node index). The keys lie end to end in one
// buffer and an open-addressing table holds their hashes and offsets, so a lookup builds its key
// in a reused buffer and allocates nothing; a graph of 10^5 nodes costs a few buffer growths,
// not 10^5 strings.
class NodeKeyMap {
 public:
  // The value stored under the key of (g, n, in), or nullptr. The key is kept as the pending one.
  const int32_t* find(const Graph& g, const Node& n, std::span<const int32_t> in);
  // Stores `value` (≥ 0) under the pending key (the last find's, which must have found nothing).
  void insert_pending(int32_t value);

 private:
  struct Slot {
    uint64_t hash = 0;
    size_t offset = 0, size = 0;
    int32_t value = -1;  // -1: empty
  };
  std::string_view stored(const Slot& s) const { return std::string_view(keys_).substr(s.offset, s.size); }
  size_t probe(uint64_t hash, std::string_view key) const;  // the slot holding key, or the empty one to take
  void grow();

  std::string pending_, keys_;
  uint64_t pending_hash_ = 0;
  std::vector<Slot> slots_;
  size_t used_ = 0;
};

}  // namespace sheaf::ir
