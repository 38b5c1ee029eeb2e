// io/artifact_trust.hpp — when a compiled artifact (a CPU shared object, a CUDA cubin) may be
// loaded (SPEC §7.9). Native code is trusted only when this user made it or chose to trust it:
//   - the key: 32 random bytes from the OS in <key_dir()>/key, mode 0600, in a folder of mode
//     0700; both owned by this user and not writable (the key: not readable) by anyone else;
//   - the MAC: HMAC-SHA-256 (OpenSSL's libcrypto) of an artifact's exact bytes under the key,
//     written as 64 hex digits; an artifact is loaded only when its MAC matches;
//   - the files: an artifact and its folder must be owned by this user and writable by no one
//     else; an artifact must be a regular file (a FIFO, a device or a symbolic link is never
//     opened for reading: open with O_NOFOLLOW|O_NONBLOCK, then fstat).
// Bytes are read once (read_candidate), the MAC is checked on those bytes, and those same bytes
// are what the caller loads (a copy in the private scratch directory, or cuModuleLoadData), so
// swapping the file between check and use changes nothing.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace sheaf::trust {

inline constexpr size_t kKeyBytes = 32;
inline constexpr size_t kMaxArtifactBytes = size_t{1} << 30;  // 1 GiB: no artifact is near this

// HMAC-SHA-256 of `bytes` under `key`: 64 lowercase hex digits.
std::string hmac_sha256_hex(std::string_view key, std::string_view bytes);

// The folder of this user's key: $XDG_CACHE_HOME/sheaf when XDG_CACHE_HOME is an absolute path,
// else $HOME/.cache/sheaf, else <home directory from the password database>/.cache/sheaf.
std::string key_dir();

struct Key {
  std::string bytes;    // kKeyBytes when usable
  std::string path;     // <dir>/key
  std::string problem;  // non-empty: no usable key ("the key file ... is readable by others ...")
};
// The key in `dir`/key, made on first use: the folder (and missing parents) with mode 0700, the
// key written whole to a temporary file and link()ed to its name, which fails with EEXIST when
// another process made it first (then that key is read): racing processes agree on one key.
// A folder that is not this user's or that others may write (they could swap the key), or a key
// file that is not a regular file of kKeyBytes bytes owned by this user, or that group or others
// may read or write, is refused (the problem says so).
Key load_or_create_key(const std::string& dir);
// This user's key (load_or_create_key(key_dir())), loaded once per process.
const Key& user_key();

// The MAC of `bytes` under this user's key (HMAC-SHA-256 as kMacChars hex digits); throws
// SheafError when there is no usable key.
inline constexpr size_t kMacChars = 64;
std::string sign(std::string_view bytes);
// "" when `mac` is the MAC of `bytes` under this user's key (compared in constant time), else
// why not: "is not signed with this user's key (...)", or the key's problem.
std::string mac_problem(std::string_view bytes, std::string_view mac);

// "" when `dir` is a directory owned by this user that group and others cannot write; else why
// ("is writable by group or others (mode 0777)", "is owned by another user (uid 1000)", ...).
std::string folder_problem(const std::string& dir);
// Makes the folder `dir` when it does not exist (mode `mode`, less the umask; parents 0755).
void make_folder(const std::string& dir, mode_t mode = 0755);

// Writes `bytes` to `path` atomically (io/atomic_write.hpp), in a folder that passed
// folder_problem: whatever is at `path` and is not a regular file (a FIFO, a symbolic link, a
// device) is removed first, never written into or through.
void replace_file(const std::string& path, std::string_view bytes);

struct Candidate {
  std::string bytes;
  std::string problem;   // non-empty: not usable (a FIFO, owned by someone else, too large, ...)
  bool missing = false;  // no such file (problem says "is missing")
  mode_t mode = 0;       // its st_mode, when it could be opened
};
// The bytes of the file at `path`, read once from an fd opened with O_NOFOLLOW|O_NONBLOCK,
// when it is a regular file of at most `limit` bytes, owned by this user and not writable by
// group or others.
Candidate read_candidate(const std::string& path, size_t limit = kMaxArtifactBytes);

}  // namespace sheaf::trust
