// io/scratch_dir.hpp — this process's private scratch directory (SPEC §7.9): the C++ compiler's
// inputs, outputs and logs, and the verified copy of each cached artifact that is loaded.
// It is made on first use by mkdtemp under $TMPDIR (else /tmp), mode 0700, so no other user can
// create, replace, read or link a file in it; every file in it is created with
// O_CREAT|O_EXCL|O_NOFOLLOW under a name never handed out before ("<dir>/<n><suffix>").
// The directory and its files are removed at exit (by the process that made it, not a fork) and
// on SIGINT, SIGTERM and SIGHUP, whose handler (installed only where the signal had its default
// action) removes them with async-signal-safe calls and then re-raises the signal.
#pragma once
#include <sys/types.h>

#include <string>
#include <string_view>

namespace sheaf {

// The private directory, made on the first call; throws SheafError when it cannot be made.
const std::string& scratch_dir();

// A fresh path in the private directory: "<dir>/<n><suffix>" (suffix such as ".cpp", ".so").
std::string scratch_path(std::string_view suffix);

// Creates `path` (O_CREAT|O_EXCL|O_NOFOLLOW, `mode`) and writes `bytes`; throws SheafError naming
// the file when it exists already or cannot be written.
void write_new_file(const std::string& path, std::string_view bytes, mode_t mode = 0600);

// Removes the private directory and its files now, with async-signal-safe calls only (for a
// handler that ends the process with _exit). Does nothing when it was never made.
void remove_scratch_dir_now() noexcept;

}  // namespace sheaf
