// A fresh temporary directory per test, removed with its files afterwards.
#pragma once

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

namespace autoshard::rt::testing {

class TempDir {
public:
  TempDir() {
    char pattern[] = "/tmp/asrt-ckpt-test-XXXXXX";
    const char *made = ::mkdtemp(pattern);
    EXPECT_NE(made, nullptr);
    dir = made ? made : "/tmp";
  }
  ~TempDir() {
    std::string command = "rm -rf '" + dir + "'";
    (void)std::system(command.c_str());
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;

  const std::string &path() const { return dir; }
  std::string operator/(const std::string &name) const {
    return dir + "/" + name;
  }

private:
  std::string dir;
};

} // namespace autoshard::rt::testing
