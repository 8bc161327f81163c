// A helper for the driver's end-to-end tests: makes data files, checks outputs.
//
//   driver_check safetensors FILE NAME:DTYPE:SHAPE...  exactly these tensors
//   driver_check compare A B TOL       same tensors, F32 values within TOL
//   driver_check loss-decreases LOG    last "step" loss below the first
//   driver_check loss-below LOG X      last "step" loss below X
//   driver_check same-first-loss A B   the first "step" lines of two logs
//                                      print the same loss
//   driver_check same-losses A B TOL   both logs print the same number of
//                                      losses, pairwise within TOL
//   driver_check write-asdata FILE ROWS [bad-label]
//                                      data for FakeStep (x f32 8, y i32 < 4)
//   driver_check write-tokens FILE COUNT [odd|bad-token]
//                                      uint16 tokens < 16 for FakeLmStep
//   driver_check empty-dir DIR         DIR exists and holds nothing (the
//                                      NVMe store removed its files)
#include "data/Data.h"
#include "driver/Safetensors.h"

#include <dirent.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace autoshard::rt;

namespace {

int fail(const std::string &message) {
  std::fprintf(stderr, "driver_check: %s\n", message.c_str());
  return 1;
}

int checkSafetensors(const std::string &path,
                     const std::vector<std::string> &expected) {
  Expected<SafetensorsFile> file = readSafetensors(path);
  if (!file)
    return fail(file.message());
  std::set<std::string> wanted;
  for (const std::string &spec : expected) {
    size_t a = spec.find(':'), b = spec.rfind(':');
    if (a == std::string::npos || a == b)
      return fail("bad expectation '" + spec + "'; use NAME:DTYPE:SHAPE");
    std::string name = spec.substr(0, a);
    std::string dtype = spec.substr(a + 1, b - a - 1);
    std::string shape = spec.substr(b + 1);
    wanted.insert(name);
    auto it = file->tensors.find(name);
    if (it == file->tensors.end())
      return fail(path + " has no tensor '" + name + "'");
    if (it->second.dtype != dtype || formatShape(it->second.shape) != shape)
      return fail("'" + name + "' is " + it->second.dtype + " " +
                  formatShape(it->second.shape) + ", expected " + dtype + " " +
                  shape);
  }
  for (const auto &[name, entry] : file->tensors)
    if (!wanted.count(name))
      return fail(path + " has an unexpected tensor '" + name + "'");
  std::printf("%s: %zu tensors as expected\n", path.c_str(),
              file->tensors.size());
  return 0;
}

int compare(const std::string &a, const std::string &b, double tolerance) {
  Expected<SafetensorsFile> fa = readSafetensors(a);
  Expected<SafetensorsFile> fb = readSafetensors(b);
  if (!fa)
    return fail(fa.message());
  if (!fb)
    return fail(fb.message());
  if (fa->tensors.size() != fb->tensors.size())
    return fail("different tensor counts");
  double worst = 0;
  for (const auto &[name, ea] : fa->tensors) {
    auto it = fb->tensors.find(name);
    if (it == fb->tensors.end() || it->second.shape != ea.shape ||
        it->second.dtype != "F32" || ea.dtype != "F32")
      return fail("'" + name + "' differs in presence, shape or dtype");
    size_t n = (ea.end - ea.begin) / 4;
    const char *pa = fa->bytes(name), *pb = fb->bytes(name);
    for (size_t i = 0; i < n; ++i) {
      float x, y;
      std::memcpy(&x, pa + 4 * i, 4);
      std::memcpy(&y, pb + 4 * i, 4);
      double diff = std::fabs(double(x) - y) /
                    std::fmax(1.0, std::fmax(std::fabs(x), std::fabs(y)));
      worst = std::fmax(worst, diff);
      if (!(diff <= tolerance))
        return fail("'" + name + "'[" + std::to_string(i) +
                    "]: " + std::to_string(x) + " vs " + std::to_string(y));
    }
  }
  std::printf("parameters agree (largest relative difference %g)\n", worst);
  return 0;
}

/// The loss of every "step N loss X ms T" line, as printed.
bool readLosses(const std::string &log, std::vector<std::string> &losses) {
  std::ifstream in(log);
  if (!in)
    return false;
  std::string line;
  while (std::getline(in, line)) {
    long long step;
    char loss[64];
    if (std::sscanf(line.c_str(), "step %lld loss %63s", &step, loss) == 2)
      losses.push_back(loss);
  }
  return true;
}

int lossDecreases(const std::string &log) {
  std::vector<std::string> losses;
  if (!readLosses(log, losses))
    return fail("cannot read " + log);
  if (losses.size() < 2)
    return fail("fewer than two step lines in " + log);
  double first = std::stod(losses.front()), last = std::stod(losses.back());
  std::printf("loss %g -> %g\n", first, last);
  if (!(last < first))
    return fail("the loss did not decrease");
  return 0;
}

int lossBelow(const std::string &log, double bound) {
  std::vector<std::string> losses;
  if (!readLosses(log, losses) || losses.empty())
    return fail("no step lines in " + log);
  double last = std::stod(losses.back());
  std::printf("last loss %g, bound %g\n", last, bound);
  if (!(last < bound))
    return fail("the last loss is not below " + std::to_string(bound));
  return 0;
}

int sameFirstLoss(const std::string &a, const std::string &b) {
  std::vector<std::string> la, lb;
  if (!readLosses(a, la) || la.empty())
    return fail("no step lines in " + a);
  if (!readLosses(b, lb) || lb.empty())
    return fail("no step lines in " + b);
  std::printf("first losses: %s and %s\n", la[0].c_str(), lb[0].c_str());
  if (la[0] != lb[0])
    return fail("the first losses differ");
  return 0;
}

int sameLosses(const std::string &a, const std::string &b, double tolerance) {
  std::vector<std::string> la, lb;
  if (!readLosses(a, la) || la.empty())
    return fail("no step lines in " + a);
  if (!readLosses(b, lb) || lb.empty())
    return fail("no step lines in " + b);
  if (la.size() != lb.size())
    return fail(std::to_string(la.size()) + " losses in " + a + " but " +
                std::to_string(lb.size()) + " in " + b);
  double worst = 0;
  for (size_t i = 0; i < la.size(); ++i) {
    double x = std::stod(la[i]), y = std::stod(lb[i]);
    double diff = std::fabs(x - y) / std::fmax(1.0, std::fabs(x));
    worst = std::fmax(worst, diff);
    if (!(diff <= tolerance))
      return fail("loss " + std::to_string(i + 1) + ": " + la[i] + " vs " +
                  lb[i]);
  }
  std::printf("%zu losses agree (largest relative difference %g)\n", la.size(),
              worst);
  return 0;
}

/// A Markov chain over 16 tokens that FakeLmStep's bigram model can learn:
/// v is followed by (5 v + 3) mod 16 nine times in ten.
int writeTokens(const std::string &path, int64_t count,
                const std::string &defect) {
  std::vector<uint16_t> tokens(static_cast<size_t>(count));
  uint32_t state = 12345;
  auto random = [&] { return (state = state * 1664525u + 1013904223u) >> 8; };
  for (int64_t i = 0; i < count; ++i)
    tokens[i] = static_cast<uint16_t>(i > 0 && random() % 10 != 0
                                          ? (5 * tokens[i - 1] + 3) % 16
                                          : random() % 16);
  if (defect == "bad-token" && count > 5)
    tokens[5] = 16;
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char *>(tokens.data()),
            static_cast<std::streamsize>(tokens.size() * 2));
  if (defect == "odd")
    out.put('x');
  out.close();
  return out ? 0 : fail("cannot write " + path);
}

int emptyDir(const std::string &path) {
  DIR *dir = ::opendir(path.c_str());
  if (!dir)
    return fail("cannot open the directory " + path);
  std::vector<std::string> left;
  while (dirent *e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name != "." && name != "..")
      left.push_back(name);
  }
  ::closedir(dir);
  if (!left.empty())
    return fail(path + " still holds " + left.front() +
                (left.size() > 1
                     ? " and " + std::to_string(left.size() - 1) + " more"
                     : ""));
  std::printf("%s is empty\n", path.c_str());
  return 0;
}

int writeData(const std::string &path, int64_t rows, bool badLabel) {
  std::vector<float> x(static_cast<size_t>(rows * 8));
  std::vector<int32_t> y(static_cast<size_t>(rows));
  // A learnable rule: the label is the largest of the first four features.
  for (int64_t r = 0; r < rows; ++r) {
    for (int j = 0; j < 8; ++j)
      x[r * 8 + j] = std::sin(0.7f * r + 1.3f * j);
    int best = 0;
    for (int c = 1; c < 4; ++c)
      if (x[r * 8 + c] > x[r * 8 + best])
        best = c;
    y[r] = best;
  }
  if (badLabel && rows > 3)
    y[3] = 7;
  Status s = writeAsdataFile(path, rows,
                             {{"x", ASRT_DTYPE_F32, {8}, x.data()},
                              {"y", ASRT_DTYPE_I32, {}, y.data()}});
  return s ? 0 : fail(s.message());
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() >= 1 && args[0] == "safetensors" && args.size() >= 2)
    return checkSafetensors(args[1], {args.begin() + 2, args.end()});
  if (args.size() == 4 && args[0] == "compare")
    return compare(args[1], args[2], std::stod(args[3]));
  if (args.size() == 2 && args[0] == "loss-decreases")
    return lossDecreases(args[1]);
  if (args.size() == 3 && args[0] == "loss-below")
    return lossBelow(args[1], std::stod(args[2]));
  if (args.size() == 3 && args[0] == "same-first-loss")
    return sameFirstLoss(args[1], args[2]);
  if (args.size() == 4 && args[0] == "same-losses")
    return sameLosses(args[1], args[2], std::stod(args[3]));
  if ((args.size() == 3 || args.size() == 4) && args[0] == "write-tokens")
    return writeTokens(args[1], std::stoll(args[2]),
                       args.size() == 4 ? args[3] : "");
  if (args.size() == 2 && args[0] == "empty-dir")
    return emptyDir(args[1]);
  if ((args.size() == 3 || args.size() == 4) && args[0] == "write-asdata")
    return writeData(args[1], std::stoll(args[2]),
                     args.size() == 4 && args[3] == "bad-label");
  return fail("unknown command; see the comment at the top of DriverCheck.cpp");
}
