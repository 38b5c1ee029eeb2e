// cli/main.cpp — the `sheaf` command line (SPEC §8): run a file, -c EXPR, or the REPL.
// The interpreter runs on a thread with a large stack so that deep (bounded) recursion in
// user programs reports "Maximum recursion depth exceeded" instead of overflowing.
#include <malloc.h>
#include <pthread.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "backend/cuda/driver.hpp"
#include "base/error.hpp"
#include "cli/build.hpp"
#include "cli/repl.hpp"
#include "dist/comm.hpp"
#include "eval/interp.hpp"
#include "obs/session.hpp"
#include "runtime/jit.hpp"
#include "value/printer.hpp"

namespace sheaf {
namespace {

struct Cli {
  std::string file;
  std::string expr;
  bool has_expr = false;
  std::vector<std::string> program_args;
  std::string device = "cpu";
  bool no_jit = false, no_progress = false, jit_profile = false;
  // Observability (SPEC §9).
  bool trace = false, blame = false;
  std::string trace_fns, trace_out = "console", trace_level = "normal", profile_out;
  std::vector<std::string> guards;
  int status = 0;
};

// The observability session the flags ask for; null when all are off (SPEC §9: no cost).
std::unique_ptr<obs::Session> observability(const Cli& cli, bool color) {
  obs::Options o;
  o.trace = cli.trace || !cli.trace_fns.empty();
  for (size_t start = 0; start < cli.trace_fns.size();) {
    size_t end = cli.trace_fns.find(',', start);
    if (end == std::string::npos) end = cli.trace_fns.size();
    if (end > start) o.trace_fns.push_back(cli.trace_fns.substr(start, end - start));
    start = end + 1;
  }
  o.trace_json = cli.trace_out == "json";
  o.level = cli.trace_level == "fast" ? obs::Level::Fast : cli.trace_level == "verbose" ? obs::Level::Verbose : obs::Level::Normal;
  for (const std::string& g : cli.guards) o.guards.push_back(obs::parse_guard_spec(g));
  o.blame = cli.blame;
  o.profile_out = cli.profile_out;
  if (o.profile_out.ends_with(".shf")) throw SheafError("--profile-out '" + o.profile_out + "': expected a .json file, not a program");
  o.color = color;
  if (!o.trace && o.guards.empty() && !o.blame && o.profile_out.empty()) return nullptr;
  return std::make_unique<obs::Session>(std::move(o), std::cerr);
}

bool prints_final(const Value& v) {
  if (v.is_nil()) return false;
  if (v.is_list() && !v.as_list().items.empty()) {
    for (const Value& x : v.as_list().items)
      if (!x.is_nil()) return true;
    return false;
  }
  return true;
}

int run_program(Cli& cli) {
  bool color = isatty(2) && !std::getenv("NO_COLOR");
  Interp in(std::cout);
  in.program_args = cli.program_args;
  in.progress_bars = isatty(2) && !cli.no_progress;
  try {
    in.obs = observability(cli, color);
  } catch (const SheafError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
  if (cli.no_jit) {
    in.jit.reset();
  } else {
    in.jit->profile = cli.jit_profile;
    if (cli.device == "cuda") {  // the driver and NVRTC load; running compiled code on the GPU is not built yet
      std::string why;
      std::optional<cuda::DeviceInfo> gpu = cuda::device_info(&why);
      if (!gpu) std::cerr << "error: device 'cuda': " << why << "; available devices: cpu, ref\n";
      else
        std::cerr << "error: device 'cuda': " << gpu->name << " (sm_" << gpu->major << gpu->minor
                  << ") was found, but this build cannot run compiled functions on a GPU yet; available devices: cpu, ref\n";
      return 2;
    }
    in.jit->device = cli.device == "ref" ? Device::Ref : Device::Cpu;
    // __sheaf__/ beside the entry file; -c and the REPL use the current directory (SPEC §7.9).
    std::filesystem::path base = cli.file.empty() || cli.has_expr ? std::filesystem::current_path()
                                                                  : std::filesystem::absolute(cli.file).parent_path();
    in.jit->cache.emplace((base / "__sheaf__").string());
  }
  struct ProfileAtExit {  // printed on success, error and guard breach alike
    Interp& in;
    bool on;
    ~ProfileAtExit() {
      if (in.obs) in.obs->finish();  // errors are reported; see run() for the exit status
      if (on && in.jit) in.jit->report(std::cerr);
    }
  } profile_at_exit{in, cli.jit_profile};
  try {
    Value v;
    if (cli.has_expr) {
      in.current_dir = std::filesystem::current_path().string();
      v = in.run_text(cli.expr, "<eval>");
    } else if (!cli.file.empty()) {
      std::filesystem::path p(cli.file);
      if (p.extension() != ".shf") std::cerr << "warning: '" << cli.file << "' does not have the .shf extension\n";
      v = in.run_file(cli.file);
    } else {
      return run_repl(in);
    }
    if (prints_final(v)) std::cout << print_value(v) << "\n";
    std::cout.flush();
    return !in.obs || in.obs->finish() ? 0 : 1;  // a profile that could not be written fails the run
  } catch (const SheafError& e) {
    std::cout.flush();
    std::cerr << render_error(e, color);
    return 1;
  } catch (const obs::GuardBreach& b) {
    std::cout.flush();
    std::cerr << b.what();
    return 1;
  }
}

// `--trace f1,f2` takes the next argument as the list only if it does not start with '-' or end
// in .shf (SPEC §8); CLI11 sees it as --trace-fns.
std::vector<std::string> trace_args(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--trace" && i + 1 < argc) {
      std::string next = argv[i + 1];
      bool list = !next.empty() && next[0] != '-' && !(next.size() >= 4 && next.compare(next.size() - 4, 4, ".shf") == 0);
      if (list) {
        out.push_back("--trace-fns=" + next);
        ++i;
        continue;
      }
    }
    if (a.rfind("--trace=", 0) == 0) a = "--trace-fns=" + a.substr(8);
    out.push_back(a);
  }
  return out;
}

// A data-parallel job (dist/comm.hpp) is joined before the program runs, on the thread that
// makes every MPI call. A rank that fails ends the whole job (the others would wait in their
// next collective); a rank that succeeds leaves it.
int run(Cli& cli) {
  try {
    dist::init();
  } catch (const SheafError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  int status = run_program(cli);
  if (status != 0 && dist::world_size() > 1) {
    std::cerr << fmt::format("error: {} failed (exit status {}); ending the job\n", dist::where(), status);
    dist::abort_job(status);
  }
  dist::finalize();
  return status;
}

void* run_thread(void* arg) {
  Cli* cli = static_cast<Cli*>(arg);
  cli->status = run(*cli);
  return nullptr;
}

int run_on_big_stack(Cli& cli) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, size_t{1} << 30);  // virtual; pages are committed on use
  pthread_t t;
  if (pthread_create(&t, &attr, run_thread, &cli) != 0) return run(cli);
  pthread_join(t, nullptr);
  pthread_attr_destroy(&attr);
  return cli.status;
}

}  // namespace
}  // namespace sheaf

int main(int argc, char** argv) {
  using namespace sheaf;
  // One malloc arena: the interpreter thread would otherwise get a secondary arena that returns
  // large tensor buffers to the kernel on every free (thousands of page faults per matmul).
  mallopt(M_ARENA_MAX, 1);
  if (argc > 1 && std::string_view(argv[1]) == "build") return build_main(argc - 1, argv + 1);
  Cli cli;
  CLI::App app{"Sheaf — a Lisp for writing and training neural networks as plain math.", "sheaf"};
  app.set_version_flag("--version", std::string("Sheaf ") + SHEAF_VERSION);
  auto* c = app.add_option("-c", cli.expr, "Evaluate the forms in EXPR and print the final value")->type_name("EXPR");
  app.add_option("file", cli.file, "Program to run (.shf)");
  app.add_option("args", cli.program_args, "Arguments for the program, (argv); after -- even those starting with -");
  app.add_option("--device", cli.device, "Backend: cpu (native code, default) or ref (reference executor)")
      ->check(CLI::IsMember({"cpu", "ref", "cuda"}));
  app.add_flag("--no-jit", cli.no_jit, "Interpret everything");
  app.add_flag("--jit-profile", cli.jit_profile, "Print the dispatch profile of compiled calls at exit");
  app.add_flag("--no-progress", cli.no_progress, "Disable progress bars");
  app.add_flag("--trace", cli.trace, "Trace every call (--trace f1,f2: calls of those functions and everything inside them)");
  app.add_option("--trace-fns", cli.trace_fns, "Functions to trace, comma-separated")->group("");
  app.add_option("--trace-out", cli.trace_out, "console (stderr, default) or json (sheaf_trace.jsonl)")
      ->check(CLI::IsMember({"console", "json"}));
  app.add_option("--trace-level", cli.trace_level, "fast (shapes), normal (min/max, default), verbose (mean too)")
      ->check(CLI::IsMember({"fast", "normal", "verbose"}));
  app.add_option("--guard", cli.guards, "Runtime guard [scope:]target:check, repeatable (e.g. no-nan, forward:h:range[-1,1])")
      ->type_name("SPEC")
      ->allow_extra_args(false);
  app.add_flag("--blame", cli.blame, "Print the profiler report at exit");
  app.add_option("--profile-out", cli.profile_out, "Write a Chrome trace-event JSON profile (Perfetto, chrome://tracing)")
      ->type_name("FILE.json");
  app.positionals_at_end(false);
  app.footer("With no FILE and no -c, starts the interactive REPL.\nAhead-of-time compilation: sheaf build FILE -o OUT [-S] [--config JSON] [--trace-with] (sheaf build --help).");
  try {
    std::vector<std::string> args = trace_args(argc, argv);
    std::reverse(args.begin(), args.end());  // CLI11 takes them last-first
    app.parse(args);
    cli.has_expr = c->count() > 0;
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  return run_on_big_stack(cli);
}
