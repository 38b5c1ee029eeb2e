// backend/memory.cpp — slots and arena offsets (see memory.hpp).
#include "backend/memory.hpp"

#include <algorithm>
#include <map>

namespace sheaf::fusion {

std::vector<std::vector<int32_t>> buffers_read(const ir::Graph& g, const fusion::Schedule& s) {
  std::vector<std::vector<int32_t>> reads(s.steps.size());
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const fusion::Step& st = s.steps[i];
    auto read = [&](int32_t v) {
      if (fusion::computes(s, v, static_cast<int32_t>(i))) return;  // computed in this loop
      reads[i].push_back(fusion::read_view(s, v, static_cast<int32_t>(i)).buffer);
    };
    if (st.kind == StepKind::Copy) {
      reads[i].push_back(st.source.buffer);
      if (st.into) reads[i].push_back(st.into->buffer);  // kept until every copy into it has run
      continue;
    }
    if (st.kind == StepKind::Attention || st.kind == StepKind::AttentionGrad) {
      for (int32_t v : fusion::attention_reads(st.attention, st.kind == StepKind::AttentionGrad)) read(v);
      continue;
    }
    for (int32_t n : st.nodes)
      for (int32_t u : g.nodes[static_cast<size_t>(n)].in) read(u);
    if (st.kind == StepKind::Dot && st.dot.act == fusion::DotLayout::Act::GeluGrad) read(st.dot.aux);
  }
  return reads;
}

namespace {

// First-fit placement over freed blocks; the arena grows at the top when none fits.
class Arena {
 public:
  int64_t place(int64_t bytes) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < bytes) continue;
      int64_t at = it->first, left = it->second - bytes;
      free_.erase(it);
      if (left > 0) free_[at + bytes] = left;
      return at;
    }
    int64_t at = top_;
    top_ += bytes;
    return at;
  }
  void release(int64_t at, int64_t bytes) {
    auto it = free_.emplace(at, bytes).first;
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_.erase(it);
      }
    }
  }
  int64_t size() const { return top_; }

 private:
  std::map<int64_t, int64_t> free_;  // offset → bytes
  int64_t top_ = 0;
};

int64_t aligned_bytes(const ir::Type& t) {
  int64_t bytes = shape_numel(t.shape) * static_cast<int64_t>(dtype_size(t.dtype));
  return (std::max<int64_t>(bytes, 1) + 63) / 64 * 64;
}

}  // namespace

MemoryPlan plan_memory(const ir::Graph& g, const fusion::Schedule& s) {
  MemoryPlan p;
  const size_t nv = g.types.size();
  p.slot.assign(nv, -1);
  p.arena_offset.assign(nv, -1);
  for (size_t v = 0; v < nv; ++v)
    if (s.has_buffer[v]) p.slot[v] = p.slots++;

  std::vector<bool> result(nv, false);
  for (int32_t r : g.results) result[static_cast<size_t>(r)] = true;
  auto in_arena = [&](int32_t v) {
    int32_t st = s.step_of[v];
    return s.has_buffer[v] && st >= 0 && s.steps[static_cast<size_t>(st)].kind != StepKind::Host && !result[v];
  };

  std::vector<std::vector<int32_t>> reads = buffers_read(g, s);
  // A run of row phases (fusion.hpp) may be one kernel: what any of its steps touches lives to its end.
  std::vector<int32_t> end(s.steps.size());
  for (size_t i = s.steps.size(); i-- > 0;)
    end[i] = i + 1 < s.steps.size() && s.steps[i + 1].row_phase ? end[i + 1] : static_cast<int32_t>(i);
  std::vector<int32_t> last(nv, -1);
  for (size_t i = 0; i < reads.size(); ++i)
    for (int32_t b : reads[i]) last[b] = end[i];

  Arena arena;
  std::vector<std::vector<int32_t>> dies(s.steps.size());
  for (size_t i = 0; i < s.steps.size(); ++i) {
    for (int32_t v : s.steps[i].outputs) {
      if (!in_arena(v)) continue;
      int64_t bytes = aligned_bytes(g.type(v));
      p.arena_offset[v] = arena.place(bytes);
      p.buffer_bytes += bytes;
      dies[static_cast<size_t>(std::max(last[v], end[i]))].push_back(v);
    }
    for (int32_t v : dies[i]) arena.release(p.arena_offset[v], aligned_bytes(g.type(v)));
  }
  p.arena_bytes = arena.size();
  return p;
}

std::vector<bool> updates_in_place(const ir::Graph& g, const fusion::Schedule& s) {
  const std::vector<std::vector<int32_t>> reads = buffers_read(g, s);
  auto in_place = [&](size_t k) {
    const int32_t p = g.params[k], r = g.results[k], st = s.step_of[r];
    if (st < 0 || s.steps[static_cast<size_t>(st)].kind != StepKind::Update) return false;
    const ir::Node& n = g.nodes[static_cast<size_t>(s.steps[static_cast<size_t>(st)].nodes[0])];
    const fusion::View& x = fusion::read_view(s, n.in[0], st);
    if (x.buffer != p || x.offset != 0) return false;
    for (size_t j = 1; j < n.in.size(); ++j)
      if (fusion::read_view(s, n.in[j], st).buffer == p) return false;
    for (size_t j = 0; j < g.results.size(); ++j)
      if (j != k && (g.results[j] == r || g.results[j] == p)) return false;
    for (size_t j = static_cast<size_t>(st) + 1; j < reads.size(); ++j)
      if (std::find(reads[j].begin(), reads[j].end(), p) != reads[j].end()) return false;
    return true;
  };
  std::vector<bool> out(g.results.size());
  for (size_t k = 0; k < out.size() && k < g.params.size(); ++k) out[k] = in_place(k);  // result k past the parameters: none
  return out;
}

}  // namespace sheaf::fusion
