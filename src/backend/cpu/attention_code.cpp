// backend/cpu/attention_code.cpp — the CPU's Attention and AttentionGrad steps as C++ (see
// attention_code.hpp): two kernels shared by every step of a unit, and per step its prologue
// (the scores' ops, with the mask's condition), the prologue's VJP and its layout as constants.
#include "backend/cpu/attention_code.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backend/loop_code.hpp"
#include "base/error.hpp"

namespace sheaf::cpu {

using fusion::AttentionLayout;
using fusion::ScoreOp;

static_assert(fusion::kCpuAttentionMaxBatchDims == 6, "sh_attn's arrays");

// sh_attn: a step's layout (its arrays: fusion::kCpuAttentionMaxBatchDims). a[] of a step's task: rt, q, k, v, mask (or 0), out, row max, row sum
// (0 without a gradient), the probabilities (0 when not stored), then for the gradient dO, dQ,
// dK, dV — each at its view's offset; the batch strides of operand j (SH_Q..) are strides[j].
const char* const kAttentionDeclarations = R"(enum { SH_Q, SH_K, SH_V, SH_MASK, SH_OUT, SH_DO, SH_DQ, SH_DK, SH_DV, SH_OPERANDS };
struct sh_attn {
  i64 rank, sizes[6], strides[SH_OPERANDS][6];
  i64 t, s, d, dv, q_rs, q_cs, k_rs, k_cs, v_rs, v_cs, o_rs, o_cs, do_rs, do_cs, dq_rs, dq_cs, dk_rs, dk_cs, dv_rs, dv_cs;
  i64 block;     // causal: rows per block, whose products skip the keys past its last row; 0: not causal
  float masked;  // causal: a masked score after the prologue
  void (*scores)(float*, i64, i64, const void*, i64);  // (x, t, n, mask, its batch offset): row t's scores [0, n) through the prologue
  void (*grads)(float*, i64, i64, const void*, i64);   // (g, t, n, ..): their cotangents through the prologue's VJPs
};
__attribute__((visibility("hidden"))) void sh_attention(const sh_attn* L, void* const* a, i64 lo, i64 hi);
__attribute__((visibility("hidden"))) void sh_attention_grad(const sh_attn* L, void* const* a, i64 lo, i64 hi);
)";

const char* const kAttentionKernels = R"(static inline i64 sh_lesser(i64 x, i64 y) { return x < y ? x : y; }
// The element offsets o[SH_OPERANDS] of batch index b.
static void sh_attn_at(const sh_attn* L, i64 b, i64* o) {
  for (int j = 0; j < SH_OPERANDS; ++j) o[j] = 0;
  for (i64 d = L->rank; d-- > 0;) {
    const i64 i = b % L->sizes[d];
    b /= L->sizes[d];
    for (int j = 0; j < SH_OPERANDS; ++j) o[j] += i * L->strides[j][d];
  }
}
// c (m×n, element (r, j) at c[r·rs + j·cs]) = a·b, read as rt->gemm reads them; `tile`: m·n
// floats, where c's columns are not contiguous (an output its reader wants transposed).
static void sh_mm(const sheaf_rt* rt, const float* a, i64 m, i64 k, i64 ars, i64 acs, const float* b, i64 n, i64 brs, i64 bcs,
                  float* c, i64 rs, i64 cs, float* tile) {
  if (cs == 1) return rt->gemm(a, m, k, ars, acs, b, n, brs, bcs, c, rs);
  rt->gemm(a, m, k, ars, acs, b, n, brs, bcs, tile, n);
  for (i64 r = 0; r < m; ++r)
    for (i64 j = 0; j < n; ++j) c[r * rs + j * cs] = tile[r * n + j];
}
// The probability of a key the causal mask fills (L->masked) in a row of max m and sum l.
static inline float sh_attn_masked_p(const sh_attn* L, float m, float l) { return sh_exp(L->masked - m) / l; }
// Rows [r0, r1) of P (row stride s) hold their scores [0, w); they become probabilities over all
// s keys, those past w masked (L->masked): p = exp(x − m) / l with the row's max m and sum l —
// computed and, when mx is not 0, stored (`given` 0), or read from mx and l (`given` 1). The keys
// past w get their probability too. Returns the keys the block's products need: w, or s when a
// masked key's probability is not 0.
static i64 sh_attn_probs(const sh_attn* L, float* P, i64 r0, i64 r1, i64 w, const void* mask, i64 mo, float* mx, float* l, int given) {
  const i64 S = L->s;
  i64 keys = w;
  for (i64 r = r0; r < r1; ++r) {
    float* __restrict__ x = P + r * S;
    L->scores(x, r, w, mask, mo);
    float m, sum;
    if (given) {
      m = mx[r], sum = l[r];
#pragma omp simd
      for (i64 c = 0; c < w; ++c) x[c] = sh_exp(x[c] - m) / sum;
    } else {
      m = w < S ? L->masked : -__builtin_inff();
      int nan = m != m;
#pragma omp simd reduction(max : m) reduction(| : nan)
      for (i64 c = 0; c < w; ++c) {
        m = x[c] > m ? x[c] : m;
        nan |= x[c] != x[c];
      }
      if (nan) m = __builtin_nanf("");
      sum = 0;
#pragma omp simd reduction(+ : sum)
      for (i64 c = 0; c < w; ++c) {
        const float e = sh_exp(x[c] - m);
        x[c] = e;
        sum += e;
      }
      const float e = w < S ? sh_exp(L->masked - m) : 0.0f;
      if (e != 0)
        for (i64 c = w; c < S; ++c) sum += e;
#pragma omp simd
      for (i64 c = 0; c < w; ++c) x[c] = x[c] / sum;
      if (mx) mx[r] = m, l[r] = sum;
    }
    if (w < S) {
      const float p = sh_attn_masked_p(L, m, sum);
      for (i64 c = w; c < S; ++c) x[c] = p;
      if (p != 0) keys = S;
    }
  }
  return keys;
}
// The keys the products of rows [r0, r1) need (as sh_attn_probs returned for them), from their
// max and sum.
static i64 sh_attn_keys(const sh_attn* L, i64 r0, i64 r1, i64 w, const float* mx, const float* l) {
  for (i64 r = r0; r < r1 && w < L->s; ++r)
    if (sh_attn_masked_p(L, mx[r], l[r]) != 0) return L->s;
  return w;
}
// kt (n×s, contiguous) = the transpose of x (s×n, element (r, c) at r·rs + c·cs), in 16×16 blocks
// (3.2 µs for 128×64 rows apart where a row at a time took 6): the BLAS's small-matrix kernels
// are fast with an untransposed right operand only.
static void sh_transpose(const float* __restrict__ x, i64 s, i64 n, i64 rs, i64 cs, float* __restrict__ kt) {
  for (i64 r0 = 0; r0 < s; r0 += 16)
    for (i64 c0 = 0; c0 < n; c0 += 16) {
      const i64 r1 = sh_lesser(s, r0 + 16), c1 = sh_lesser(n, c0 + 16);
      for (i64 c = c0; c < c1; ++c)
        for (i64 r = r0; r < r1; ++r) kt[c * s + r] = x[r * rs + c * cs];
    }
}
void sh_attention(const sh_attn* L, void* const* a, i64 lo, i64 hi) {
  const sheaf_rt* rt = (const sheaf_rt*)a[0];
  const i64 T = L->t, S = L->s, blk = L->block ? L->block : T;
  float* tile = rt->scratch(T * S + T * L->dv + L->d * S);
  float *KT = tile + T * L->dv, *P = KT + L->d * S;
  for (i64 b = lo; b < hi; ++b) {
    i64 o[SH_OPERANDS];
    sh_attn_at(L, b, o);
    const float *Q = (const float*)a[1] + o[SH_Q], *K = (const float*)a[2] + o[SH_K], *V = (const float*)a[3] + o[SH_V];
    float* O = (float*)a[5] + o[SH_OUT];
    float *mx = a[6] ? (float*)a[6] + b * T : 0, *l = a[7] ? (float*)a[7] + b * T : 0;
    if (a[8]) P = (float*)a[8] + b * T * S;  // stored for the gradient
    sh_transpose(K, S, L->d, L->k_rs, L->k_cs, KT);
    for (i64 r0 = 0; r0 < T; r0 += blk) {
      const i64 r1 = sh_lesser(T, r0 + blk), w = L->block ? sh_lesser(S, r1) : S;
      rt->gemm(Q + r0 * L->q_rs, r1 - r0, L->d, L->q_rs, L->q_cs, KT, w, S, 1, P + r0 * S, S);
      const i64 keys = sh_attn_probs(L, P, r0, r1, w, a[4], o[SH_MASK], mx, l, 0);
      sh_mm(rt, P + r0 * S, r1 - r0, keys, S, 1, V, L->dv, L->v_rs, L->v_cs, O + r0 * L->o_rs, L->o_rs, L->o_cs, tile);
    }
  }
}
void sh_attention_grad(const sh_attn* L, void* const* a, i64 lo, i64 hi) {
  const sheaf_rt* rt = (const sheaf_rt*)a[0];
  const i64 T = L->t, S = L->s, D = L->d, DV = L->dv, blk = L->block ? L->block : T, cblk = L->block ? L->block : S;
  float* P = rt->scratch(2 * T * S + (T > S ? T : S) * (D > DV ? D : DV) + (D + DV) * S);
  float *G = P + T * S, *tile = G + T * S, *KT = tile + (T > S ? T : S) * (D > DV ? D : DV), *VT = KT + D * S;
  for (i64 b = lo; b < hi; ++b) {
    i64 o[SH_OPERANDS];
    sh_attn_at(L, b, o);
    const float *Q = (const float*)a[1] + o[SH_Q], *K = (const float*)a[2] + o[SH_K], *V = (const float*)a[3] + o[SH_V];
    float *mx = (float*)a[6] + b * T, *l = (float*)a[7] + b * T;
    const float* stored = a[8] ? (const float*)a[8] + b * T * S : 0;
    const float* dO = (const float*)a[9] + o[SH_DO];
    float *dq = (float*)a[10] + o[SH_DQ], *dk = (float*)a[11] + o[SH_DK], *dv = (float*)a[12] + o[SH_DV];
    const float* Pr = stored ? stored : P;  // the probabilities: stored, or computed again in P
    int wide = 0;  // a block took every key
    if (!stored) sh_transpose(K, S, D, L->k_rs, L->k_cs, KT);
    sh_transpose(V, S, DV, L->v_rs, L->v_cs, VT);
    for (i64 r0 = 0; r0 < T; r0 += blk) {
      const i64 r1 = sh_lesser(T, r0 + blk), w = L->block ? sh_lesser(S, r1) : S;
      i64 keys;
      if (stored) {
        keys = sh_attn_keys(L, r0, r1, w, mx, l);
      } else {
        rt->gemm(Q + r0 * L->q_rs, r1 - r0, D, L->q_rs, L->q_cs, KT, w, S, 1, P + r0 * S, S);
        keys = sh_attn_probs(L, P, r0, r1, w, a[4], o[SH_MASK], mx, l, 1);
      }
      wide |= keys > w;
      rt->gemm(dO + r0 * L->do_rs, r1 - r0, DV, L->do_rs, L->do_cs, VT, keys, S, 1, G + r0 * S, S);  // dP
      for (i64 r = r0; r < r1; ++r) {
        const float* __restrict__ p = Pr + r * S;
        float* __restrict__ g = G + r * S;
        float dot = 0;
#pragma omp simd reduction(+ : dot)
        for (i64 c = 0; c < keys; ++c) dot += g[c] * p[c];
#pragma omp simd
        for (i64 c = 0; c < keys; ++c) g[c] = p[c] * (g[c] - dot);
        L->grads(g, r, keys, a[4], o[SH_MASK]);
        for (i64 c = keys; c < S; ++c) g[c] = 0;  // masked: the select's VJP
      }
      sh_mm(rt, G + r0 * S, r1 - r0, keys, S, 1, K, D, L->k_rs, L->k_cs, dq + r0 * L->dq_rs, L->dq_rs, L->dq_cs, tile);
    }
    // keys [c0, c1): the rows from c0 on (the others masked: their dS is 0, and so is P unless `wide`)
    for (i64 c0 = 0; c0 < S; c0 += cblk) {
      const i64 c1 = sh_lesser(S, c0 + cblk), rk = L->block ? sh_lesser(c0, T) : 0, rv = wide ? 0 : rk;
      sh_mm(rt, Pr + rv * S + c0, c1 - c0, T - rv, 1, S, dO + rv * L->do_rs, DV, L->do_rs, L->do_cs, dv + c0 * L->dv_rs, L->dv_rs, L->dv_cs,
            tile);
      sh_mm(rt, G + rk * S + c0, c1 - c0, T - rk, 1, S, Q + rk * L->q_rs, D, L->q_rs, L->q_cs, dk + c0 * L->dk_rs, L->dk_rs, L->dk_cs, tile);
    }
  }
}
)";

namespace {

// Whether Mask op `op` keeps the score of row t, key s, as an expression (mask: the step's mask
// pointer `mask` at batch offset `mo`, element (t, s) at t·ts + s·ss).
std::string kept(const AttentionLayout& a, const ScoreOp& op, DType mask_type) {
  if (a.causal) return "s <= t";
  const std::string at = fmt::format("((const {}*)mask)[mo + t * {} + s * {}]", loop_code::ctype(mask_type), a.mask_ts, a.mask_ss);
  return fmt::format("(({} != 0) == {})", at, op.keep_if ? 1 : 0);
}

// Mul or Div op `op` applied to x, rounded to its type (the VJPs of both are themselves).
std::string scaled(const ScoreOp& op, const std::string& x) {
  return loop_code::rounded(op.dtype, fmt::format("{} {} {}", x, op.kind == ScoreOp::Kind::Mul ? '*' : '/', loop_code::literal(DType::F32, op.c)));
}

// The prologue over one row's score v, and its VJP (the ops last first; the first op, the
// product's rounding, has none): the statements of a prologue function's loop.
std::pair<std::string, std::string> prologue_bodies(const AttentionLayout& a, DType mask_type) {
  std::string fwd, bwd;
  for (const ScoreOp& op : a.prologue) {
    switch (op.kind) {
      case ScoreOp::Kind::Round:
        if (is_half(op.dtype)) fwd += fmt::format("    v = {};\n", loop_code::rounded(op.dtype, "v"));
        break;
      case ScoreOp::Kind::Mul:
      case ScoreOp::Kind::Div: fwd += fmt::format("    v = {};\n", scaled(op, "v")); break;
      case ScoreOp::Kind::Mask:
        if (op.additive && !a.causal)
          fwd += fmt::format("    v = v + ((const float*)mask)[mo + t * {} + s * {}];\n", a.mask_ts, a.mask_ss);
        else
          fwd += fmt::format("    v = {} ? v : {};\n", kept(a, op, mask_type), loop_code::literal(DType::F32, op.c));
        break;
    }
  }
  for (size_t i = a.prologue.size(); i-- > 1;) {
    const ScoreOp& op = a.prologue[i];
    switch (op.kind) {
      case ScoreOp::Kind::Round:
        if (is_half(a.prologue[i - 1].dtype)) bwd += fmt::format("    v = {};\n", loop_code::rounded(a.prologue[i - 1].dtype, "v"));
        break;
      case ScoreOp::Kind::Mul:
      case ScoreOp::Kind::Div: bwd += fmt::format("    v = {};\n", scaled(op, "v")); break;
      case ScoreOp::Kind::Mask:
        if (!op.additive) bwd += fmt::format("    v = {} ? v : 0.0f;\n", kept(a, op, mask_type));
        break;
    }
  }
  return {fwd, bwd};
}

// A masked score after the prologue: the fill through the ops after the mask.
std::string masked_score(const AttentionLayout& a) {
  std::string v;
  for (const ScoreOp& op : a.prologue) {
    if (op.kind == ScoreOp::Kind::Mask) v = loop_code::literal(DType::F32, op.c);
    else if (v.empty()) continue;
    else if (op.kind == ScoreOp::Kind::Round) v = loop_code::rounded(op.dtype, v);
    else v = scaled(op, v);
  }
  return v.empty() ? "0.0f" : v;
}

}  // namespace

std::string prologue_prototype(const std::string& name) {
  return fmt::format("__attribute__((visibility(\"hidden\"))) void {}(float* __restrict__ x, i64 t, i64 n, const void* mask, i64 mo)", name);
}

std::string prologue_function(const std::string& name, const std::string& body) {
  return fmt::format(
      "{} {{\n"
      "  (void)t, (void)mask, (void)mo;\n"
      "#pragma omp simd\n"
      "  for (i64 s = 0; s < n; ++s) {{\n"
      "    float v = x[s];\n{}"
      "    x[s] = v;\n"
      "  }}\n"
      "}}\n",
      prologue_prototype(name), body);
}

AttentionCode attention_code(const ir::Graph& g, const fusion::Schedule& s, const fusion::MemoryPlan& m, size_t index,
                             const fusion::Step& st, const std::string& name, const PrologueNamer& prologue) {
  const AttentionLayout& a = st.attention;
  const bool grad = st.kind == fusion::StepKind::AttentionGrad;
  for (const AttentionLayout::Bias& b : {a.bias_q, a.bias_k, a.bias_v})
    if (b.value >= 0) throw SheafError("internal: a folded attention bias in a CPU schedule");
  const size_t rank = a.batch.size();
  if (rank > fusion::kCpuAttentionMaxBatchDims) throw SheafError("internal: an attention step with too many batch dims");
  const auto reader = static_cast<int32_t>(index);
  auto view = [&](int32_t v) -> const fusion::View& { return fusion::read_view(s, v, reader); };
  auto at = [&](int32_t v) {  // an operand's pointer at its view's offset
    const fusion::View& w = view(v);
    return fmt::format("(void*)((const {}*)b[{}] + {})", loop_code::ctype(g.type(v).dtype), m.slot[w.buffer], w.offset);
  };
  auto out_at = [&](const AttentionLayout::Out& o) {
    return fmt::format("(void*)((float*)b[{}] + {})", m.slot[s.view[o.value]->buffer], o.offset);
  };
  auto own = [&](int32_t v) { return fmt::format("b[{}]", m.slot[v]); };
  std::vector<std::string> args{"(void*)rt", at(a.q), at(a.k), at(a.v), a.mask >= 0 && !a.causal ? at(a.mask) : "0", out_at(a.out),
                                a.row_max >= 0 ? own(a.row_max) : "0", a.row_sum >= 0 ? own(a.row_sum) : "0",
                                a.probs >= 0 ? own(a.probs) : "0"};
  if (grad) args.insert(args.end(), {at(a.d_out), out_at(a.grad_q), out_at(a.grad_k), out_at(a.grad_v)});

  // the batch strides of each operand (sh_attn's SH_Q..SH_DV), 0 for one a step does not have
  const std::vector<int64_t> none(rank, 0);
  const std::vector<const std::vector<int64_t>*> strides{&a.batch_q, &a.batch_k, &a.batch_v, a.mask >= 0 ? &a.batch_mask : &none, &a.out.batch,
                                                         grad ? &a.batch_do : &none, grad ? &a.grad_q.batch : &none,
                                                         grad ? &a.grad_k.batch : &none, grad ? &a.grad_v.batch : &none};
  std::vector<int64_t> sizes(a.batch);
  sizes.resize(fusion::kCpuAttentionMaxBatchDims, 1);
  std::string stride_rows;
  for (const std::vector<int64_t>* v : strides) {
    std::vector<int64_t> row(*v);
    row.resize(fusion::kCpuAttentionMaxBatchDims, 0);
    stride_rows += fmt::format("{{{}}}, ", fmt::join(row, ", "));
  }
  const DType mask_type = a.mask >= 0 ? g.type(a.mask).dtype : DType::Bool;
  AttentionCode code;
  code.count = shape_numel(a.batch);
  code.args = fmt::format("{}", fmt::join(args, ", "));
  const auto [scores, grads] = prologue_bodies(a, mask_type);
  // sh_attn's fields from t to dv_cs (the gradient's 0 in a forward step)
  std::vector<int64_t> fields{a.t, a.s, a.d, a.dv, a.q_rs, a.q_cs, a.k_rs, a.k_cs, a.v_rs, a.v_cs, a.out.rs, a.out.cs};
  const std::vector<int64_t> gradient{a.do_rs, a.do_cs, a.grad_q.rs, a.grad_q.cs, a.grad_k.rs, a.grad_k.cs, a.grad_v.rs, a.grad_v.cs};
  fields.insert(fields.end(), gradient.begin(), gradient.end());
  if (!grad) std::fill(fields.end() - static_cast<std::ptrdiff_t>(gradient.size()), fields.end(), 0);
  code.task = fmt::format(
      "__attribute__((visibility(\"hidden\"))) void {0}(void* const* a, i64 lo, i64 hi) {{\n"
      "  static const sh_attn L = {{{1}, {{{2}}}, {{{3}}},\n    {4},\n    {5}, {6}, {7}, {8}}};\n"
      "  {9}(&L, a, lo, hi);\n"
      "}}\n",
      name, rank, fmt::join(sizes, ", "), stride_rows, fmt::join(fields, ", "), a.causal ? kCausalBlock : 0,
      a.causal ? masked_score(a) : "0.0f", prologue(scores, "scores"), prologue(grads, "grads"), grad ? "sh_attention_grad" : "sh_attention");
  return code;
}

}  // namespace sheaf::cpu
