// The hidden test hook that stops one rank at one of the runtime's waits.
#include "core/StopHook.h"

#include <charconv>
#include <csignal>
#include <cstdio>
#include <string>

namespace autoshard::rt {

Expected<StopHook> parseStopHook(std::string_view spec) {
  auto bad = [&](const std::string &why) {
    return Error("--stop-rank-at: '" + std::string(spec) +
                 "' is not valid: " + why +
                 "; expected STEP:RANK:POINT, POINT one of create, write, "
                 "gather, commit, load, step, eval, offload (e.g. 2:1:write)");
  };
  size_t first = spec.find(':');
  size_t second = first == std::string_view::npos ? std::string_view::npos
                                                  : spec.find(':', first + 1);
  if (second == std::string_view::npos)
    return bad("it has fewer than three parts");
  auto integer = [](std::string_view text, auto &value) {
    auto [end, ec] =
        std::from_chars(text.data(), text.data() + text.size(), value);
    return ec == std::errc() && end == text.data() + text.size() &&
           !text.empty();
  };
  StopHook hook;
  if (!integer(spec.substr(0, first), hook.step) || hook.step < 1)
    return bad("the step is not an integer >= 1");
  if (!integer(spec.substr(first + 1, second - first - 1), hook.rank) ||
      hook.rank < 0)
    return bad("the rank is not an integer >= 0");
  static constexpr std::pair<std::string_view, StopPoint> kPoints[] = {
      {"create", StopPoint::Create}, {"write", StopPoint::Write},
      {"gather", StopPoint::Gather}, {"commit", StopPoint::Commit},
      {"load", StopPoint::Load},     {"step", StopPoint::Step},
      {"eval", StopPoint::Eval},     {"offload", StopPoint::Offload}};
  std::string_view point = spec.substr(second + 1);
  for (const auto &[name, value] : kPoints)
    if (point == name) {
      hook.point = value;
      return hook;
    }
  return bad("the point is not one of create, write, gather, commit, load, "
             "step, eval, offload");
}

void stopThisRank() {
  std::fflush(stdout);
  std::fflush(stderr);
  std::raise(SIGSTOP);
}

} // namespace autoshard::rt
