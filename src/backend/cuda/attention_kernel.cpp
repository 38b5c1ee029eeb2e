// backend/cuda/attention_kernel.cpp — flash attention for an Attention step (attention_kernel.hpp).
// Fragment layouts of mma.sync.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16"), for lane
// = 4·g + c of a warp: A (16 × 16, row-major pairs) a0 = (g, 2c..2c+1), a1 = (g + 8, 2c..),
// a2 = (g, 2c + 8..), a3 = (g + 8, 2c + 8..); B (16 × 8) b0 = (k 2c..2c+1, n g), b1 = (k 2c + 8..,
// n g); C/D (16 × 8, f32) d0, d1 = (g, 2c..2c+1), d2, d3 = (g + 8, 2c..). So the accumulators of
// two adjacent 8-key score tiles are exactly the A fragment of a 16-key step of P·V.
#include "backend/cuda/attention_kernel.hpp"

#include <fmt/format.h>

#include "backend/loop_code.hpp"
#include "base/error.hpp"

namespace sheaf::cuda {

const char* const kAttentionHelpers = R"(struct alignas(16) sh_u4 { unsigned x, y, z, w; };
#ifndef SHEAF_EMULATION
static inline void sh_mma_bf16(float* d, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
static inline void sh_mma_f16(float* d, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// 2^x (ex2.approx: within 2 ulp, subnormal results flushed to 0) for the softmax's exponentials,
// their scores scaled by log2 e; two f32 values rounded to the operands' type and packed as an
// mma fragment pair (lo in the lower half) in one instruction.
static inline float sh_exp2(float x) { float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r; }
static inline unsigned sh_pack_bf16(float lo, float hi) { unsigned r; asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r; }
static inline unsigned sh_pack_f16(float lo, float hi) { unsigned r; asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r; }
#else
static inline float sh_exp2(float x) { return exp2f(x); }
static inline unsigned sh_pack_bf16(float lo, float hi) { return (unsigned)sh_f2b(lo) | ((unsigned)sh_f2b(hi) << 16); }
static inline unsigned sh_pack_f16(float lo, float hi) { return (unsigned)sh_f2h(lo) | ((unsigned)sh_f2h(hi) << 16); }
#endif
)";

namespace {

constexpr int64_t kRows = 64, kKeys = 64, kThreads = 128;  // a block: 4 warps × 16 query rows; a key tile
constexpr int64_t kInner = 32;  // the gradient: the tiles a block's 64 rows (keys or queries) meet in turn
constexpr int64_t kTs = kInner + 8;  // the gradient: __shared__ row stride of the transposed (Qᵀ, dOᵀ, Kᵀ) tiles
constexpr const char* kLog2e = "0x1.715476p+0f";  // exp(x) = 2^(x·log2 e) (sh_exp2)

class AttentionRenderer {
 public:
  AttentionRenderer(const ir::Graph& g, const fusion::Schedule& s, const fusion::MemoryPlan& m, size_t index)
      : g_(g), s_(s), m_(m), index_(index), a_(s.steps[index].attention) {
    dt_ = g.type(a_.q).dtype;
    reads_mask_ = a_.mask >= 0 && !a_.causal;
    if (!is_half(dt_)) throw SheafError("internal: an attention step on neither f16 nor bf16");
    for (size_t i = 0; i < a_.prologue.size(); ++i)
      if (a_.prologue[i].kind == fusion::ScoreOp::Kind::Mask) mask_op_ = static_cast<int64_t>(i);
    const fusion::ScoreOp* mask = mask_op_ < 0 ? nullptr : &a_.prologue[static_cast<size_t>(mask_op_)];
    skip_ = a_.causal && mask && mask_op_ + 1 == static_cast<int64_t>(a_.prologue.size()) && mask->c <= -1e4;
  }

  std::string run(const std::string& name, Launch& l) {
    const int64_t q_tiles = (a_.t + kRows - 1) / kRows;
    const bool stats = a_.row_max >= 0;  // a gradient step reads the row max and sum
    begin(name, l, q_tiles,
          fmt::format("{}* __restrict__ go{}", loop_code::ctype(dt_), stats ? ", float* __restrict__ gmax, float* __restrict__ gsum" : ""));
    l.slots.push_back(slot(view(a_.out.value).buffer));
    if (stats) l.slots.insert(l.slots.end(), {slot(a_.row_max), slot(a_.row_sum)});
    const int64_t vs = kKeys + 8;  // Vᵀ's __shared__ row stride
    line("__shared__ sh_u4 hq4[{}], hk4[{}], hv4[{}];", kRows * qs_ / 8, kKeys * qs_ / 8, a_.dv * vs / 8);
    line("{0}* const sq = ({0}*)hq4; {0}* const sk = ({0}*)hk4; {0}* const svt = ({0}*)hv4;", loop_code::ctype(dt_));
    line("const int t0 = ({} - (int)(blockIdx.x % {})) * {};", q_tiles - 1, q_tiles, kRows);
    // the Q tile
    load_tile("sq", "gq", "oq", a_.q_rs, a_.d, "t0", kRows, a_.t, qs_, false);
    accumulators("o", a_.dv / 8);
    line("float m[2] = {{-__builtin_inff(), -__builtin_inff()}}, l[2] = {{0.f, 0.f}};");
    open_key_tiles(kKeys, "the previous K and V tiles");
    load_tile("sk", "gk", "ok", a_.k_rs, a_.d, "s0", kKeys, a_.s, qs_, false);
    load_tile("svt", "gv", "ov", a_.v_rs, a_.dv, "s0", kKeys, a_.s, vs, true);
    line("__syncthreads();");
    // s[j][e]: this warp's 16 × 64 scores, 8-key tile j, accumulator e (row g + 8·(e / 2), key 8j + 2c + e % 2)
    product("s", "sq", qs_, a_.d, "sk", kKeys / 8, qs_);
    softmax_step();
    from_accumulators("o", "s", "svt", a_.dv / 8, vs, kKeys);  // o += P·V
    indent_ -= 2;
    line("}}");
    store();
    indent_ = 0;
    line("}}");
    return code_;
  }

  // The gradient (attention_kernel.hpp): blocks b·(kt + qt) + j, j < kt: dK and dV of key tile j;
  // else dQ of query tile j − kt.
  std::string run_grad(const std::string& name, Launch& l) {
    const int64_t key_tiles = (a_.s + kRows - 1) / kRows, q_tiles = (a_.t + kRows - 1) / kRows;
    begin(name, l, key_tiles + q_tiles,
          fmt::format("const {h}* __restrict__ gdo, const {h}* __restrict__ go, const float* __restrict__ gmax, const float* __restrict__ gsum, "
                      "{h}* __restrict__ gdq, {h}* __restrict__ gdk, {h}* __restrict__ gdv",
                      fmt::arg("h", loop_code::ctype(dt_))));
    l.slots.insert(l.slots.end(), {slot(view(a_.d_out).buffer), slot(view(a_.out.value).buffer), slot(a_.row_max), slot(a_.row_sum),
                                   slot(view(a_.grad_q.value).buffer), slot(view(a_.grad_k.value).buffer), slot(view(a_.grad_v.value).buffer)});
    line("__shared__ sh_u4 pool[{}];", std::max(pool_size(keys_regions(), kInner), pool_size(queries_regions(), kRows)));
    line("const int role = (int)(blockIdx.x % {});", key_tiles + q_tiles);
    line("if (role < {}) {{", key_tiles);
    indent_ += 2;
    keys_role();
    indent_ -= 2;
    line("}} else {{");
    indent_ += 2;
    queries_role(key_tiles);
    indent_ -= 2;
    line("}}");
    indent_ = 0;
    line("}}");
    return code_;
  }

 private:
  const ir::Graph& g_;
  const fusion::Schedule& s_;
  const fusion::MemoryPlan& m_;
  size_t index_;
  const fusion::AttentionLayout& a_;
  DType dt_ = DType::BF16;
  bool reads_mask_ = false;  // a mask that is not causal is read
  int64_t qs_ = a_.d + 8, vs_ = a_.dv + 8;  // __shared__ row strides of Q, K (d columns) and V, dO (dv): rows 16 bytes apart in banks
  int64_t mask_op_ = -1;
  bool skip_ = false;  // causal: the key tiles above the diagonal are skipped
  std::string code_;
  int indent_ = 0;

  const fusion::View& view(int32_t v) const { return fusion::read_view(s_, v, static_cast<int32_t>(index_)); }
  // The bias added to the operand the kernel names `src` ("gq", "gk", "gv"; fusion::AttentionLayout::Bias), or null.
  const fusion::AttentionLayout::Bias* bias_of(std::string_view src) const {
    const fusion::AttentionLayout::Bias* b = src == "gq" ? &a_.bias_q : src == "gk" ? &a_.bias_k : src == "gv" ? &a_.bias_v : nullptr;
    return b && b->value >= 0 ? b : nullptr;
  }
  int32_t slot(int32_t buffer) const { return m_.slot[static_cast<size_t>(buffer)]; }
  std::string mma() const { return dt_ == DType::BF16 ? "sh_mma_bf16" : "sh_mma_f16"; }
  std::string narrow(const std::string& x) const { return loop_code::store_expr(dt_, x); }

  template <class... A>
  void line(fmt::format_string<A...> f, A&&... a) {
    code_ += fmt::format("{:{}}", "", indent_) + fmt::format(f, std::forward<A>(a)...) + "\n";
  }

  // The kernel's signature — q, k, v, the mask when read (their slots in l), then `params` — and
  // first lines: the thread's warp, row group g and lane c, its block's batch index bi (`blocks`
  // blocks per batch index: l's grid), the operands' offsets (batch_offsets).
  void begin(const std::string& name, Launch& l, int64_t blocks, const std::string& params) {
    l.kernel = name;
    l.block = kThreads;
    l.grid = shape_numel(a_.batch) * blocks;
    l.block_reduce = true;
    l.slots = {slot(view(a_.q).buffer), slot(view(a_.k).buffer), slot(view(a_.v).buffer)};
    if (reads_mask_) l.slots.push_back(slot(view(a_.mask).buffer));
    std::string biases;
    for (const char* src : {"gq", "gk", "gv"})
      if (const fusion::AttentionLayout::Bias* b = bias_of(src)) {
        biases += fmt::format("const {}* __restrict__ gb{}, ", loop_code::ctype(dt_), src + 1);
        l.slots.push_back(slot(view(b->value).buffer));
      }
    line("extern \"C\" __global__ void __launch_bounds__({}) {}(const {h}* __restrict__ gq, const {h}* __restrict__ gk, "
         "const {h}* __restrict__ gv, {}{}{}) {{",
         kThreads, name, reads_mask_ ? "const b8* __restrict__ gm, " : "", biases, params, fmt::arg("h", loop_code::ctype(dt_)));
    indent_ = 2;
    line("const int tid = threadIdx.x, warp = tid >> 5, g = (tid & 31) >> 2, c = tid & 3;");
    line("const i64 bi = blockIdx.x / {};", blocks);
    batch_offsets();
  }

  // Where batch index bi's matrices start: oq, ok, ov, oo (the output), and om (a mask read),
  // odo, odq, odk, odv (a gradient).
  void batch_offsets() {
    struct Start {
      const char* name;
      int64_t offset;
      const std::vector<int64_t>* batch;
      std::string expr;
    };
    std::vector<Start> at{{"oq", view(a_.q).offset, &a_.batch_q, ""}, {"ok", view(a_.k).offset, &a_.batch_k, ""},
                          {"ov", view(a_.v).offset, &a_.batch_v, ""}, {"oo", a_.out.offset, &a_.out.batch, ""}};
    if (reads_mask_) at.push_back({"om", view(a_.mask).offset, &a_.batch_mask, ""});
    if (a_.d_out >= 0)
      at.insert(at.end(), {{"odo", view(a_.d_out).offset, &a_.batch_do, ""}, {"odq", a_.grad_q.offset, &a_.grad_q.batch, ""},
                           {"odk", a_.grad_k.offset, &a_.grad_k.batch, ""}, {"odv", a_.grad_v.offset, &a_.grad_v.batch, ""}});
    for (Start& x : at) x.expr = std::to_string(x.offset);
    if (!a_.batch.empty()) line("i64 rest = bi;");
    for (size_t i = a_.batch.size(); i-- > 0;) {
      line("const i64 b{0} = rest % {1}; rest /= {1};", i, a_.batch[i]);
      for (Start& x : at) x.expr += fmt::format(" + b{} * {}", i, (*x.batch)[i]);
    }
    for (const Start& x : at) line("const i64 {} = {};", x.name, x.expr);
    for (const char* src : {"gq", "gk", "gv"})  // where the bias of the operand's first column is
      if (const fusion::AttentionLayout::Bias* b = bias_of(src))
        line("const i64 ob{0} = {1} + (o{0} - {2}) % {3};", src + 1, view(b->value).offset, b->shift, b->row);
  }

  // `rows` rows of a matrix from row `from`, at `src` + `at` (row stride rs, `cols` contiguous
  // columns, `limit` rows) into __shared__ `dst` (row stride ds; `transposed`: column-major, column stride
  // ds), zeros past the limit: 16-byte loads, 8 columns each. An operand with a bias gets it added
  // to each element loaded (gb{x}[ob{x} + column]), rounded as the graph's add.
  void load_tile(const char* dst, const char* src, const char* at, int64_t rs, int64_t cols, const char* from, int64_t rows,
                 int64_t limit, int64_t ds, bool transposed) {
    line("for (int x = tid; x < {}; x += {}) {{", rows * cols / 8, kThreads);
    line("  const int r = x / {0}, cc = x % {0} * 8;", cols / 8);
    line("  sh_u4 e = {{0u, 0u, 0u, 0u}};");
    if (bias_of(src)) {
      line("  if ({} + r < {}) {{", from, limit);
      line("    e = *(const sh_u4*)({} + {} + (i64)({} + r) * {} + cc);", src, at, from, rs);
      line("    {0}* const pe = ({0}*)&e;", loop_code::ctype(dt_));
      line("    for (int j = 0; j < 8; ++j) pe[j] = {};",
           narrow(loop_code::binary_expr(Binary::Add, DType::F32, loop_code::load_expr(dt_, "pe[j]"),
                                         loop_code::load_expr(dt_, fmt::format("gb{0}[ob{0} + cc + j]", src + 1)))));
      line("  }}");
    } else {
      line("  if ({} + r < {}) e = *(const sh_u4*)({} + {} + (i64)({} + r) * {} + cc);", from, limit, src, at, from, rs);
    }
    if (transposed) {
      line("  const {}* p = (const {}*)&e;", loop_code::ctype(dt_), loop_code::ctype(dt_));
      line("  for (int j = 0; j < 8; ++j) {}[(cc + j) * {} + r] = p[j];", dst, ds);
    } else {
      line("  *(sh_u4*)({} + r * {} + cc) = e;", dst, ds);
    }
    line("}}");
  }

  // acc[tiles][4] = A·Bᵀ for this warp's 16 rows of A (__shared__ `a_src`, row stride a_ld, row
  // warp·16 + g..) over `depth` columns in steps of 16, B's rows in __shared__ `b_src` (mma_tiles).
  void product(const char* acc, const char* a_src, int64_t a_ld, int64_t depth, const char* b_src, int64_t tiles, int64_t b_ld) {
    accumulators(acc, tiles);
    line("for (int kk = 0; kk < {}; ++kk) {{", depth / 16);
    line("  const {}* qa = {} + (warp * 16 + g) * {} + kk * 16 + 2 * c;", loop_code::ctype(dt_), a_src, a_ld);
    line("  const unsigned a[4] = {{*(const unsigned*)qa, *(const unsigned*)(qa + {0}), *(const unsigned*)(qa + 8), "
         "*(const unsigned*)(qa + {0} + 8)}};",
         8 * a_ld);
    mma_tiles(acc, b_src, tiles, b_ld);
    line("}}");
  }

  // float acc[tiles][4], zeros.
  void accumulators(const char* acc, int64_t tiles) {
    line("float {}[{}][4];", acc, tiles);
    line("for (int j = 0; j < {0}; ++j) {1}[j][0] = {1}[j][1] = {1}[j][2] = {1}[j][3] = 0.f;", tiles, acc);
  }

  // Opens the loop over the tiles of `keys` keys that the block of rows t0.. meets — with causal
  // skipping, up to the one holding its last row's diagonal —, s0 the tile's first key, after a
  // barrier (`previous`: what every warp is done with there). The caller closes it.
  void open_key_tiles(int64_t keys, const char* previous) {
    const int64_t total = (a_.s + keys - 1) / keys;
    if (skip_) line("const int tiles = (t0 + {0}) / {1} + 1 < {2} ? (t0 + {0}) / {1} + 1 : {2};", kRows - 1, keys, total);
    else line("const int tiles = {};", total);
    line("for (int kt = 0; kt < tiles; ++kt) {{");
    indent_ += 2;
    line("const int s0 = kt * {};", keys);
    line("__syncthreads();  // every warp is done with {}", previous);
  }

  // Inside a loop over kk with the A fragment a[4] of its 16-column step: acc[j] += a · B_j for the
  // `tiles` 8-column tiles j, B_j's fragment read from __shared__ `src` (a row per B column:
  // row j·8 + g, columns kk·16 + 2c.., row stride ld).
  void mma_tiles(const char* acc, const char* src, int64_t tiles, int64_t ld) {
    line("  for (int j = 0; j < {}; ++j) {{", tiles);
    line("    const {}* bj = {} + (j * 8 + g) * {} + kk * 16 + 2 * c;", loop_code::ctype(dt_), src, ld);
    line("    const unsigned b[2] = {{*(const unsigned*)bj, *(const unsigned*)(bj + 8)}};");
    line("    {}({}[j], a, b);", mma(), acc);
    line("  }}");
  }

  // dK and dV of this warp's 16 keys of key tile `role` (64 keys, K and V in __shared__ memory):
  // over the query tiles (kInner rows; causal: from the diagonal's), Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ,
  // then dV += Pᵀ·dO and dK += dSᵀ·Q from the accumulators.
  void keys_role() {
    carve(keys_regions(), kInner);
    line("const int s0 = role * {};", kRows);
    load_tile("sk", "gk", "ok", a_.k_rs, a_.d, "s0", kRows, a_.s, qs_, false);
    load_tile("sv", "gv", "ov", a_.v_rs, a_.dv, "s0", kRows, a_.s, vs_, false);
    accumulators("dk", a_.d / 8);
    accumulators("dv", a_.dv / 8);
    line("for (int qt = {}; qt < {}; ++qt) {{", skip_ ? fmt::format("s0 / {}", kInner) : "0", (a_.t + kInner - 1) / kInner);
    indent_ += 2;
    line("const int t0 = qt * {};", kInner);
    line("__syncthreads();  // every warp is done with the previous tiles (and K, V are loaded)");
    load_tile("sq", "gq", "oq", a_.q_rs, a_.d, "t0", kInner, a_.t, qs_, false);
    load_tile("sqt", "gq", "oq", a_.q_rs, a_.d, "t0", kInner, a_.t, kTs, true);
    load_tile("sdo", "gdo", "odo", a_.do_rs, a_.dv, "t0", kInner, a_.t, vs_, false);
    load_tile("sdot", "gdo", "odo", a_.do_rs, a_.dv, "t0", kInner, a_.t, kTs, true);
    row_values(kInner);
    line("__syncthreads();");
    tile_grads({"st", "sk", "sq"}, {"dpt", "sv", "sdo"}, "r = j * 8 + 2 * c + (e & 1), t = t0 + r, k = s0 + warp * 16 + g + 8 * (e >> 1)",
               kInner);
    from_accumulators("dv", "st", "sdot", a_.dv / 8, kTs, kInner);
    from_accumulators("dk", "dpt", "sqt", a_.d / 8, kTs, kInner);
    indent_ -= 2;
    line("}}");
    store_rows("gdk", "odk", "dk[n][e]", a_.grad_k, "s0 + warp * 16 + g + 8 * (e >> 1)", a_.s, a_.d);
    store_rows("gdv", "odv", "dv[n][e]", a_.grad_v, "s0 + warp * 16 + g + 8 * (e >> 1)", a_.s, a_.dv);
  }

  // dQ of this warp's 16 rows of query tile role − key_tiles (64 rows, Q and dO in __shared__
  // memory): over the key tiles (kInner keys; causal: up to the diagonal's), S = Q·Kᵀ and
  // dP = dO·Vᵀ, then dQ += dS·K from the accumulators.
  void queries_role(int64_t key_tiles) {
    carve(queries_regions(), kRows);
    line("const int t0 = (role - {}) * {};", key_tiles, kRows);
    load_tile("sq", "gq", "oq", a_.q_rs, a_.d, "t0", kRows, a_.t, qs_, false);
    load_tile("sdo", "gdo", "odo", a_.do_rs, a_.dv, "t0", kRows, a_.t, vs_, false);
    row_values(kRows);
    accumulators("dq", a_.d / 8);
    open_key_tiles(kInner, "the previous tiles (and Q, dO, the row values are loaded)");
    load_tile("sk", "gk", "ok", a_.k_rs, a_.d, "s0", kInner, a_.s, qs_, false);
    load_tile("skt", "gk", "ok", a_.k_rs, a_.d, "s0", kInner, a_.s, kTs, true);
    load_tile("sv", "gv", "ov", a_.v_rs, a_.dv, "s0", kInner, a_.s, vs_, false);
    line("__syncthreads();");
    tile_grads({"s", "sq", "sk"}, {"dp", "sdo", "sv"}, "r = warp * 16 + g + 8 * (e >> 1), t = t0 + r, k = s0 + j * 8 + 2 * c + (e & 1)",
               kRows);
    from_accumulators("dq", "dp", "skt", a_.d / 8, kTs, kInner);
    indent_ -= 2;
    line("}}");
    store_rows("gdq", "odq", "dq[n][e]", a_.grad_q, "t0 + warp * 16 + g + 8 * (e >> 1)", a_.t, a_.d);
  }

  // A __shared__ array of the operand type: its name and elements.
  struct Region {
    const char* name;
    int64_t elements;
  };

  // The __shared__ arrays of the gradient's roles (keys_role, queries_role); each also has srow,
  // 3 floats per row of its inner (kInner) or own (kRows) tile.
  std::vector<Region> keys_regions() const {
    return {{"sk", kRows * qs_}, {"sv", kRows * vs_}, {"sq", kInner * qs_}, {"sqt", a_.d * kTs}, {"sdo", kInner * vs_}, {"sdot", a_.dv * kTs}};
  }
  std::vector<Region> queries_regions() const {
    return {{"sq", kRows * qs_}, {"sdo", kRows * vs_}, {"sk", kInner * qs_}, {"skt", a_.d * kTs}, {"sv", kInner * vs_}};
  }

  // sh_u4 units of `regions` and a srow of 3 floats for each of `rows` rows (every region a
  // multiple of 8 elements, so each starts 16-byte aligned).
  static int64_t pool_size(const std::vector<Region>& regions, int64_t rows) {
    int64_t elements = 0;
    for (const Region& r : regions) elements += r.elements;
    return elements / 8 + (3 * rows + 3) / 4;
  }

  // The regions' pointers into __shared__ `pool`, one after another, then srow.
  void carve(const std::vector<Region>& regions, int64_t rows) {
    const char* h = loop_code::ctype(dt_);
    int64_t at = 0;
    for (const Region& r : regions) line("{0}* const {1} = ({0}*)pool + {2};", h, r.name, at), at += r.elements;
    line("float* const srow = (float*)(({}*)pool + {});  // {} floats", h, at, 3 * rows);
  }

  // One product of a tile pair: its accumulators, A's and B's __shared__ tiles (product()).
  struct Product {
    const char *acc, *a, *b;
  };

  // The tile pair's scores (s: over the head dim, row stride qs_) and dO·Vᵀ (dp: over the value
  // head dim, row stride vs_), then score_grad at each accumulator j, e (`index` declares r, t, k;
  // n: the rows of srow).
  void tile_grads(const Product& s, const Product& dp, const char* index, int64_t n) {
    product(s.acc, s.a, qs_, a_.d, s.b, kInner / 8, qs_);
    product(dp.acc, dp.a, vs_, a_.dv, dp.b, kInner / 8, vs_);
    line("for (int j = 0; j < {}; ++j)", kInner / 8);
    line("  for (int e = 0; e < 4; ++e) {{");
    indent_ += 4;
    line("const int {};", index);
    score_grad(fmt::format("{}[j][e]", s.acc), fmt::format("{}[j][e]", dp.acc), n);
    indent_ -= 4;
    line("  }}");
  }

  // srow[r], srow[n + r], srow[2n + r] for the n rows from t0: the row max m of the forward pass,
  // D = Σ dO∘O (rowsum(dP∘P)) and log2 l of its row sum l (P = 2^((x − m)·log2 e − log2 l)); rows
  // past t: 0, 0, 0. m stays apart from log2 l: a row whose every score is a mask's fill has
  // m = −1e9, where m·log2 e + log2 l would round log2 l away.
  void row_values(int64_t n) {
    line("if (tid < {}) {{", n);
    line("  const int t = t0 + tid;");
    line("  float mx = 0.f, sm = 1.f, dd = 0.f;");
    line("  if (t < {}) {{", a_.t);
    line("    mx = gmax[bi * {0} + t], sm = gsum[bi * {0} + t];", a_.t);
    line("    for (int j = 0; j < {}; ++j) dd += {} * {};", a_.dv, loop_code::load_expr(dt_, "gdo[odo + (i64)t * " + std::to_string(a_.do_rs) + " + j]"),
         loop_code::load_expr(dt_, fmt::format("go[oo + (i64)t * {} + (i64)j * {}]", a_.out.rs, a_.out.cs)));
    line("  }}");
    line("  srow[tid] = mx, srow[{0} + tid] = dd, srow[{1} + tid] = log2f(sm);", n, 2 * n);
    line("}}");
  }

  // With x the raw score and dp the raw dO·Vᵀ of row t, key k (its row values at srow[r],
  // srow[n + r], srow[2n + r]: row_values): x becomes P (0 past t or s), dp becomes dS
  // (the softmax's VJP P·(dP − D), dP rounded as the product's result, then the prologue's VJPs
  // in reverse: masked scores get 0, the scale, the converts' roundings; 0 past t or s).
  void score_grad(const std::string& x_at, const std::string& dp_at, int64_t n) {
    line("float x = {}, p = 0.f, ds = 0.f;", x_at);
    prologue();
    line("if (t < {} && k < {}) {{", a_.t, a_.s);
    indent_ += 2;
    line("p = sh_exp2((x - srow[r]) * {} - srow[{} + r]);", kLog2e, 2 * n);
    line("float dpr = {};", dp_at);
    round("dpr", dt_);
    line("ds = p * (dpr - srow[{} + r]);", n);
    for (size_t i = a_.prologue.size(); i-- > 1;) {
      const fusion::ScoreOp& op = a_.prologue[i];
      switch (op.kind) {
        case fusion::ScoreOp::Kind::Round: round("ds", a_.prologue[i - 1].dtype); break;
        case fusion::ScoreOp::Kind::Mul: line("ds = ds * {};", loop_code::literal(DType::F32, op.c)); round("ds", op.dtype); break;
        case fusion::ScoreOp::Kind::Div: line("ds = ds / {};", loop_code::literal(DType::F32, op.c)); round("ds", op.dtype); break;
        case fusion::ScoreOp::Kind::Mask: line("if (!({})) ds = 0.f;", kept(op)); break;
      }
    }
    indent_ -= 2;
    line("}}");
    line("{} = p, {} = ds;", x_at, dp_at);
  }

  // acc[n] += A·B over the `cols` columns of the 8-column accumulator tiles `from`, rounded to the
  // operand type: a 16-column step's A fragment is a pair of tiles (P·V, Pᵀ·dO, dSᵀ·Q, dS·K). B's
  // rows in __shared__ `src` (row stride ld).
  void from_accumulators(const char* acc, const char* from, const char* src, int64_t tiles, int64_t ld, int64_t cols) {
    auto pack = [&](const std::string& lo, const std::string& hi) {
      return fmt::format("{}({}, {})", dt_ == DType::BF16 ? "sh_pack_bf16" : "sh_pack_f16", lo, hi);
    };
    auto at = [&](const char* tile, int e) { return fmt::format("{}[{}][{}]", from, tile, e); };
    line("for (int kk = 0; kk < {}; ++kk) {{", cols / 16);
    line("  const unsigned a[4] = {{{}, {}, {}, {}}};", pack(at("2 * kk", 0), at("2 * kk", 1)), pack(at("2 * kk", 2), at("2 * kk", 3)),
         pack(at("2 * kk + 1", 0), at("2 * kk + 1", 1)), pack(at("2 * kk + 1", 2), at("2 * kk + 1", 3)));
    mma_tiles(acc, src, tiles, ld);
    line("}}");
  }

  // Output `o` (at `dst` + offset `start`: batch index bi's matrix) of this warp's rows (row
  // expression `row`, `rows` of them, `head` columns): row r, column n·8 + 2c + e % 2 is `value`
  // (of accumulator n, e) rounded to the output type.
  void store_rows(const char* dst, const char* start, const char* value, const fusion::AttentionLayout::Out& o, const char* row, int64_t rows,
                  int64_t head) {
    line("for (int n = 0; n < {}; ++n)", head / 8);
    line("  for (int e = 0; e < 4; ++e) {{");
    line("    const int r = {};", row);
    line("    if (r < {}) {}[{} + (i64)r * {} + (i64)(n * 8 + 2 * c + (e & 1)) * {}] = {};", rows, dst, start, o.rs, o.cs,
         loop_code::store_expr(g_.type(o.value).dtype, value));
    line("  }}");
  }

  // The prologue of one score x (row t, key k) as statements.
  void prologue() {
    for (const fusion::ScoreOp& op : a_.prologue) {
      switch (op.kind) {
        case fusion::ScoreOp::Kind::Round: break;
        case fusion::ScoreOp::Kind::Mul: line("x = x * {};", loop_code::literal(DType::F32, op.c)); break;
        case fusion::ScoreOp::Kind::Div: line("x = x / {};", loop_code::literal(DType::F32, op.c)); break;
        case fusion::ScoreOp::Kind::Mask: line("if (!({})) x = {};", kept(op), loop_code::literal(DType::F32, op.c)); break;
      }
      round("x", op.dtype);
    }
  }

  // Whether Mask op `op` keeps the score of row t, key k.
  std::string kept(const fusion::ScoreOp& op) const {
    if (a_.causal) return "k <= t";
    return fmt::format("t < {} && k < {} && (gm[om + (i64)t * {} + (i64)k * {}] != 0) == {}", a_.t, a_.s, a_.mask_ts, a_.mask_ss,
                       op.keep_if ? "true" : "false");
  }

  // x = x rounded to d (nothing for f32).
  void round(const char* x, DType d) {
    if (d != DType::F32) line("{} = {};", x, loop_code::rounded(d, x));
  }

  // The scores through the prologue, the running max and sum, the output rescaled; s becomes
  // exp(x − m) = 2^((x − m)·log2 e) (keys past s: 0). The difference comes first: x·log2 e −
  // m·log2 e, one fused multiply-add, is off by m·log2 e's rounding (±64 at a mask's fill of
  // −1e9), which weighs the key tiles of a row whose every score is the fill unequally.
  void softmax_step() {
    line("float mx[2] = {{m[0], m[1]}};");
    line("for (int j = 0; j < {}; ++j)", kKeys / 8);
    line("  for (int e = 0; e < 4; ++e) {{");
    indent_ += 4;
    line("const int t = t0 + warp * 16 + g + 8 * (e >> 1), k = s0 + j * 8 + 2 * c + (e & 1);");
    line("float x = s[j][e];");
    prologue();
    line("if (k >= {}) x = -__builtin_inff();", a_.s);
    line("s[j][e] = x;");
    line("mx[e >> 1] = fmaxf(mx[e >> 1], x);");
    indent_ -= 4;
    line("  }}");
    line("float base[2], rs[2] = {{0.f, 0.f}};  // base: the running max, 0 while it is −inf");
    line("for (int r = 0; r < 2; ++r) {{");
    line("  mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));");
    line("  mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));");
    line("  base[r] = mx[r] == -__builtin_inff() ? 0.f : mx[r];  // every score so far −inf: exp(−inf − 0) = 0");
    line("  const float alpha = sh_exp2((m[r] - base[r]) * {});", kLog2e);
    line("  m[r] = mx[r];");
    line("  l[r] *= alpha;");
    line("  for (int n = 0; n < {}; ++n) o[n][2 * r] *= alpha, o[n][2 * r + 1] *= alpha;", a_.dv / 8);
    line("}}");
    line("for (int j = 0; j < {}; ++j)", kKeys / 8);
    line("  for (int e = 0; e < 4; ++e) s[j][e] = sh_exp2((s[j][e] - base[e >> 1]) * {}), rs[e >> 1] += s[j][e];", kLog2e);
    line("l[0] += rs[0], l[1] += rs[1];  // this thread's part of the row sums (summed over the row's 4 threads at the end)");
  }

  // out[bi] rows t0.. = o / l, l summed over the row's threads.
  void store() {
    line("for (int r = 0; r < 2; ++r) {{");
    line("  l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);");
    line("  l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);");
    if (a_.row_max >= 0) {
      line("  const int t = t0 + warp * 16 + g + 8 * r;");
      line("  if (c == 0 && t < {0}) gmax[bi * {0} + t] = m[r], gsum[bi * {0} + t] = l[r];", a_.t);
    }
    line("}}");
    store_rows("go", "oo", "o[n][e] / l[e >> 1]", a_.out, "t0 + warp * 16 + g + 8 * (e >> 1)", a_.t, a_.dv);
  }
};

}  // namespace

std::string attention_kernel(const ir::Graph& g, const fusion::Schedule& s, const fusion::MemoryPlan& m, size_t index,
                             const std::string& name, Launch& l) {
  AttentionRenderer r(g, s, m, index);
  return s.steps[index].kind == fusion::StepKind::AttentionGrad ? r.run_grad(name, l) : r.run(name, l);
}

}  // namespace sheaf::cuda
