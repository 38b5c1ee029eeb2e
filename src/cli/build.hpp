// cli/build.hpp — the `sheaf build` subcommand (SPEC §8).
#pragma once

namespace sheaf {

// argv[0] is "build"; returns the exit status.
int build_main(int argc, char** argv);

}  // namespace sheaf
