//===- CommandLine.h - the plan's enums as typed options ---------*- C++ -*-===//
//
// llvm::cl parsers for the enums of Strategy.h, so that a flag, a pass
// option and a pipeline option of one of them is typed and spelled as
// Strategy.h spells it: `--offload=cpu`, `reduce-every=micro-batch`. A bad
// value is refused with every valid one. Include this header before any
// option of these types is declared (Passes.h and Pipelines.h do).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_STRATEGY_COMMANDLINE_H
#define AUTOSHARD_STRATEGY_COMMANDLINE_H

#include "autoshard/Strategy/Strategy.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

namespace autoshard::strategy {

/// Parses the spellings of E; --help shows them as the value's name.
template <typename E>
class SpellingParser : public llvm::cl::basic_parser<E> {
public:
  using llvm::cl::basic_parser<E>::basic_parser;

  bool parse(llvm::cl::Option &option, llvm::StringRef, llvm::StringRef arg,
             E &value) {
    if (std::optional<E> parsed = parseEnum<E>(std::string_view(arg))) {
      value = *parsed;
      return false;
    }
    return option.error("unknown value '" + arg +
                        "'; valid: " + listSpellings<E>());
  }

  llvm::StringRef getValueName() const override { return valueName; }

  void printOptionDiff(const llvm::cl::Option &option, E value,
                       const llvm::cl::OptionValue<E> &defaultValue,
                       size_t globalWidth) const {
    this->printOptionName(option, globalWidth);
    llvm::outs() << "= " << stringify(value);
    if (defaultValue.hasValue())
      llvm::outs() << " (default: " << stringify(defaultValue.getValue())
                   << ")";
    llvm::outs() << "\n";
  }

private:
  /// "none|cpu|nvme"; getValueName hands out a reference to it.
  std::string valueName = [] {
    std::string text;
    for (const Spelling<E> &spelling : EnumSpellings<E>::all)
      text += (text.empty() ? "" : "|") + std::string(spelling.name);
    return text;
  }();
};

/// Pass pipelines print option values with operator<<.
template <typename E, typename = decltype(EnumSpellings<E>::all)>
llvm::raw_ostream &operator<<(llvm::raw_ostream &os, E value) {
  return os << stringify(value);
}

} // namespace autoshard::strategy

namespace llvm::cl {
#define AUTOSHARD_SPELLING_PARSER(E)                                           \
  template <>                                                                  \
  class parser<::autoshard::strategy::E>                                       \
      : public ::autoshard::strategy::SpellingParser<::autoshard::strategy::E> { \
  public:                                                                      \
    using SpellingParser::SpellingParser;                                      \
  };
AUTOSHARD_SPELLING_PARSER(ReduceDtype)
AUTOSHARD_SPELLING_PARSER(ReduceEvery)
AUTOSHARD_SPELLING_PARSER(Offload)
AUTOSHARD_SPELLING_PARSER(ActivationCheckpointing)
#undef AUTOSHARD_SPELLING_PARSER
} // namespace llvm::cl

#endif // AUTOSHARD_STRATEGY_COMMANDLINE_H
