// backend/cuda/sdpa.cpp — an attention chain's steps as the problem of a fused SDPA library
// (sdpa.hpp): the prologue as a scale and a causal flag, the batch dims merged into (batch, head),
// each tensor's slot, offset and strides.
#include "backend/cuda/sdpa.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace sheaf::cuda {
namespace {

using fusion::AttentionLayout;

constexpr int64_t kMaxHead = 128;     // cuDNN's fused SDPA (forward and backward) on sm_80+
constexpr double kMaskedFill = -1e4;  // exp(fill − max) is 0 in f32 for every row max above fill + 104

// A tensor's rows (t or s), batch strides (one per chain batch dim), row stride and column stride,
// then where.
struct Strided {
  SdpaTensor* into;
  int64_t rows;
  std::vector<int64_t> batch;
  int64_t rs = 0, cs = 1;
};

// The prologue's scale and causal flag: roundings, positive products and quotients by constants,
// at most one mask, causal with a fill ≤ kMaskedFill (or an additive causal bias).
bool read_prologue(const AttentionLayout& a, Sdpa& p) {
  double scale = 1;
  bool masked = false;
  for (const fusion::ScoreOp& op : a.prologue) {
    switch (op.kind) {
      case fusion::ScoreOp::Kind::Round: break;
      case fusion::ScoreOp::Kind::Mul: scale *= op.c; break;
      case fusion::ScoreOp::Kind::Div: scale /= op.c; break;
      case fusion::ScoreOp::Kind::Mask:
        if (masked || !a.causal || (!op.additive && op.c > kMaskedFill)) return false;
        masked = true;
        break;
    }
  }
  if (!(scale > 0) || (a.mask >= 0 && !masked)) return false;
  p.scale = static_cast<float>(scale);
  p.causal = masked;
  return true;
}

// Merges the chain's batch dims `extents` into (batch, head) for every tensor in `ts`: dims of one
// element dropped, then neighbours i, i + 1 merged while every tensor has stride_i =
// stride_{i+1} · extent_{i+1}; false when more than two remain.
bool merge_batch(std::vector<int64_t> extents, std::vector<Strided>& ts, Sdpa& p) {
  for (size_t i = extents.size(); i-- > 0;)
    if (extents[i] == 1) {
      extents.erase(extents.begin() + static_cast<std::ptrdiff_t>(i));
      for (Strided& x : ts) x.batch.erase(x.batch.begin() + static_cast<std::ptrdiff_t>(i));
    }
  while (extents.size() > 2) {
    size_t i = 0;
    auto mergeable = [&](size_t j) {
      return std::all_of(ts.begin(), ts.end(), [&](const Strided& x) { return x.batch[j] == x.batch[j + 1] * extents[j + 1]; });
    };
    while (i + 1 < extents.size() && !mergeable(i)) ++i;
    if (i + 1 >= extents.size()) return false;
    extents[i] *= extents[i + 1];
    extents.erase(extents.begin() + static_cast<std::ptrdiff_t>(i + 1));
    for (Strided& x : ts) x.batch.erase(x.batch.begin() + static_cast<std::ptrdiff_t>(i));
  }
  p.b = extents.empty() ? 1 : extents[0];
  p.h = extents.size() < 2 ? 1 : extents[1];
  for (Strided& x : ts) {
    const int64_t inner = x.rs * x.rows;  // the stride of a merged-away dim of one element
    const int64_t bs = x.batch.empty() ? p.h * inner : x.batch[0], hs = x.batch.size() < 2 ? inner : x.batch[1];
    x.into->strides = {bs, hs, x.rs, x.cs};
  }
  return true;
}

}  // namespace

double Sdpa::flops(bool backward) const {
  const double pairs = static_cast<double>(b * h) * static_cast<double>(t) * static_cast<double>(s) * (causal ? 0.5 : 1.0);
  return pairs * 2.0 * (backward ? 3.0 * static_cast<double>(d) + 2.0 * static_cast<double>(dv) : static_cast<double>(d + dv));
}

bool same_plan(Sdpa x, Sdpa y) {
  for (Sdpa* p : {&x, &y})
    for (SdpaTensor* t : {&p->q, &p->k, &p->v, &p->o, &p->stats, &p->d_o, &p->dq, &p->dk, &p->dv_}) t->slot = -1, t->offset = 0;
  return x == y;
}

std::string sdpa_key(const Sdpa& a) {
  std::string k = fmt::format("{} b{} h{} t{} s{} d{}/{} scale {} {}{}", dtype_name(a.dtype), a.b, a.h, a.t, a.s, a.d, a.dv,
                              a.scale, a.causal ? "causal" : "full", a.grad ? " grad" : "");
  auto add = [&](const char* name, const SdpaTensor& x) { k += fmt::format(" {} {}", name, fmt::join(x.strides, ",")); };
  add("q", a.q), add("k", a.k), add("v", a.v), add("o", a.o), add("stats", a.stats);
  if (a.grad) add("do", a.d_o), add("dq", a.dq), add("dk", a.dk), add("dv", a.dv_);
  return k;
}

std::optional<Sdpa> sdpa_problem(const ir::Graph& g, const fusion::Schedule& s, const fusion::MemoryPlan& m, size_t fwd,
                                 int64_t grad) {
  const AttentionLayout& a = s.steps[fwd].attention;
  const AttentionLayout* ga = grad < 0 ? nullptr : &s.steps[static_cast<size_t>(grad)].attention;
  Sdpa p{.dtype = g.type(a.q).dtype, .t = a.t, .s = a.s, .d = a.d, .dv = a.dv, .grad = ga != nullptr};
  auto head = [](int64_t x) { return x > 0 && x % 8 == 0 && x <= kMaxHead; };
  if (!is_half(p.dtype) || !head(a.d) || !head(a.dv) || !read_prologue(a, p)) return std::nullopt;
  for (const AttentionLayout::Bias* b : {&a.bias_q, &a.bias_k, &a.bias_v})
    if (b->value >= 0) return std::nullopt;
  if (ga && ga->row_max != a.row_max) return std::nullopt;

  // Where step `st` reads value v: its slot and offset.
  auto at = [&](int32_t v, size_t st, SdpaTensor& x) {
    const fusion::View& w = fusion::read_view(s, v, static_cast<int32_t>(st));
    x.slot = m.slot[static_cast<size_t>(w.buffer)], x.offset = w.offset;
  };
  auto out_at = [&](const AttentionLayout::Out& o, SdpaTensor& x) {
    x.slot = m.slot[static_cast<size_t>(s.view[static_cast<size_t>(o.value)]->buffer)], x.offset = o.offset;
  };
  at(a.q, fwd, p.q), at(a.k, fwd, p.k), at(a.v, fwd, p.v), out_at(a.out, p.o);
  std::vector<Strided> ts{{&p.q, a.t, a.batch_q, a.q_rs}, {&p.k, a.s, a.batch_k, a.k_rs}, {&p.v, a.s, a.batch_v, a.v_rs},
                          {&p.o, a.t, a.out.batch, a.out.rs, a.out.cs}};
  if (ga) {
    // The backward reads q, k, v and o where the forward did, and the forward's stats.
    SdpaTensor q, k, v;
    at(a.q, static_cast<size_t>(grad), q), at(a.k, static_cast<size_t>(grad), k), at(a.v, static_cast<size_t>(grad), v);
    if (q != p.q || k != p.k || v != p.v) return std::nullopt;
    const fusion::View& sw = *s.view[static_cast<size_t>(a.row_max)];
    p.stats.slot = m.slot[static_cast<size_t>(sw.buffer)], p.stats.offset = sw.offset;
    const size_t nb = a.batch.size();
    ts.push_back({&p.stats, a.t, std::vector<int64_t>(sw.strides.begin(), sw.strides.begin() + static_cast<std::ptrdiff_t>(nb)), sw.strides[nb]});
    at(ga->d_out, static_cast<size_t>(grad), p.d_o);
    out_at(ga->grad_q, p.dq), out_at(ga->grad_k, p.dk), out_at(ga->grad_v, p.dv_);
    ts.insert(ts.end(), {{&p.d_o, a.t, ga->batch_do, ga->do_rs},
                         {&p.dq, a.t, ga->grad_q.batch, ga->grad_q.rs, ga->grad_q.cs},
                         {&p.dk, a.s, ga->grad_k.batch, ga->grad_k.rs, ga->grad_k.cs},
                         {&p.dv_, a.s, ga->grad_v.batch, ga->grad_v.rs, ga->grad_v.cs}});
  }
  // Head columns contiguous; 16-byte aligned rows and matrices (f32 stats: contiguous rows).
  for (const Strided& x : ts) {
    if (x.into == &p.stats) {
      if (x.cs != 1 || x.rs != 1) return std::nullopt;
      continue;
    }
    if (x.cs != 1 || x.rs % 8 != 0 || x.into->offset % 8 != 0) return std::nullopt;
    for (int64_t st : x.batch)
      if (st % 8 != 0) return std::nullopt;
  }
  if (!merge_batch(a.batch, ts, p)) return std::nullopt;
  return p;
}

}  // namespace sheaf::cuda
