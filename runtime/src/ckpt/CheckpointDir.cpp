// The checkpoint directory: naming, listing, atomic commit and retention.
#include "ckpt/CheckpointDir.h"
#include "ckpt/AtomicFile.h"
#include "ckpt/CheckpointReader.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>

namespace autoshard::rt {

namespace {

std::string quoted(const std::string &text) { return "'" + text + "'"; }

constexpr char kStagingSuffix[] = ".partial";
constexpr char kDeletingSuffix[] = ".deleting";

bool exists(const std::string &path) {
  struct stat info;
  return ::lstat(path.c_str(), &info) == 0;
}

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The names in directory `dir` (without "." and "..").
Expected<std::vector<std::string>> directoryEntries(const std::string &dir) {
  DIR *handle = ::opendir(dir.c_str());
  if (!handle)
    return Error("cannot list directory " + quoted(dir) + ": " +
                 std::strerror(errno));
  std::vector<std::string> names;
  while (dirent *entry = ::readdir(handle)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..")
      names.push_back(name);
  }
  ::closedir(handle);
  std::sort(names.begin(), names.end());
  return names;
}

/// The step of a "step-N" name; false for anything else.
bool parseCheckpointName(const std::string &name, int64_t &step) {
  constexpr std::string_view prefix = "step-";
  if (name.size() <= prefix.size() ||
      name.compare(0, prefix.size(), prefix) != 0)
    return false;
  const char *begin = name.data() + prefix.size();
  const char *end = name.data() + name.size();
  if (!std::all_of(begin, end, [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  auto [ptr, ec] = std::from_chars(begin, end, step);
  return ec == std::errc() && ptr == end;
}

/// Removes the regular files of `dir` and then `dir`.
Status removeFilesAndDirectory(const std::string &dir) {
  Expected<std::vector<std::string>> names = directoryEntries(dir);
  if (!names)
    return names.status();
  for (const std::string &name : *names) {
    std::string path = dir + "/" + name;
    if (::unlink(path.c_str()) != 0)
      return Error("cannot remove " + quoted(path) + ": " +
                   std::strerror(errno));
  }
  if (::rmdir(dir.c_str()) != 0)
    return Error("cannot remove directory " + quoted(dir) + ": " +
                 std::strerror(errno));
  return Status::success();
}

} // namespace

bool isCheckpointDirName(const std::string &name) {
  int64_t step;
  for (std::string_view suffix : {"", kStagingSuffix, kDeletingSuffix})
    if (endsWith(name, std::string(suffix)) &&
        parseCheckpointName(name.substr(0, name.size() - suffix.size()), step))
      return true;
  return false;
}

std::string checkpointDirName(int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "step-%08" PRId64, step);
  return name;
}

Expected<std::vector<CheckpointEntry>>
listCheckpoints(const std::string &root) {
  struct stat info;
  if (::stat(root.c_str(), &info) != 0) {
    if (errno == ENOENT)
      return std::vector<CheckpointEntry>();
    return Error("cannot read checkpoint directory " + quoted(root) + ": " +
                 std::strerror(errno));
  }
  if (!S_ISDIR(info.st_mode))
    return Error("checkpoint directory " + quoted(root) +
                 " is not a directory");
  Expected<std::vector<std::string>> names = directoryEntries(root);
  if (!names)
    return Error(names.message());
  std::vector<CheckpointEntry> entries;
  for (const std::string &name : *names) {
    CheckpointEntry entry;
    if (!parseCheckpointName(name, entry.step))
      continue;
    entry.path = root + "/" + name;
    if (::stat(entry.path.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
      continue;
    entry.complete = exists(entry.path + "/" + kCheckpointManifestName);
    entries.push_back(std::move(entry));
  }
  std::sort(entries.begin(), entries.end(),
            [](const CheckpointEntry &a, const CheckpointEntry &b) {
              return a.step < b.step;
            });
  return entries;
}

Status removeCheckpointDirectory(const std::string &path) {
  std::string doomed = path;
  if (!endsWith(path, kDeletingSuffix)) {
    doomed = path + kDeletingSuffix;
    if (exists(doomed))
      if (Status s = removeFilesAndDirectory(doomed); !s)
        return s;
    if (::rename(path.c_str(), doomed.c_str()) != 0)
      return Error("cannot rename " + quoted(path) + " to " + quoted(doomed) +
                   " to remove it: " + std::strerror(errno));
  }
  return removeFilesAndDirectory(doomed);
}

Expected<std::string> beginCheckpoint(const std::string &root, int64_t step) {
  if (Status s = makeDirectories(root); !s)
    return Error("--checkpoint-dir: " + s.message());
  std::string final = root + "/" + checkpointDirName(step);
  if (exists(final)) {
    if (exists(final + "/" + kCheckpointManifestName))
      return Error("cannot write the checkpoint of step " +
                   std::to_string(step) + ": " + quoted(final) +
                   " already holds a complete one, which a save never "
                   "overwrites");
    if (Status s = removeCheckpointDirectory(final); !s)
      return Error(s.message());
  }
  std::string staging = final + kStagingSuffix;
  if (exists(staging))
    if (Status s = removeCheckpointDirectory(staging); !s)
      return Error(s.message());
  if (::mkdir(staging.c_str(), 0755) != 0)
    return Error("cannot create " + quoted(staging) + ": " +
                 std::strerror(errno));
  return staging;
}

Status commitCheckpoint(const std::string &root, int64_t step,
                        const std::string &manifestText) {
  std::string final = root + "/" + checkpointDirName(step);
  std::string staging = final + kStagingSuffix;
  if (Status s = writeFileAtomically(staging + "/" + kCheckpointManifestName,
                                     manifestText);
      !s)
    return s;
  if (Status s = syncDirectory(staging); !s)
    return s;
  if (::rename(staging.c_str(), final.c_str()) != 0)
    return Error("cannot rename " + quoted(staging) + " to " + quoted(final) +
                 ": " + std::strerror(errno));
  return syncDirectory(root);
}

Status pruneCheckpoints(const std::string &root, int keep,
                        std::vector<std::string> &removed) {
  Expected<std::vector<CheckpointEntry>> entries = listCheckpoints(root);
  if (!entries)
    return entries.status();
  int64_t newestComplete = -1;
  int completeSeen = 0;
  std::vector<std::string> doomed;
  for (auto it = entries->rbegin(); it != entries->rend(); ++it) {
    if (it->complete) {
      newestComplete = std::max(newestComplete, it->step);
      if (++completeSeen > keep)
        doomed.push_back(it->path);
    } else if (newestComplete >= 0) {
      doomed.push_back(it->path);
    }
  }
  Expected<std::vector<std::string>> names = directoryEntries(root);
  if (!names)
    return names.status();
  // Only leftovers of this code's own names: "step-N.partial" and
  // "step-N.deleting"; anything else in the directory is not ours.
  for (const std::string &name : *names) {
    int64_t step;
    for (const char *suffix : {kStagingSuffix, kDeletingSuffix}) {
      std::string_view s = suffix;
      if (endsWith(name, std::string(s)) &&
          parseCheckpointName(name.substr(0, name.size() - s.size()), step))
        doomed.push_back(root + "/" + name);
    }
  }
  for (const std::string &path : doomed) {
    if (Status s = removeCheckpointDirectory(path); !s)
      return s;
    removed.push_back(path);
  }
  return Status::success();
}

Expected<int> lockCheckpointDirectory(const std::string &root) {
  const std::string path = root + "/" + kCheckpointLockName;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK,
                  0644);
  if (fd < 0)
    return Error("cannot open the lock " + quoted(path) + ": " +
                 std::strerror(errno));
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return Error("the lock " + quoted(path) + " is not a regular file");
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    char holder[256] = {};
    ssize_t n = ::pread(fd, holder, sizeof holder - 1, 0);
    ::close(fd);
    if (err != EWOULDBLOCK)
      return Error("cannot lock " + quoted(path) + ": " + std::strerror(err));
    std::string who(holder, n > 0 ? size_t(n) : 0);
    while (!who.empty() && (who.back() == '\n' || who.back() == ' '))
      who.pop_back();
    return Error("--checkpoint-dir " + quoted(root) +
                 " is in use by another run (" +
                 (who.empty() ? std::string("it holds ") + quoted(path)
                              : who + " holds " + quoted(path)) +
                 "): two runs in one directory would replace and remove "
                 "each other's checkpoints; wait for that run to end or "
                 "choose another directory");
  }
  char host[128] = {};
  ::gethostname(host, sizeof host - 1);
  std::string who = "pid " + std::to_string(::getpid()) + " on " + host + "\n";
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, who.data(), who.size(), 0) != ssize_t(who.size())) {
    // The lock holds without its note; the note only names the holder.
  }
  return fd;
}

} // namespace autoshard::rt
