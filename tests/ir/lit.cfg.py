# tests/ir/lit.cfg.py — lit configuration for the IR and StableHLO golden tests.
# Each tests/ir/*.shf is a small program with `;; RUN:` lines (run by lit) and FileCheck
# patterns; `%sheaf` is the binary under test (lit --param sheaf=PATH, set by tests/CMakeLists.txt).
import os

import lit.formats

config.name = "sheaf-ir"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".shf"]
config.excludes = ["inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = lit_config.params.get("exec_root", os.path.join(os.path.dirname(__file__), "..", "..", "build", "tests", "ir"))
config.substitutions.append(("%sheaf", lit_config.params["sheaf"]))
config.environment["PATH"] = "/usr/lib/llvm-14/bin:" + os.environ.get("PATH", "")
config.environment["NO_COLOR"] = "1"
# the device of runs without --device (tests/CMakeLists.txt: cpu, also on a machine with a GPU)
if "SHEAF_DEVICE" in os.environ:
    config.environment["SHEAF_DEVICE"] = os.environ["SHEAF_DEVICE"]
