// tests/unit/artifact_trust_test.cpp — the trust checks of compiled artifacts (io/artifact_trust.hpp)
// and the private scratch directory (io/scratch_dir.hpp), SPEC §7.9: HMAC-SHA-256 against RFC 4231,
// the per-user key file (made once even by racing threads, refused when others may read it or
// it is not this user's), and the file checks (a FIFO is refused without blocking, a symbolic
// link is not followed, a file or folder others may write is refused).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "io/artifact_trust.hpp"
#include "io/scratch_dir.hpp"

namespace sheaf {
namespace {

namespace fs = std::filesystem;

// A fresh folder of mode 0700, removed with the test.
struct TempDir {
  std::string path;
  TempDir() {
    std::string p = (fs::temp_directory_path() / "sheaf-trust-test-XXXXXX").string();
    EXPECT_NE(::mkdtemp(p.data()), nullptr);
    path = p;
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, ec);
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

void put(const std::string& path, const std::string& bytes, mode_t mode = 0600) {
  std::ofstream(path, std::ios::binary) << bytes;
  ::chmod(path.c_str(), mode);
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  ::stat(path.c_str(), &st);
  return st.st_mode & 07777;
}

TEST(ArtifactTrust, HmacSha256MatchesRfc4231) {
  // RFC 4231, test cases 1 and 2.
  EXPECT_EQ(trust::hmac_sha256_hex(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(trust::hmac_sha256_hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(ArtifactTrust, MacOfThisUsersKeyIsCheckedOnExactBytes) {
  const std::string mac = trust::sign("code");
  EXPECT_EQ(mac.size(), 64u);
  EXPECT_EQ(trust::mac_problem("code", mac), "");
  EXPECT_NE(trust::mac_problem("code!", mac).find("not signed with this user's key"), std::string::npos);
  EXPECT_NE(trust::mac_problem("code", trust::hmac_sha256_hex(std::string(32, 'x'), "code")).find("not signed"), std::string::npos);
  EXPECT_NE(trust::mac_problem("code", "").find("not signed"), std::string::npos);
  EXPECT_NE(trust::mac_problem("code", mac.substr(1)).find("not signed"), std::string::npos);
}

TEST(ArtifactTrust, KeyIsMadeOnceWithPrivateModes) {
  TempDir t;
  const std::string dir = t / "cache/sheaf";  // missing parents are made too
  trust::Key k = trust::load_or_create_key(dir);
  ASSERT_EQ(k.problem, "");
  EXPECT_EQ(k.bytes.size(), trust::kKeyBytes);
  EXPECT_EQ(k.path, dir + "/key");
  EXPECT_EQ(mode_of(k.path), 0600u);
  EXPECT_EQ(mode_of(dir), 0700u);
  EXPECT_EQ(trust::load_or_create_key(dir).bytes, k.bytes);  // read back, not remade
  EXPECT_NE(trust::load_or_create_key(t / "other").bytes, k.bytes);  // random: another folder, another key
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1);  // no temporary left behind
}

TEST(ArtifactTrust, RacingProcessesAgreeOnOneKey) {
  TempDir t;
  std::vector<std::string> keys(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < keys.size(); ++i)
    threads.emplace_back([&, i] { keys[i] = trust::load_or_create_key(t / "sheaf").bytes; });
  for (std::thread& th : threads) th.join();
  ASSERT_EQ(keys[0].size(), trust::kKeyBytes);
  for (const std::string& k : keys) EXPECT_EQ(k, keys[0]);
}

TEST(ArtifactTrust, KeyFilesOthersCouldReadOrChangeAreRefused) {
  TempDir t;
  const std::string dir = t / "sheaf";
  ASSERT_EQ(trust::load_or_create_key(dir).problem, "");
  const std::string key = dir + "/key";
  ::chmod(key.c_str(), 0644);
  trust::Key k = trust::load_or_create_key(dir);
  EXPECT_TRUE(k.bytes.empty());
  EXPECT_NE(k.problem.find("is readable or writable by group or others (mode 0644)"), std::string::npos) << k.problem;
  EXPECT_NE(k.problem.find(key), std::string::npos) << k.problem;
  ::chmod(key.c_str(), 0600);
  EXPECT_EQ(trust::load_or_create_key(dir).problem, "");
  if (::geteuid() == 0) {  // only root can give a file away
    ASSERT_EQ(::chown(key.c_str(), 65534, 65534), 0);
    EXPECT_NE(trust::load_or_create_key(dir).problem.find("is owned by another user (uid 65534)"), std::string::npos);
  }
  fs::remove(key);
  put(dir + "/elsewhere", std::string(32, 'k'));
  fs::create_symlink(dir + "/elsewhere", key);
  EXPECT_NE(trust::load_or_create_key(dir).problem.find("is a symbolic link"), std::string::npos);
  fs::remove(key);
  put(key, "short");
  EXPECT_NE(trust::load_or_create_key(dir).problem.find("holds 5 bytes, not 32"), std::string::npos);
  fs::remove(key);
  ASSERT_EQ(trust::load_or_create_key(dir).problem, "");
  ::chmod(dir.c_str(), 0777);  // anyone could have replaced the key, or could replace a new one
  k = trust::load_or_create_key(dir);
  EXPECT_TRUE(k.bytes.empty());
  EXPECT_NE(k.problem.find("is writable by group or others (mode 0777)"), std::string::npos) << k.problem;
  fs::remove(key);
  k = trust::load_or_create_key(dir);
  EXPECT_NE(k.problem.find("is writable by group or others (mode 0777)"), std::string::npos) << k.problem;
  EXPECT_FALSE(fs::exists(key));
  EXPECT_NE(trust::load_or_create_key("").problem.find("no folder for this user's key"), std::string::npos);
}

TEST(ArtifactTrust, KeyFolderFollowsXdgCacheHomeThenHome) {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  std::string saved_xdg = xdg ? xdg : "", saved_home = home ? home : "";
  ::setenv("XDG_CACHE_HOME", "/x/cache", 1);
  EXPECT_EQ(trust::key_dir(), "/x/cache/sheaf");
  ::setenv("XDG_CACHE_HOME", "relative", 1);  // not absolute: ignored, as the XDG spec says
  ::setenv("HOME", "/h/me", 1);
  EXPECT_EQ(trust::key_dir(), "/h/me/.cache/sheaf");
  if (xdg) ::setenv("XDG_CACHE_HOME", saved_xdg.c_str(), 1);
  else ::unsetenv("XDG_CACHE_HOME");
  if (home) ::setenv("HOME", saved_home.c_str(), 1);
  else ::unsetenv("HOME");
}

TEST(ArtifactTrust, CandidatesAreRegularPrivateFilesReadOnce) {
  TempDir t;
  put(t / "a.so", "library");
  trust::Candidate c = trust::read_candidate(t / "a.so");
  EXPECT_EQ(c.problem, "");
  EXPECT_EQ(c.bytes, "library");
  EXPECT_TRUE(trust::read_candidate(t / "none").missing);
  ::chmod((t / "a.so").c_str(), 0664);
  EXPECT_EQ(trust::read_candidate(t / "a.so").problem, "is writable by group or others (mode 0664)");
  ::chmod((t / "a.so").c_str(), 0644);
  EXPECT_EQ(trust::read_candidate(t / "a.so", 3).problem, "is larger than 3 bytes");
  ASSERT_EQ(::mkfifo((t / "fifo").c_str(), 0600), 0);  // no writer: a blocking open would hang here
  c = trust::read_candidate(t / "fifo");
  EXPECT_EQ(c.problem, "is a FIFO");
  EXPECT_TRUE(c.bytes.empty());
  fs::create_symlink(t / "a.so", t / "link.so");
  EXPECT_EQ(trust::read_candidate(t / "link.so").problem, "is a symbolic link");
  fs::create_directory(t / "d");
  EXPECT_EQ(trust::read_candidate(t / "d").problem, "is a directory");
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown((t / "a.so").c_str(), 65534, 65534), 0);
    EXPECT_EQ(trust::read_candidate(t / "a.so").problem, "is owned by another user (uid 65534)");
  }
}

TEST(ArtifactTrust, FoldersOthersMayWriteAreRefused) {
  TempDir t;
  EXPECT_EQ(trust::folder_problem(t.path), "");
  ::chmod(t.path.c_str(), 0757);
  EXPECT_EQ(trust::folder_problem(t.path), "is writable by group or others (mode 0757)");
  ::chmod(t.path.c_str(), 0700);
  put(t / "f", "x");
  EXPECT_EQ(trust::folder_problem(t / "f"), "is a regular file, not a folder");
  trust::make_folder(t / "made/__sheaf__");
  EXPECT_EQ(trust::folder_problem(t / "made/__sheaf__"), "");  // 0755 less the umask: never group-writable
}

TEST(ScratchDir, IsPrivateAndNeverReusesOrFollowsNames) {
  const std::string& dir = scratch_dir();
  EXPECT_EQ(mode_of(dir), 0700u);
  EXPECT_EQ(trust::folder_problem(dir), "");
  const std::string a = scratch_path(".cpp"), b = scratch_path(".cpp");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind(dir + "/", 0), 0u);
  write_new_file(a, "int x;");
  EXPECT_EQ(mode_of(a), 0600u);
  EXPECT_THROW(write_new_file(a, "int y;"), SheafError);  // O_EXCL: never into an existing file
  TempDir t;
  put(t / "victim", "precious");
  fs::create_symlink(t / "victim", b);
  EXPECT_THROW(write_new_file(b, "overwritten"), SheafError);  // nor through a link
  std::ifstream in(t / "victim");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "precious");
  fs::remove(a);
  fs::remove(b);
}

}  // namespace
}  // namespace sheaf
