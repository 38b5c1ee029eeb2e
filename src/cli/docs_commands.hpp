// cli/docs_commands.hpp — the documentation subcommands of the CLI.
#pragma once

namespace sheaf {

// `sheaf reference [-o FILE]`: prints (or writes atomically) the generated reference.
int reference_main(int argc, char** argv);
// `sheaf init-ai [DIR]`: writes DIR/sheaf-context.md (default: the current directory); refuses to
// overwrite an existing file.
int init_ai_main(int argc, char** argv);

}  // namespace sheaf
