//===- StrategyFlags.h - the strategy flags shard-opt and shard-compile share -===//
//
// Included once by each tool's main file: command-line flags belong to
// tools, not to the libraries (which take StrategyOptions). Every flag is an
// entry of autoshard/Pipelines/StrategyOptions.def, with its name, default
// and help; this file adds only what is about the command line itself:
// which flags were given.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_TOOLS_COMMON_STRATEGYFLAGS_H
#define AUTOSHARD_TOOLS_COMMON_STRATEGYFLAGS_H

#include "autoshard/Pipelines/Pipelines.h"

#include "llvm/Support/CommandLine.h"

#include <optional>
#include <string>
#include <vector>

namespace autoshard::tools {

inline llvm::cl::OptionCategory &strategyCategory() {
  // Capitalised: --help sorts categories by name, bytewise, and the
  // project's options belong before LLVM's "General options".
  static llvm::cl::OptionCategory category("Autoshard strategy options");
  return category;
}

// One flag per option: `strategyFlag`, `worldSizeFlag`, ...
#define STRATEGY_OPTION(TYPE, FIELD, NAME, DEFAULT, HELP)                      \
  inline llvm::cl::opt<TYPE> FIELD##Flag(NAME, llvm::cl::desc(HELP),           \
                                         llvm::cl::init(DEFAULT),              \
                                         llvm::cl::cat(strategyCategory()));
#define STRATEGY_LIST_OPTION(FIELD, NAME, VALUE_NAME, HELP)                    \
  inline llvm::cl::list<std::string> FIELD##Flag(                              \
      NAME, llvm::cl::desc(HELP), llvm::cl::value_desc(VALUE_NAME),            \
      llvm::cl::cat(strategyCategory()));
#include "autoshard/Pipelines/StrategyOptions.def"

/// What a flag's help shows of it beyond StrategyOptions.def: the value's
/// name, and that `--cost-report` alone asks for the text report.
inline const bool strategyFlagsShaped = [] {
  strategyFlag.setValueStr("name");
  memoryBudgetFlag.setValueStr("size");
  costReportFlag.setValueExpectedFlag(llvm::cl::ValueOptional);
  return true;
}();

/// The name the flag had before it counted ranks of CPU nodes too.
inline llvm::cl::alias gpusPerNodeAlias("gpus-per-node",
                                        llvm::cl::desc("Alias for "
                                                       "--ranks-per-node"),
                                        llvm::cl::aliasopt(ranksPerNodeFlag),
                                        llvm::cl::cat(strategyCategory()));

/// The names of the strategy flags given on the command line, other than
/// those in `except`, in StrategyOptions.def's order.
inline std::vector<std::string>
givenStrategyFlags(const std::vector<std::string> &except = {}) {
  std::vector<std::string> given;
  auto note = [&](const llvm::cl::Option &flag) {
    std::string name = flag.ArgStr.str();
    if (flag.getNumOccurrences() &&
        std::find(except.begin(), except.end(), name) == except.end())
      given.push_back("--" + name);
  };
#define STRATEGY_OPTION(TYPE, FIELD, NAME, DEFAULT, HELP) note(FIELD##Flag);
#define STRATEGY_LIST_OPTION(FIELD, NAME, VALUE_NAME, HELP) note(FIELD##Flag);
#include "autoshard/Pipelines/StrategyOptions.def"
  return given;
}

/// "--a, --b and --c".
inline std::string joinFlags(const std::vector<std::string> &flags) {
  std::string text;
  for (size_t i = 0; i < flags.size(); ++i)
    text += (i == 0 ? "" : i + 1 == flags.size() ? " and " : ", ") + flags[i];
  return text;
}

inline StrategyOptions strategyOptionsFromFlags() {
  StrategyOptions options;
#define STRATEGY_OPTION(TYPE, FIELD, NAME, DEFAULT, HELP)                      \
  options.FIELD = FIELD##Flag;
#define STRATEGY_LIST_OPTION(FIELD, NAME, VALUE_NAME, HELP)                    \
  options.FIELD.assign(FIELD##Flag.begin(), FIELD##Flag.end());
#include "autoshard/Pipelines/StrategyOptions.def"
  // `--cost-report` alone asks for the text report.
  if (costReportFlag.getNumOccurrences() && options.costReport.empty())
    options.costReport = "text";
  return options;
}

/// An error message for flags that make no valid plan, naming the bad value
/// and the valid ones: verifyStrategyOptions on the flags' values, plus what
/// only the command line knows (a flag given where it means nothing, a
/// flag given empty).
inline std::optional<std::string> validateStrategyFlags() {
  if (strategyFlag != strategy::kAutoStrategy) {
    std::vector<std::string> autoOnly;
    for (const llvm::cl::Option *flag :
         std::initializer_list<const llvm::cl::Option *>{
             &deviceFlag, &nodesFlag, &ranksPerNodeFlag, &costReportFlag,
             &costReportFileFlag})
      autoOnly.push_back("--" + flag->ArgStr.str());
    std::vector<std::string> given;
    for (const std::string &name : givenStrategyFlags())
      if (std::find(autoOnly.begin(), autoOnly.end(), name) != autoOnly.end())
        given.push_back(name);
    if (!given.empty() && strategy::lookupStrategy(strategyFlag))
      return joinFlags(autoOnly) + " are for --strategy=auto";
  }
  // 0 is verifyStrategyOptions' "not given"; given, it is a bad value.
  if (worldSizeFlag.getNumOccurrences() && worldSizeFlag < 1)
    return "--world-size must be at least 1, got " +
           std::to_string(worldSizeFlag);
  // Given but empty is an error too, not "no budget".
  if (memoryBudgetFlag.getNumOccurrences() && memoryBudgetFlag.empty())
    return "--memory-budget '' is not a positive size; write bytes or a "
           "size with a unit, such as 80GiB or 1.5GB";
  std::string problem = verifyStrategyOptions(strategyOptionsFromFlags());
  if (!problem.empty())
    return problem;
  return std::nullopt;
}

} // namespace autoshard::tools

#endif // AUTOSHARD_TOOLS_COMMON_STRATEGYFLAGS_H
