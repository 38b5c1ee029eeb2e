// backend/cuda/pack_launches.cpp — packs small independent kernel launches into one (see
// pack_launches.hpp).
//
// A launch of a few blocks (the bf16 cast of a bias, the optimizer update of a bias or a gain,
// the finish of a column sum) leaves most of the GPU idle for its whole launch and drain; a
// training step has hundreds of them. Each such launch moves up into the most recent group
// opened before it when nothing in between (nor in the group) writes what it reads, or reads or
// writes what it writes — the buffer slots of the memory plan, so reused arena memory counts —
// and no host step lies in between; else it opens a new group. A group of two or more becomes
// one launch at the first member's place: a kernel whose blocks run the members' code one after
// another (block b of member i is block b − Σ earlier grids), each member's kernel called as a
// device function (not inlined) of its block index, block size and grid. The members are sorted
// into runs of one kernel, grid and block (a model's per-head optimizer updates: dozens of launches
// of one kernel), and a run is one call site whose member is the block index over the grid; the
// pointers are one array parameter, indexed by it. So the packed kernel's code, and NVRTC's time,
// grows with its runs, not its members.
// Packable: a kernel launch of at most PackOptions::max_grid blocks of at most max_block
// threads whose parameters are all pointers and whose kernel neither synchronises nor declares
// __shared__ memory (a member with fewer threads than the group skips the extra ones, which a
// barrier would wait for), and shuffles values between a warp's lanes only with whole warps (its
// block a multiple of 32: the warps it skips are skipped whole) — a column sum's finish.
// Slots read and written: a kernel's `const T*` parameters are read, its other parameters read
// and written (in place); a product reads its operands and writes its result, a copy reads its
// source and writes its destination, a fill writes. Two slots meet when their memory may: arena
// slots whose byte ranges overlap (the plan reuses arena memory), the same slot, or a parameter
// and the result a loop body may update in its buffer (fusion::updates_in_place).
#include "backend/cuda/pack_launches.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include "base/error.hpp"
#include "tensor/dtype.hpp"

namespace sheaf::cuda {
namespace {

// A kernel of the source: where its text lies, its parameters and whether it may be packed.
struct KernelText {
  size_t begin = 0, params = 0;  // "extern", its parameter list
  size_t body = 0, end = 0;      // the "{" opening its body, one past its closing "}\n"
  std::vector<std::string> types;  // each parameter's type ("const float*")
  bool barriers = false;           // __syncthreads or __shared__ memory
  bool shuffles = false;           // exchanges values between a warp's lanes (sh_shfl_xor)
};

KernelText find_kernel(const std::string& source, const std::string& name) {
  KernelText k;
  const std::string head = "extern \"C\" __global__ void __launch_bounds__(";
  for (size_t at = source.find(head); at != std::string::npos; at = source.find(head, at + 1)) {
    const size_t close = source.find(") ", at + head.size());
    if (source.compare(close + 2, name.size() + 1, name + "(") != 0) continue;
    k.begin = at, k.params = close + 2 + name.size() + 1;
    const size_t params_end = source.find(") {", k.params);
    k.body = params_end + 2, k.end = source.find("\n}\n", k.body) + 3;
    std::string_view list(source.data() + k.params, params_end - k.params);
    while (!list.empty()) {
      const size_t comma = list.find(", ");
      constexpr std::string_view restrict_ = " __restrict__";  // absent from buffers that phases share (render.cpp)
      const std::string_view p = list.substr(0, comma), type = p.substr(0, p.rfind(' '));  // "const float* __restrict__ p3"
      k.types.emplace_back(type.ends_with(restrict_) ? type.substr(0, type.size() - restrict_.size()) : type);
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 2);
    }
    const std::string_view text(source.data() + k.begin, k.end - k.begin);
    k.barriers = text.find("__syncthreads") != std::string_view::npos || text.find("__shared__") != std::string_view::npos;
    k.shuffles = text.find("sh_shfl_xor") != std::string_view::npos;
    return k;
  }
  throw SheafError(fmt::format("internal: kernel {} is not in its rendering", name));
}

// Slots a launch reads and writes; a host step is a barrier (`barrier`).
struct Access {
  std::set<int32_t> reads, writes;
  bool barrier = false;
};

Access access_of(const Launch& l, const KernelText* k, const Kernels& all) {
  Access a;
  switch (l.kind) {
    case Launch::Kind::Kernel:
      for (size_t j = 0; j < l.slots.size(); ++j) {
        a.reads.insert(l.slots[j]);
        if (!k->types[j].starts_with("const ")) a.writes.insert(l.slots[j]);
      }
      break;
    case Launch::Kind::Dot:
      a.reads = {l.slots[0], l.slots[1]}, a.writes = {l.slots[2]};
      if (l.slots.size() > 3) (l.sums_rows ? a.writes : a.reads).insert(l.slots[3]);  // row sums, or the bias row
      break;
    case Launch::Kind::Copy: a.reads = {l.slots[0]}, a.writes = {l.slots[1]}; break;
    case Launch::Kind::Fill: a.writes = {l.slots[0]}; break;
    case Launch::Kind::Host: a.barrier = true; break;
    case Launch::Kind::Sdpa: {
      const Sdpa& p = all.sdpa[static_cast<size_t>(l.sdpa)];
      if (l.backward)
        a.reads = {p.q.slot, p.k.slot, p.v.slot, p.o.slot, p.stats.slot, p.d_o.slot}, a.writes = {p.dq.slot, p.dk.slot, p.dv_.slot};
      else
        a.reads = {p.q.slot, p.k.slot, p.v.slot}, a.writes = {p.o.slot, p.stats.slot};
      a.writes.erase(-1);
      break;
    }
  }
  return a;
}

// The memory of a slot: bytes [lo, hi) of the arena, or a buffer of its own (`id`: the slot, or
// the parameter slot whose buffer it may share).
struct Region {
  bool arena = false;
  int64_t lo = 0, hi = 0;
  int32_t id = 0;
  bool overlaps(const Region& r) const { return arena == r.arena && (arena ? lo < r.hi && r.lo < hi : id == r.id); }
};

std::vector<Region> slot_regions(const ir::Graph& g, const fusion::Schedule& s, const fusion::MemoryPlan& m) {
  std::vector<Region> r(static_cast<size_t>(m.slots) + 1);
  for (size_t i = 0; i < r.size(); ++i) r[i].id = static_cast<int32_t>(i);
  for (size_t v = 0; v < m.slot.size(); ++v) {
    if (m.slot[v] < 0 || m.arena_offset[v] < 0) continue;
    const ir::Type& t = g.type(static_cast<int32_t>(v));
    const int64_t lo = m.arena_offset[v], hi = lo + shape_numel(t.shape) * static_cast<int64_t>(dtype_size(t.dtype));
    Region& x = r[static_cast<size_t>(m.slot[v])];
    x = x.arena ? Region{true, std::min(x.lo, lo), std::max(x.hi, hi), x.id} : Region{true, lo, hi, x.id};
  }
  const std::vector<bool> in_place = fusion::updates_in_place(g, s);
  for (size_t k = 0; k < in_place.size(); ++k)
    if (in_place[k]) r[static_cast<size_t>(m.slot[g.results[k]])].id = m.slot[g.params[k]];
  return r;
}

bool meets(const std::set<int32_t>& a, const std::set<int32_t>& b, const std::vector<Region>& regions) {
  for (int32_t x : a)
    for (int32_t y : b)
      if (regions[static_cast<size_t>(x)].overlaps(regions[static_cast<size_t>(y)])) return true;
  return false;
}

// Launches that may run as one, at the place of the first, and what the launches between them
// and the group (outside it) touch.
struct Group {
  std::vector<size_t> members;
  Access between;  // of the launches after the first member that are not members
  Access inside;   // of the members
  size_t params = 0;
};

// Whether `a` (a later launch) may move up into group `g`.
bool may_join(const Group& g, const Access& a, size_t params, const PackOptions& o, const std::vector<Region>& r) {
  if (g.params + params > o.max_params) return false;
  for (const Access* b : {&g.between, &g.inside})
    if (meets(a.writes, b->reads, r) || meets(a.writes, b->writes, r) || meets(a.reads, b->writes, r)) return false;
  return true;
}

void add(Access& to, const Access& a) {
  to.reads.insert(a.reads.begin(), a.reads.end());
  to.writes.insert(a.writes.begin(), a.writes.end());
}

class Packer {
 public:
  Packer(Kernels& k, std::vector<Region> regions, const PackOptions& o) : k_(k), regions_(std::move(regions)), o_(o) {}

  void run() {
    std::vector<Group> groups;
    bool open = false;
    for (size_t i = 0; i < k_.launches.size(); ++i) {
      const Launch& l = k_.launches[i];
      const KernelText* text = l.kind == Launch::Kind::Kernel ? &kernel(l.kernel) : nullptr;
      const Access a = access_of(l, text, k_);
      const bool packable = text && !text->barriers && (!text->shuffles || l.block % 32 == 0) && l.grid <= o_.max_grid &&
                            l.block <= o_.max_block && l.grid > 0 &&
                            std::all_of(text->types.begin(), text->types.end(), [](const std::string& t) { return t.ends_with('*'); });
      if (a.barrier) open = false;
      if (packable && !(open && may_join(groups.back(), a, l.slots.size(), o_, regions_))) {
        groups.emplace_back();
        open = true;
      }
      if (packable) {
        Group& g = groups.back();
        g.members.push_back(i), add(g.inside, a), g.params += l.slots.size();
      } else if (open) {
        add(groups.back().between, a);
      }
    }
    std::vector<Launch> out;
    std::map<size_t, const Group*> first;  // a group's first member → the group
    std::vector<bool> packed(k_.launches.size());
    for (const Group& g : groups) {
      if (g.members.size() < 2) continue;
      first[g.members[0]] = &g;
      for (size_t i : g.members) packed[i] = true;
    }
    for (size_t i = 0; i < k_.launches.size(); ++i) {
      if (auto g = first.find(i); g != first.end()) out.push_back(pack(*g->second));
      else if (!packed[i]) out.push_back(k_.launches[i]);
    }
    k_.launches = std::move(out);
    // Kernels now run only inside packed ones are device functions only: their own text goes,
    // from the last (the offsets of earlier ones stay).
    std::vector<const KernelText*> unused;
    for (const std::string& name : device_functions_)
      if (std::none_of(k_.launches.begin(), k_.launches.end(), [&](const Launch& l) { return l.kernel == name; }))
        unused.push_back(&texts_.at(name));
    std::sort(unused.begin(), unused.end(), [](const KernelText* a, const KernelText* b) { return a->begin > b->begin; });
    for (const KernelText* t : unused) k_.source.erase(t->begin, t->end - t->begin);
  }

 private:
  Kernels& k_;
  const std::vector<Region> regions_;  // per slot
  const PackOptions& o_;
  std::map<std::string, KernelText> texts_;
  std::set<std::string> device_functions_;    // members' kernels emitted as device functions
  std::map<std::string, std::string> packed_;  // a packed kernel's text without its name → its name
  bool declared_params_ = false;               // sh_params is in the source

  const KernelText& kernel(const std::string& name) {
    auto it = texts_.find(name);
    if (it == texts_.end()) it = texts_.emplace(name, find_kernel(k_.source, name)).first;
    return it->second;
  }

  // Kernel `name` as `static __noinline__ void {name}_b(block index, block size, grid, its
  // parameters)`: its code once, however many packed kernels call it.
  void device_function(const std::string& name) {
    if (!device_functions_.insert(name).second) return;
    const KernelText& t = kernel(name);
    std::string body = k_.source.substr(t.body, t.end - t.body);
    for (auto [from, to] : {std::pair{"blockIdx.x", "sh_bx"}, {"blockDim.x", "sh_bdim"}, {"gridDim.x", "sh_gdim"}})
      for (size_t at = 0; (at = body.find(from, at)) != std::string::npos;) body.replace(at, std::string_view(from).size(), to);
    k_.source += fmt::format("static __noinline__ void {}_b(const unsigned sh_bx, const unsigned sh_bdim, const unsigned sh_gdim, {}) {}", name,
                             k_.source.substr(t.params, t.body - 2 - t.params), body);
  }

  // The group as one launch. Its members are independent (may_join), so they run in any order:
  // sorted into runs of one kernel, grid and block, each run is one call site that finds its member
  // from the block index. The parameters are one array (`sh_params`: every slot's pointer, the
  // members' in run order), read where the launch put them (__grid_constant__: not copied).
  Launch pack(const Group& g) {
    Launch p = k_.launches[g.members[0]];
    p.grid = 0, p.block = 0, p.scratch = 0, p.block_reduce = false, p.packs = static_cast<int64_t>(g.members.size()), p.slots.clear(), p.arg_offsets.clear();
    std::vector<size_t> members = g.members;
    const auto run_key = [&](size_t i) { return std::tie(k_.launches[i].kernel, k_.launches[i].grid, k_.launches[i].block); };
    std::stable_sort(members.begin(), members.end(), [&](size_t a, size_t b) { return run_key(a) < run_key(b); });
    std::string calls;
    for (size_t r = 0, end = 0; r < members.size(); r = end) {
      const Launch& l = k_.launches[members[r]];
      for (end = r; end < members.size() && run_key(members[end]) == run_key(members[r]); ++end) {
        const Launch& m = k_.launches[members[end]];
        p.arg_offsets.resize(p.slots.size());
        for (size_t j = 0; j < m.slots.size(); ++j) p.arg_offsets.push_back(arg_offset(m, j));
        p.slots.insert(p.slots.end(), m.slots.begin(), m.slots.end());
        p.block = std::max(p.block, m.block), p.scratch = std::max(p.scratch, m.scratch);
        p.block_reduce = p.block_reduce || m.block_reduce;  // a member's threads cooperate: the block's do
      }
      device_function(l.kernel);
      const KernelText& t = kernel(l.kernel);
      const size_t first = p.slots.size() - (end - r) * l.slots.size();
      std::string args;
      for (size_t j = 0; j < l.slots.size(); ++j) args += fmt::format(", ({})q[{}]", t.types[j], j);
      const int64_t blocks = static_cast<int64_t>(end - r) * l.grid;
      calls += fmt::format(
          "  if (b < {0}) {{\n    const unsigned i = b / {1};\n    void* const* q = a.p + {2} + i * {3};\n"
          "    if (threadIdx.x < {4}) {5}_b(b - i * {1}, {4}, {1}{6});\n    return;\n  }}\n  b -= {0};\n",
          blocks, l.grid, first, l.slots.size(), l.block, l.kernel, args);
      p.grid += blocks;
    }
    if (std::all_of(p.arg_offsets.begin(), p.arg_offsets.end(), [](int64_t o) { return o == 0; })) p.arg_offsets.clear();
    if (!declared_params_) k_.source += "template <unsigned N> struct sh_params { void* p[N]; };\n", declared_params_ = true;
    const std::string name = fmt::format("s{}p", p.step);
    const std::string body = fmt::format("(const __grid_constant__ sh_params<{}> a) {{\n  unsigned b = blockIdx.x;\n{}}}\n", p.slots.size(), calls);
    auto [it, fresh] = packed_.try_emplace(fmt::format("{}|{}", p.block, body), name);
    if (fresh) k_.source += fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}{}", p.block, name, body);
    p.kernel = it->second;
    return p;
  }
};

}  // namespace

void pack_launches(Kernels& k, const ir::Graph& g, const fusion::Schedule& s, const fusion::MemoryPlan& m, const PackOptions& o) {
  if (o.max_grid > 0) Packer(k, slot_regions(g, s, m), o).run();
}

}  // namespace sheaf::cuda
