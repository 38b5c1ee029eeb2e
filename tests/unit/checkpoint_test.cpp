// tests/unit/checkpoint_test.cpp — `checkpoint` (SPEC §5.10) trades recomputation for memory.
// A deep MLP (16 tanh layers of width 256, batch 256, in 4 blocks of 4 layers) is differentiated
// twice: plainly, and with every block wrapped in (checkpoint block). The gradient step of each is
// traced, optimised and planned for the CPU backend as the JIT does, and the peak of its arena
// (the bytes the compiled step holds for intermediate values at once) is compared: with
// checkpoint only each block's input is kept for the backward pass, and the activations inside a
// block are recomputed when its gradient is due, so the peak must fall by at least half. The gradients of both, computed compiled, must be equal (to the tolerance of
// value_compare.hpp: the recomputation runs the same ops in the same order). The IR of the
// checkpointed step must hold the optimization_barrier that keeps the recomputation in the
// backward pass (without it CSE would merge the recomputed layers with the forward ones).
#include <gtest/gtest.h>

#include <sstream>

#include "backend/cpu/program.hpp"
#include "eval/interp.hpp"
#include "passes/pipeline.hpp"
#include "runtime/jit.hpp"
#include "trace/tracer.hpp"
#include "value_compare.hpp"

namespace sheaf {
namespace {

constexpr const char* kProgram = R"(
(defn layer [w h] (tanh (@ h w)))
(defn block [ws h] (reduce (fn [h w] (layer w h)) h ws))
(defn loss-plain [ws x] (mean (* (reduce (fn [h b] (block b h)) x ws) 0.5)))
(defn loss-ckpt [ws x] (mean (* (reduce (fn [h b] ((checkpoint block) b h)) x ws) 0.5)))
(defn step-plain [ws x] ((grad loss-plain) ws x))
(defn step-ckpt [ws x] ((grad loss-ckpt) ws x))
(def ws (map (fn [b] (map (fn [i] (* (random-normal (+ (* 4 b) i) [256 256]) 0.06)) (range 4))) (range 4)))
(def x (random-normal 99 [256 256]))
)";

struct Planned {
  int64_t arena_bytes = 0;
  bool barrier = false;
};

Value global_value(Interp& in, const char* name) { return in.global(symbols::intern(name))->value; }

// The step traced and optimised as the JIT does, then planned for the CPU backend.
Planned plan_of(Interp& in, const char* fn) {
  std::vector<Value> args{global_value(in, "ws"), global_value(in, "x")};
  trace::Traced t = trace::trace_call(in, global_value(in, fn), args, SrcLoc{}, false);
  passes::optimize(t.graph);
  Planned p;
  for (const ir::Node& n : t.graph.nodes) p.barrier |= n.op == ir::Op::OptimizationBarrier;
  p.arena_bytes = cpu::prepare(t.graph).memory().arena_bytes;
  return p;
}

TEST(Checkpoint, PeakMemoryFallsAndGradientsStayEqual) {
  std::ostringstream out;
  Interp in{out};
  in.run_text(kProgram, "<checkpoint>");
  Planned plain = plan_of(in, "step-plain"), ckpt = plan_of(in, "step-ckpt");
  std::cout << "[ checkpoint ] arena peak: plain " << plain.arena_bytes << " bytes, checkpointed " << ckpt.arena_bytes << " bytes\n";
  EXPECT_FALSE(plain.barrier);
  EXPECT_TRUE(ckpt.barrier);
  EXPECT_LT(ckpt.arena_bytes * 2, plain.arena_bytes);

  Value a = in.run_text("(step-plain ws x)", "<plain>");
  Value b = in.run_text("(step-ckpt ws x)", "<ckpt>");
  std::string diff = testing_support::difference(a, b, "grads");
  EXPECT_TRUE(diff.empty()) << diff;
  EXPECT_EQ(jit_of(in)->stats().fallbacks, 0u);
}

}  // namespace
}  // namespace sheaf
