// The NVMe store: one file per memory=nvme argument, removed when it ends.
#include "memory/NvmeStore.h"
#include "core/Context.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>

namespace autoshard::rt {

namespace {

std::string quoted(const std::string &text) { return "'" + text + "'"; }

std::string errnoText(int error) { return std::strerror(error); }

// pread/pwrite move at most this much per call (Linux caps a call at about
// 2 GiB anyway); larger tensors take several calls.
constexpr int64_t kMaxIoBytes = int64_t(1) << 30;

// The live stores, for fatal()'s cleanup: a step that fails still removes
// its files, which may be large.
std::mutex liveMutex;
std::set<NvmeStore *> liveStores;

void removeLiveStoresAfterFatal() {
  // fatal() may run while a store is being made or destroyed on another
  // thread; then that thread's own cleanup is under way, and waiting for
  // it could hang the failing process.
  std::unique_lock<std::mutex> lock(liveMutex, std::try_to_lock);
  if (!lock.owns_lock())
    return;
  for (NvmeStore *store : liveStores)
    (void)store->remove();
}

} // namespace

Status checkWritableDirectory(const std::string &path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    int error = errno;
    return Error(quoted(path) +
                 (error == ENOENT ? " does not exist" : " cannot be examined") +
                 " (" + errnoText(error) + ")");
  }
  if (!S_ISDIR(info.st_mode))
    return Error(quoted(path) + " is not a directory");
  if (::access(path.c_str(), W_OK | X_OK) != 0) {
    int error = errno;
    return Error(quoted(path) + " is not writable (" + errnoText(error) + ")");
  }
  return Status::success();
}

Expected<std::unique_ptr<NvmeStore>>
NvmeStore::create(const std::string &parent, int rank) {
  if (Status s = checkWritableDirectory(parent); !s)
    return Error(s.message());
  std::string pattern = parent + (parent.back() == '/' ? "" : "/") +
                        "autoshard-offload-" + std::to_string(::getpid()) +
                        "-rank" + std::to_string(rank) + "-XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  if (!::mkdtemp(name.data())) {
    int error = errno;
    return Error("cannot create a directory in " + quoted(parent) + " (" +
                 errnoText(error) + ")");
  }
  std::unique_ptr<NvmeStore> store(new NvmeStore(name.data()));
  {
    std::lock_guard<std::mutex> lock(liveMutex);
    liveStores.insert(store.get());
  }
  addFatalCleanupHook(removeLiveStoresAfterFatal);
  return store;
}

NvmeStore::~NvmeStore() {
  {
    std::lock_guard<std::mutex> lock(liveMutex);
    liveStores.erase(this);
  }
  (void)remove();
}

Status NvmeStore::remove() {
  if (removed)
    return Status::success();
  removed = true;
  Status first;
  auto note = [&](const std::string &path, int error) {
    if (first)
      first = Error("cannot remove " + quoted(path) + " (" + errnoText(error) +
                    ")");
  };
  for (auto &[index, file] : files) {
    if (file.fd >= 0)
      ::close(file.fd);
    file.fd = -1;
    if (::unlink(file.path.c_str()) != 0 && errno != ENOENT)
      note(file.path, errno);
  }
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT)
    note(dir, errno);
  return first;
}

std::string NvmeStore::fileName(int index, std::string_view name) {
  std::string out = "arg" + std::to_string(index) + "-";
  for (char c : name) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    out += ok ? c : '_';
  }
  return out + ".bin";
}

std::string NvmeStore::pathOf(int index) const {
  auto it = files.find(index);
  return it == files.end() ? std::string() : it->second.path;
}

int64_t NvmeStore::bytesOf(int index) const {
  auto it = files.find(index);
  return it == files.end() ? -1 : it->second.bytes;
}

const std::string &NvmeStore::nameOf(int index) const {
  static const std::string none;
  auto it = files.find(index);
  return it == files.end() ? none : it->second.name;
}

std::vector<int> NvmeStore::indices() const {
  std::vector<int> out;
  for (const auto &[index, file] : files)
    out.push_back(index);
  return out;
}

int64_t NvmeStore::totalBytes() const {
  int64_t total = 0;
  for (const auto &[index, file] : files)
    total += file.bytes;
  return total;
}

Status NvmeStore::add(int index, std::string_view name, const void *init,
                      int64_t bytes) {
  if (removed)
    return Error("the NVMe store " + quoted(dir) + " was already removed");
  if (index < 0 || bytes < 0)
    return Error("NVMe store: bad argument " + std::to_string(index) + " of " +
                 std::to_string(bytes) + " bytes");
  if (files.count(index))
    return Error("NVMe store: argument " + std::to_string(index) +
                 " already has a file, " + quoted(files[index].path));
  File file;
  file.name = std::string(name);
  file.path = dir + "/" + fileName(index, name);
  file.bytes = bytes;
  file.fd =
      ::open(file.path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (file.fd < 0) {
    int error = errno;
    return Error("cannot create " + quoted(file.path) + " (" +
                 errnoText(error) + ")");
  }
  // Registered before the first write, so that remove() deletes a file
  // whose write failed.
  files.emplace(index, file);
  return write(index, init, bytes);
}

Status NvmeStore::checkAccess(int index, int64_t bytes,
                              const File *&file) const {
  auto it = files.find(index);
  if (it == files.end() || removed) {
    std::string held;
    for (const auto &[i, f] : files)
      held += (held.empty() ? "" : ", ") + std::to_string(i);
    return Error("argument " + std::to_string(index) +
                 " has no NVMe file (only memory=nvme arguments have one; " +
                 (held.empty() ? std::string("this store holds none")
                               : "this store holds arguments " + held) +
                 ")");
  }
  file = &it->second;
  if (bytes != file->bytes)
    return Error("argument " + std::to_string(index) + " (" + file->name +
                 ") is " + std::to_string(file->bytes) + " bytes in " +
                 quoted(file->path) + ", but " + std::to_string(bytes) +
                 " bytes were asked for; reads and writes move the whole "
                 "tensor");
  return Status::success();
}

Status NvmeStore::check(int index, int64_t bytes) const {
  const File *file = nullptr;
  return checkAccess(index, bytes, file);
}

Status NvmeStore::read(int index, void *dst, int64_t bytes) const {
  const File *file = nullptr;
  if (Status s = checkAccess(index, bytes, file); !s)
    return s;
  auto *out = static_cast<char *>(dst);
  int64_t done = 0;
  while (done < bytes) {
    size_t chunk = static_cast<size_t>(std::min(bytes - done, kMaxIoBytes));
    ssize_t n = ::pread(file->fd, out + done, chunk, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int error = errno;
      return Error("cannot read " + quoted(file->path) + " (" +
                   errnoText(error) + ")");
    }
    if (n == 0)
      return Error("short read of " + quoted(file->path) + ": it ends after " +
                   std::to_string(done) + " of its " + std::to_string(bytes) +
                   " bytes");
    done += n;
  }
  return Status::success();
}

Status NvmeStore::write(int index, const void *src, int64_t bytes) {
  const File *file = nullptr;
  if (Status s = checkAccess(index, bytes, file); !s)
    return s;
  const auto *in = static_cast<const char *>(src);
  int64_t done = 0;
  while (done < bytes) {
    size_t chunk = static_cast<size_t>(std::min(bytes - done, kMaxIoBytes));
    ssize_t n = ::pwrite(file->fd, in + done, chunk, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int error = errno;
      return Error("cannot write " + quoted(file->path) + " (" +
                   errnoText(error) + "; " + std::to_string(done) + " of " +
                   std::to_string(bytes) + " bytes written)");
    }
    if (n == 0)
      return Error("short write to " + quoted(file->path) + ": " +
                   std::to_string(done) + " of " + std::to_string(bytes) +
                   " bytes written");
    done += n;
  }
  return Status::success();
}

} // namespace autoshard::rt
