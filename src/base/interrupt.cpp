// base/interrupt.cpp — the per-thread stop flag of running compiled calls (see interrupt.hpp).
#include "base/interrupt.hpp"

namespace sheaf {
namespace {

const std::atomic<bool> kNever{false};
thread_local const std::atomic<bool>* t_flag = &kNever;

}  // namespace

StopFlagScope::StopFlagScope(const std::atomic<bool>* flag) : saved_(t_flag) { t_flag = flag ? flag : &kNever; }
StopFlagScope::~StopFlagScope() { t_flag = saved_; }

const std::atomic<bool>& stop_flag() { return *t_flag; }

}  // namespace sheaf
