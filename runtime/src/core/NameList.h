// Lists of tensor names in error messages, cut to a readable length.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace autoshard::rt {

/// "a, b, c": at most `limit` of `items`, then how many more ("a, b and 40
/// more"), so that a file of another model gives a message of one line
/// rather than every one of its thousands of names. `separator` joins
/// items that are phrases themselves ("; ").
inline std::string listNames(const std::vector<std::string> &items,
                             size_t limit, const char *separator = ", ") {
  std::string out;
  for (size_t i = 0; i < items.size() && i < limit; ++i)
    out += (i ? separator : "") + items[i];
  if (items.size() > limit)
    out += " and " + std::to_string(items.size() - limit) + " more";
  return out;
}

} // namespace autoshard::rt
