// backend/cuda/cudnn_plugin.cpp — libsheaf_cudnn.so (cudnn_abi.h): cuDNN's fused scaled-dot-product
// attention through cudnn-frontend graphs, in the frontend's dynamic-loading mode (cuDNN's entry
// points come from the libcudnn handle the binary passes; cudart, which the frontend asks for a
// few things, by its soname). Per problem one forward graph — Q, K, V in; O out, and with a
// backward the rows' f32 log-sum-exp ("stats") — and one backward graph — Q, K, V, O, dO, stats
// in; dQ, dK, dV out —, each validated, lowered, its heuristic's plans (mode A) checked and built
// once; running one only queues it on the stream with the tensors' addresses.
// Building a plan compiles cuDNN's kernel for it (seconds on a machine's first run, before the
// driver caches it), so the backward graph builds on a second thread while the forward builds on
// the caller's: backward graphs have a cuDNN handle of their own (a handle serves one thread at a
// time), on the same stream, and the thread makes the caller's CUDA context current first.
// SHEAF_CUDNN_SERIAL_BUILD=1 builds them one after the other, to measure the difference; a
// two-thread build that fails is tried again that way before the problem is refused.
// SHEAF_CUDNN_ENGINES=precompiled takes only engines that compile nothing at run time.
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
#include <cudnn_frontend.h>

#include "backend/cuda/cudnn_abi.h"

// The library the frontend resolves cuDNN's entry points from.
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend

namespace {

namespace fe = cudnn_frontend;
using Graph = std::shared_ptr<fe::graph::Graph>;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

// The tensors' uids in a graph's variant pack.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

std::vector<int64_t> dims(int64_t b, int64_t h, int64_t rows, int64_t cols) { return {b, h, rows, cols}; }
std::vector<int64_t> strides(const int64_t (&x)[4]) { return {x[0], x[1], x[2], x[3]}; }

void check(fe::error_t e, const char* what) {
  if (e.is_bad()) throw std::runtime_error(std::string(what) + ": " + e.get_message());
}

TensorPtr input(const Graph& g, const char* name, Uid uid, std::vector<int64_t> d, const int64_t (&x)[4]) {
  return g->tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(std::move(d)).set_stride(strides(x)));
}

void output(const TensorPtr& t, Uid uid, std::vector<int64_t> d, const int64_t (&x)[4]) {
  t->set_output(true).set_uid(uid).set_dim(std::move(d)).set_stride(strides(x));
}

Graph new_graph(const sheaf_sdpa_problem& a, int cc) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(a.bf16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT)
      .set_sm_version(cc);
  return g;
}

Graph forward_graph(const sheaf_sdpa_problem& a, int cc) {
  Graph g = new_graph(a, cc);
  TensorPtr q = input(g, "Q", kQ, dims(a.b, a.h, a.t, a.d), a.q), k = input(g, "K", kK, dims(a.b, a.h, a.s, a.d), a.k),
            v = input(g, "V", kV, dims(a.b, a.h, a.s, a.dv), a.v);
  auto options = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(a.grad != 0).set_attn_scale(a.scale);
  if (a.causal) options.set_causal_mask(true);
  auto [o, stats] = g->sdpa(q, k, v, options);
  output(o, kO, dims(a.b, a.h, a.t, a.dv), a.o);
  if (a.grad) {
    output(stats, kStats, dims(a.b, a.h, a.t, 1), a.stats);
    stats->set_data_type(fe::DataType_t::FLOAT);
  }
  return g;
}

Graph backward_graph(const sheaf_sdpa_problem& a, int cc) {
  Graph g = new_graph(a, cc);
  TensorPtr q = input(g, "Q", kQ, dims(a.b, a.h, a.t, a.d), a.q), k = input(g, "K", kK, dims(a.b, a.h, a.s, a.d), a.k),
            v = input(g, "V", kV, dims(a.b, a.h, a.s, a.dv), a.v), o = input(g, "O", kO, dims(a.b, a.h, a.t, a.dv), a.o),
            d_o = input(g, "dO", kDO, dims(a.b, a.h, a.t, a.dv), a.d_o),
            stats = input(g, "stats", kStats, dims(a.b, a.h, a.t, 1), a.stats);
  stats->set_data_type(fe::DataType_t::FLOAT);
  auto options = fe::graph::SDPA_backward_attributes().set_name("sdpa_backward").set_attn_scale(a.scale);
  if (a.causal) options.set_causal_mask(true);
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, d_o, stats, options);
  output(dq, kDQ, dims(a.b, a.h, a.t, a.d), a.dq);
  output(dk, kDK, dims(a.b, a.h, a.s, a.d), a.dk);
  output(dv, kDV, dims(a.b, a.h, a.s, a.dv), a.dv_);
  return g;
}

// Whether SHEAF_CUDNN_ENGINES=precompiled asks for engines whose kernels ship compiled: the
// heuristic's and the fallback list's, those that compile their kernels at run time left out.
// Those (the heuristic's usual choice for attention) cost a machine's first run seconds; this
// measures what the others cost instead. Unset or "any": the heuristic's first that builds.
bool precompiled_engines() {
  const char* e = std::getenv("SHEAF_CUDNN_ENGINES");
  if (!e || std::string(e) == "any") return false;
  if (std::string(e) == "precompiled") return true;
  throw std::runtime_error("SHEAF_CUDNN_ENGINES: '" + std::string(e) + "' is neither 'precompiled' nor 'any'");
}

// A graph lowered to its plan; its workspace's bytes.
int64_t build(const Graph& g, cudnnHandle_t handle) {
  check(g->validate(), "validate");
  check(g->build_operation_graph(handle), "build_operation_graph");
  if (precompiled_engines()) {
    check(g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}), "create_execution_plans");
    g->deselect_behavior_notes({fe::BehaviorNote_t::RUNTIME_COMPILATION});  // check_support fails when none is left
  } else {
    check(g->create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans");
  }
  check(g->check_support(), "check_support");
  check(g->build_plans(), "build_plans");
  int64_t bytes = 0;
  check(g->get_workspace_size(bytes), "get_workspace_size");
  return bytes;
}

cudnnHandle_t new_handle(void* stream) {
  cudnnHandle_t h = nullptr;
  if (fe::detail::create_handle(&h) != CUDNN_STATUS_SUCCESS) throw std::runtime_error("cudnnCreate failed");
  if (fe::detail::set_stream(h, static_cast<cudaStream_t>(stream)) != CUDNN_STATUS_SUCCESS) {
    (void)fe::detail::destroy_handle(h);
    throw std::runtime_error("cudnnSetStream failed");
  }
  return h;
}

struct Context {
  void* stream = nullptr;
  cudnnHandle_t handle = nullptr;           // forward graphs
  cudnnHandle_t backward_handle = nullptr;  // backward graphs: created with the first
  int cc = 0;
  struct Plans {
    Graph forward, backward;  // backward: null without a gradient
  };
  std::vector<Plans> plans;  // by the index sheaf_cudnn_prepare gave
  ~Context() {
    plans.clear();
    for (cudnnHandle_t h : {handle, backward_handle})
      if (h) (void)fe::detail::destroy_handle(h);
  }
};

// The CUDA driver's context calls, from the libcuda the binary loaded; null when it is not loaded.
struct ContextCalls {
  int (*get)(void**) = nullptr;
  int (*set)(void*) = nullptr;
};
const ContextCalls& context_calls() {
  static const ContextCalls calls = [] {
    ContextCalls c;
    for (const char* name : {"libcuda.so.1", "libcuda.so"})
      if (void* cuda = dlopen(name, RTLD_NOW | RTLD_NOLOAD)) {
        c.get = reinterpret_cast<int (*)(void**)>(dlsym(cuda, "cuCtxGetCurrent"));
        c.set = reinterpret_cast<int (*)(void*)>(dlsym(cuda, "cuCtxSetCurrent"));
        break;
      }
    return c;
  }();
  return calls;
}

// Builds the forward and backward plans of problem `p` into `plans`, the forward with c's handle
// on this thread and the backward with c's backward handle on a second thread when the CUDA
// context can be made current there: their workspaces' bytes. Should the two-thread build fail,
// both graphs are made again and built in turn: a failure only a concurrent build shows costs
// time, not cuDNN's attention; one the serial build shows too is reported.
void build_both(Context& c, const sheaf_sdpa_problem& p, Context::Plans& plans, int64_t& forward_bytes, int64_t& backward_bytes) {
  auto make = [&] { plans.forward = forward_graph(p, c.cc), plans.backward = backward_graph(p, c.cc); };
  auto in_turn = [&] {
    make();
    forward_bytes = build(plans.forward, c.handle);
    backward_bytes = build(plans.backward, c.backward_handle);
  };
  const ContextCalls& calls = context_calls();
  void* cuda_context = nullptr;
  const char* serial = std::getenv("SHEAF_CUDNN_SERIAL_BUILD");
  if ((serial && std::string(serial) == "1") || !calls.get || !calls.set || calls.get(&cuda_context) != 0 || !cuda_context)
    return in_turn();
  try {
    make();
    std::future<int64_t> backward = std::async(std::launch::async, [&] {  // waited for also when the forward throws
      if (calls.set(cuda_context) != 0) throw std::runtime_error("cuCtxSetCurrent failed on the build thread");
      return build(plans.backward, c.backward_handle);
    });
    forward_bytes = build(plans.forward, c.handle);
    backward_bytes = backward.get();
  } catch (const std::exception&) {
    in_turn();
  }
}

void message(const std::string& m, char* err, int64_t size) {
  if (!err || size <= 0) return;
  const size_t n = std::min(m.size(), static_cast<size_t>(size - 1));
  std::memcpy(err, m.data(), n);
  err[n] = 0;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int sheaf_cudnn_abi(void) { return SHEAF_CUDNN_ABI; }

__attribute__((visibility("default"))) void* sheaf_cudnn_open(void* cudnn, void* stream, int cc, char* err, int64_t err_size) {
  fe::cudnn_dlhandle = cudnn;
  auto c = std::make_unique<Context>();
  c->cc = cc;
  c->stream = stream;
  try {
    if (fe::detail::get_backend_version() < 90000) throw std::runtime_error("cuDNN " + std::to_string(fe::detail::get_backend_version()) + " is older than 9");
    c->handle = new_handle(stream);
  } catch (const std::exception& e) {
    message(e.what(), err, err_size);
    return nullptr;
  }
  return c.release();
}

__attribute__((visibility("default"))) void sheaf_cudnn_close(void* ctx) { delete static_cast<Context*>(ctx); }

__attribute__((visibility("default"))) int64_t sheaf_cudnn_version(void*) {
  try {
    return static_cast<int64_t>(fe::detail::get_backend_version());
  } catch (const std::exception&) {
    return 0;
  }
}

__attribute__((visibility("default"))) int sheaf_cudnn_prepare(void* ctx, const sheaf_sdpa_problem* p, int64_t* plan,
                                                               int64_t* forward_bytes, int64_t* backward_bytes, char* err,
                                                               int64_t err_size) {
  auto* c = static_cast<Context*>(ctx);
  try {
    Context::Plans plans;
    *backward_bytes = 0;
    if (p->grad) {
      if (!c->backward_handle) c->backward_handle = new_handle(c->stream);
      build_both(*c, *p, plans, *forward_bytes, *backward_bytes);
    } else {
      plans.forward = forward_graph(*p, c->cc);
      *forward_bytes = build(plans.forward, c->handle);
    }
    *plan = static_cast<int64_t>(c->plans.size());
    c->plans.push_back(std::move(plans));
    return 0;
  } catch (const std::exception& e) {
    message(e.what(), err, err_size);
    return -1;
  }
}

__attribute__((visibility("default"))) int sheaf_cudnn_validate(void* cudnn, const sheaf_sdpa_problem* p, int cc, char* err,
                                                                int64_t err_size) {
  fe::cudnn_dlhandle = cudnn;
  try {
    check(forward_graph(*p, cc)->validate(), "forward: validate");
    if (p->grad) check(backward_graph(*p, cc)->validate(), "backward: validate");
    return 0;
  } catch (const std::exception& e) {
    message(e.what(), err, err_size);
    return -1;
  }
}

__attribute__((visibility("default"))) int sheaf_cudnn_run(void* ctx, int64_t plan, int backward, const sheaf_sdpa_pointers* x,
                                                           void* workspace, char* err, int64_t err_size) {
  auto* c = static_cast<Context*>(ctx);
  try {
    if (plan < 0 || plan >= static_cast<int64_t>(c->plans.size())) throw std::runtime_error("no such plan");
    const Context::Plans& plans = c->plans[static_cast<size_t>(plan)];
    const Graph& g = backward ? plans.backward : plans.forward;
    if (!g) throw std::runtime_error("the problem has no backward");
    std::unordered_map<int64_t, void*> pack{{kQ, x->q}, {kK, x->k}, {kV, x->v}, {kO, x->o}};
    if (plans.backward) pack.emplace(kStats, x->stats);
    if (backward) pack.insert({{kDO, x->d_o}, {kDQ, x->dq}, {kDK, x->dk}, {kDV, x->dv}});
    check(g->execute(backward ? c->backward_handle : c->handle, pack, workspace), "execute");
    return 0;
  } catch (const std::exception& e) {
    message(e.what(), err, err_size);
    return -1;
  }
}

}  // extern "C"
