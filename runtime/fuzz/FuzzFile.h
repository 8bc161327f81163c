// The runtime's readers take paths: a fuzz input as a file they can open.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace autoshard::rt::fuzz {

/// A scratch directory of this process, removed at exit; every input is
/// written to the same names in it, so the file system does not fill.
inline const std::string &scratchDirectory() {
  static const std::string dir = [] {
    char name[] = "/tmp/asrt-fuzz-XXXXXX";
    if (!mkdtemp(name)) {
      std::perror("asrt fuzz: mkdtemp");
      std::abort();
    }
    std::string path = name;
    static std::string removeAtExit;
    removeAtExit = path;
    std::atexit([] {
      std::string command = "rm -rf '" + removeAtExit + "'";
      if (std::system(command.c_str()) != 0)
        std::fprintf(stderr, "asrt fuzz: could not remove %s\n",
                     removeAtExit.c_str());
    });
    return path;
  }();
  return dir;
}

/// Writes `size` bytes to `name` in the scratch directory; its path.
inline std::string writeScratchFile(const std::string &name,
                                    const void *data, size_t size) {
  std::string path = scratchDirectory() + "/" + name;
  FILE *file = std::fopen(path.c_str(), "wb");
  if (!file || (size && std::fwrite(data, 1, size, file) != size) ||
      std::fclose(file) != 0) {
    std::perror(("asrt fuzz: writing " + path).c_str());
    std::abort();
  }
  return path;
}

} // namespace autoshard::rt::fuzz
