// backend/memory.hpp — buffer planning for a fused schedule.
// Every value with a buffer gets a slot in the pointer table handed to the generated code.
// Intermediate buffers written by Loop/Copy/Dot steps live in one arena per executable: a
// buffer is placed when its step runs and its bytes are reused once the last step reading it
// (directly or through a view) has run — the last of a run of row phases (fusion.hpp), which a
// GPU may run as one kernel — (first fit over freed blocks, 64-byte aligned). Graph
// results get fresh tensors per call; Host step outputs stay the tensors the host kernels made.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/fusion.hpp"

namespace sheaf::fusion {

struct MemoryPlan {
  std::vector<int32_t> slot;          // value → pointer-table slot (-1: no buffer)
  int32_t slots = 0;
  std::vector<int64_t> arena_offset;  // value → byte offset in the arena (-1: not in the arena)
  int64_t arena_bytes = 0;
  int64_t buffer_bytes = 0;           // Σ sizes of the arena buffers (what no reuse would need)
};

// Steps that read value memory: the buffers each step reads (through views), in step order.
std::vector<std::vector<int32_t>> buffers_read(const ir::Graph& g, const fusion::Schedule& s);

MemoryPlan plan_memory(const ir::Graph& g, const fusion::Schedule& s);

// Per result position k of a loop body `g` (scheduled as `s`): whether result k is an Update of
// parameter k that may run in place, so that the loop keeps carried value k in one buffer (the
// body's parameter k and result k are then the same memory): the update reads parameter k only
// as the operand it copies, no later step reads parameter k, and neither the parameter nor the
// result is another result of the body. Any graph may be asked (pack_launches.cpp): results past
// its parameters are false.
std::vector<bool> updates_in_place(const ir::Graph& g, const fusion::Schedule& s);

}  // namespace sheaf::fusion
