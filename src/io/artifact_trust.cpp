// io/artifact_trust.cpp — the per-user key, HMAC-SHA-256 through OpenSSL, and the file checks
// that come before an artifact is loaded (see artifact_trust.hpp).
#include "io/artifact_trust.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "base/error.hpp"
#include "io/atomic_write.hpp"

namespace sheaf::trust {
namespace {

namespace fs = std::filesystem;

std::string errno_text(int err) { return std::strerror(err); }

const char* kind_of(mode_t m) {
  if (S_ISREG(m)) return "a regular file";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISLNK(m)) return "a symbolic link";
  return "an unknown kind of file";
}

// Who may change it: "" when only this user, else why not.
std::string owner_problem(const struct stat& st) {
  if (st.st_uid != ::geteuid()) return fmt::format("is owned by another user (uid {})", st.st_uid);
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return fmt::format("is writable by group or others (mode {:04o})", st.st_mode & 07777);
  return "";
}

// Reads exactly `size` bytes of `fd` into `out`; false when a read fails or the file does not
// hold exactly `size` bytes (it changed while read).
bool read_all(int fd, size_t size, std::string& out) {
  out.resize(size);
  size_t done = 0;
  while (done < size) {
    ssize_t r = ::read(fd, out.data() + done, size - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    done += static_cast<size_t>(r);
  }
  char extra;
  if (done != size || ::read(fd, &extra, 1) != 0) return false;  // changed size while read
  return true;
}

// Each missing folder on the way to `dir`, made with `mode`.
void make_parents(const fs::path& dir, mode_t mode) {
  std::error_code ec;
  if (dir.empty() || fs::exists(dir, ec)) return;
  make_parents(dir.parent_path(), mode);
  if (::mkdir(dir.c_str(), mode) != 0 && errno != EEXIST)
    throw SheafError(fmt::format("cannot create the folder {}: {}", dir.string(), errno_text(errno)));
}

// The key at `path` when it exists (missing: problem empty and bytes empty).
Key read_key(const std::string& path) {
  Key k;
  k.path = path;
  Candidate c = read_candidate(path, kKeyBytes);
  if (c.missing) return k;
  if (c.problem.empty() && (c.mode & 077))
    c.problem = fmt::format("is readable or writable by group or others (mode {:04o})", c.mode & 07777);
  if (c.problem.empty() && c.bytes.size() != kKeyBytes) c.problem = fmt::format("holds {} bytes, not {}", c.bytes.size(), kKeyBytes);
  if (!c.problem.empty())
    k.problem = fmt::format("the key file {} {}: fix it (chmod 600, owned by you) or delete it to make a new key "
                            "(artifacts signed with the old one are then rebuilt)",
                            path, c.problem);
  else
    k.bytes = std::move(c.bytes);
  return k;
}

// A new key, written whole to a temporary file in `dir` and linked to `path` (see the header).
void create_key(const std::string& dir, const std::string& path) {
  unsigned char key[kKeyBytes];
  for (size_t got = 0; got < sizeof key;) {
    ssize_t r = ::getrandom(key + got, sizeof key - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw SheafError(fmt::format("cannot get random bytes for a key: {}", errno_text(errno)));
    got += static_cast<size_t>(r);
  }
  std::string tmp = dir + "/.key.XXXXXX";
  int fd = ::mkostemp(tmp.data(), O_CLOEXEC);  // mode 0600
  if (fd < 0) throw SheafError(fmt::format("cannot create a key in {}: {}", dir, errno_text(errno)));
  int err = 0;
  errno = 0;
  if (::write(fd, key, sizeof key) != static_cast<ssize_t>(sizeof key) || ::fsync(fd) != 0) err = errno ? errno : EIO;
  if (::close(fd) != 0 && !err) err = errno;
  if (!err && ::link(tmp.c_str(), path.c_str()) != 0 && errno != EEXIST) err = errno;
  ::unlink(tmp.c_str());
  OPENSSL_cleanse(key, sizeof key);
  if (err) throw SheafError(fmt::format("cannot create the key {}: {}", path, errno_text(err)));
}

}  // namespace

std::string hmac_sha256_hex(std::string_view key, std::string_view bytes) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(bytes.data()),
            bytes.size(), mac, &n))
    throw SheafError("internal: HMAC-SHA-256 failed in libcrypto");
  std::string hex;
  for (unsigned int i = 0; i < n; ++i) hex += fmt::format("{:02x}", mac[i]);
  return hex;
}

std::string key_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/') return fmt::format("{}/sheaf", x);
  if (const char* h = std::getenv("HOME"); h && *h == '/') return fmt::format("{}/.cache/sheaf", h);
  if (const passwd* pw = ::getpwuid(::geteuid()); pw && pw->pw_dir && *pw->pw_dir == '/')
    return fmt::format("{}/.cache/sheaf", pw->pw_dir);
  return "";
}

Key load_or_create_key(const std::string& dir) {
  Key k;
  if (dir.empty()) {
    k.problem = "there is no folder for this user's key (set HOME or XDG_CACHE_HOME)";
    return k;
  }
  const std::string path = dir + "/key";
  try {
    make_parents(dir, 0700);
    if (std::string why = folder_problem(dir); !why.empty())
      return Key{"", path, fmt::format("the key folder {} {}: others could replace the key", dir, why)};
    if (k = read_key(path); !k.bytes.empty() || !k.problem.empty()) return k;
    create_key(dir, path);
    k = read_key(path);
    if (k.bytes.empty() && k.problem.empty()) k.problem = fmt::format("the key file {} vanished as it was made", path);
  } catch (const SheafError& e) {
    k = Key{"", path, e.what()};
  }
  return k;
}

const Key& user_key() {
  static const Key key = load_or_create_key(key_dir());
  return key;
}

std::string sign(std::string_view bytes) {
  const Key& k = user_key();
  if (!k.problem.empty()) throw SheafError("cannot sign with this user's key: " + k.problem);
  return hmac_sha256_hex(k.bytes, bytes);
}

std::string mac_problem(std::string_view bytes, std::string_view mac) {
  const Key& k = user_key();
  if (!k.problem.empty()) return "cannot be checked: " + k.problem;
  if (mac.empty()) return "is not signed (no MAC in its entry)";
  std::string want = hmac_sha256_hex(k.bytes, bytes);
  if (mac.size() != want.size() || CRYPTO_memcmp(mac.data(), want.data(), want.size()) != 0)
    return "is not signed with this user's key (made by another user or machine, or changed since)";
  return "";
}

std::string folder_problem(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return fmt::format("cannot be read ({})", errno_text(errno));
  if (!S_ISDIR(st.st_mode)) return fmt::format("is {}, not a folder", kind_of(st.st_mode));
  return owner_problem(st);
}

void make_folder(const std::string& dir, mode_t mode) {
  fs::path p(dir);
  make_parents(p.parent_path(), 0755);
  if (::mkdir(dir.c_str(), mode) != 0 && errno != EEXIST)
    throw SheafError(fmt::format("cannot create the folder {}: {}", dir, errno_text(errno)));
}

void replace_file(const std::string& path, std::string_view bytes) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && ::unlink(path.c_str()) != 0)
    throw SheafError(fmt::format("cannot replace {} ({}): {}", path, kind_of(st.st_mode), errno_text(errno)));
  write_file_atomic(path, bytes);
}

Candidate read_candidate(const std::string& path, size_t limit) {
  Candidate c;
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    int err = errno;
    c.missing = err == ENOENT;
    c.problem = err == ENOENT ? "is missing" : err == ELOOP ? "is a symbolic link" : fmt::format("cannot be opened ({})", errno_text(err));
    return c;
  }
  auto check_and_read = [&]() -> std::string {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return fmt::format("cannot be read ({})", errno_text(errno));
    c.mode = st.st_mode;
    if (!S_ISREG(st.st_mode)) return fmt::format("is {}", kind_of(st.st_mode));
    if (std::string why = owner_problem(st); !why.empty()) return why;
    if (static_cast<uint64_t>(st.st_size) > limit) return fmt::format("is larger than {} bytes", limit);
    if (!read_all(fd, static_cast<size_t>(st.st_size), c.bytes)) return "changed while it was read";
    return "";
  };
  c.problem = check_and_read();
  ::close(fd);
  if (!c.problem.empty()) c.bytes.clear();
  return c;
}

}  // namespace sheaf::trust
