// python/worker.cpp — see worker.hpp.
#include "worker.hpp"

#include <pthread.h>
#include <pybind11/pybind11.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>

namespace py = pybind11;

namespace sheaf::python {
namespace {

thread_local bool t_on_worker = false;

class Worker {
 public:
  // Serialises callers: held from posting a job until it has finished.
  std::mutex exclusive;

  // False when the thread could not be created (the caller then runs jobs itself).
  bool start() {
    if (started_) return true;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, size_t{1} << 30);
    pthread_t t;
    started_ = pthread_create(&t, &attr, &Worker::main, this) == 0;
    pthread_attr_destroy(&attr);
    if (started_) pthread_detach(t);
    return started_;
  }

  void post(const std::function<void()>* job) {
    std::lock_guard g(m_);
    job_ = job;
    error_ = nullptr;
    done_ = false;
    wake_.notify_one();
  }

  // Waits up to `d` for the posted job; true when it has finished.
  bool wait_for(std::chrono::milliseconds d) {
    std::unique_lock l(m_);
    return finished_.wait_for(l, d, [&] { return done_; });
  }

  std::exception_ptr error() { return error_; }

 private:
  std::mutex m_;
  std::condition_variable wake_, finished_;
  const std::function<void()>* job_ = nullptr;
  std::exception_ptr error_;
  bool done_ = true, started_ = false;

  static void* main(void* self) {
    t_on_worker = true;
    static_cast<Worker*>(self)->loop();
    return nullptr;
  }

  void loop() {
    for (;;) {
      const std::function<void()>* job;
      {
        std::unique_lock l(m_);
        wake_.wait(l, [&] { return job_ != nullptr; });
        job = job_;
      }
      std::exception_ptr err;
      try {
        (*job)();
      } catch (...) {
        err = std::current_exception();
      }
      std::lock_guard g(m_);
      job_ = nullptr;
      error_ = err;
      done_ = true;
      finished_.notify_all();
    }
  }
};

// Never destroyed: the thread outlives every static destructor. A forked child has no worker
// thread, so it starts a fresh one (the parent's state is left behind).
Worker* g_worker = nullptr;

Worker& worker() {
  static bool registered = [] {
    pthread_atfork(nullptr, nullptr, [] { g_worker = nullptr; });
    return true;
  }();
  (void)registered;
  if (!g_worker) g_worker = new Worker;
  return *g_worker;
}

}  // namespace

bool on_worker() { return t_on_worker; }

void run_on_worker(const std::function<void()>& job, const std::function<void()>& on_interrupt) {
  if (on_worker()) {
    job();
    return;
  }
  Worker& w = worker();  // with the GIL held: one caller creates it
  std::optional<py::error_already_set> interrupted;
  std::exception_ptr err;
  {
    py::gil_scoped_release release;
    std::lock_guard one_at_a_time(w.exclusive);
    if (!w.start()) {  // no thread: run here (stack_exhausted() still stops deep recursion)
      try {
        job();
      } catch (...) {
        err = std::current_exception();
      }
    } else {
      w.post(&job);
      while (!w.wait_for(std::chrono::milliseconds(50))) {
        if (!interrupted && on_interrupt) {  // a job without a way to stop (teardown) is waited for
          py::gil_scoped_acquire gil;
          if (PyErr_CheckSignals() != 0) interrupted.emplace();  // fetches the KeyboardInterrupt
        }
        if (interrupted && on_interrupt) on_interrupt();  // again at every tick until the job stops
      }
      err = w.error();
    }
  }
  if (interrupted) throw std::move(*interrupted);
  if (err) std::rethrow_exception(err);
}

}  // namespace sheaf::python
