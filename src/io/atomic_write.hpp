// io/atomic_write.hpp — every `io "save"` goes through here (SPEC §7.2): parent directories are
// created, bytes go to a temporary file in the target's directory, which is fsynced and renamed
// over the target, so readers see the old file or the new one, never a torn one. A symbolic link
// is followed (the file it names is replaced; the link stays). A target that exists and is not a
// regular file (/dev/null, /dev/stdout, a named pipe) is written in place: renaming over it would
// replace the device.
// Temporaries are named ".<name>.tmp.<pid>.<host><random>" (host: 8 hex digits of a hash of this
// machine's name; random: 8 hex digits) and created with O_EXCL | O_NOFOLLOW. A process killed
// while it saved leaves its temporary behind: the first save of each process into a directory
// removes the temporaries there (of any target) whose process is gone — a pid on this machine
// that kill(pid, 0) says does not exist — and only regular files of this user whose names match
// the pattern exactly. Once per directory: saving thousands of files into one folder scans it once.
#pragma once
#include <string>
#include <string_view>

namespace sheaf {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // errors name the file
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();  // removes the temporary file unless committed

  void write(const void* data, size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  void commit();  // fsync, rename over the target, fsync the directory

 private:
  std::string path_, target_, tmp_;  // as given (for messages); the file renamed over; the temporary
  int fd_ = -1;
  bool in_place_ = false;  // a device or a pipe: fd_ is the target itself
};

// One-shot: the whole content at once.
void write_file_atomic(const std::string& path, std::string_view bytes);

}  // namespace sheaf
