// cli/trust_command.hpp — `sheaf trust DIR` (SPEC §7.9, §8): sign a copied `__sheaf__/` with this
// user's key so that its compiled code loads without a compiler.
#pragma once

namespace sheaf {

// argv[0] is "trust"; returns the exit status (1 when anything was refused or nothing could be signed).
int trust_main(int argc, char** argv);

}  // namespace sheaf
