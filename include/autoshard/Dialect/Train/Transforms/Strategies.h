//===- Strategies.h - the plan's vocabulary as the train dialect's -*- C++ -*-===//
//
// The presets and the plan's enums are defined once, in
// autoshard/Strategy/Strategy.h; the dialect's attribute enums (TrainBase.td)
// are their IR form. These conversions are the only place the two meet, and
// they fail to compile when the two disagree.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_DIALECT_TRAIN_TRANSFORMS_STRATEGIES_H
#define AUTOSHARD_DIALECT_TRAIN_TRANSFORMS_STRATEGIES_H

#include "autoshard/Dialect/Train/IR/TrainDialect.h"
#include "autoshard/Strategy/Strategy.h"

namespace autoshard::train {

namespace detail {
/// Whether every value of `From` casts to the same-named value of `To`.
template <typename To, typename From, size_t N>
constexpr bool sameValues(const strategy::Spelling<From> (&all)[N],
                          const To (&expected)[N]) {
  for (size_t i = 0; i < N; ++i)
    if (static_cast<int>(all[i].value) != static_cast<int>(expected[i]))
      return false;
  return true;
}
} // namespace detail

inline Placement toAttr(strategy::Placement placement) {
  static_assert(detail::sameValues<Placement>(
      strategy::EnumSpellings<strategy::Placement>::all,
      {Placement::Replicated, Placement::Sharded}));
  return static_cast<Placement>(placement);
}
inline Unit toAttr(strategy::GatherUnit unit) {
  static_assert(detail::sameValues<Unit>(
      strategy::EnumSpellings<strategy::GatherUnit>::all,
      {Unit::Param, Unit::Block}));
  return static_cast<Unit>(unit);
}
inline Reshard toAttr(strategy::Reshard reshard) {
  static_assert(detail::sameValues<Reshard>(
      strategy::EnumSpellings<strategy::Reshard>::all,
      {Reshard::AfterForward, Reshard::AfterBackward}));
  return static_cast<Reshard>(reshard);
}
inline ReduceDtype toAttr(strategy::ReduceDtype dtype) {
  static_assert(detail::sameValues<ReduceDtype>(
      strategy::EnumSpellings<strategy::ReduceDtype>::all,
      {ReduceDtype::Gradient, ReduceDtype::F32}));
  return static_cast<ReduceDtype>(dtype);
}
inline ReduceEvery toAttr(strategy::ReduceEvery every) {
  static_assert(detail::sameValues<ReduceEvery>(
      strategy::EnumSpellings<strategy::ReduceEvery>::all,
      {ReduceEvery::Step, ReduceEvery::MicroBatch}));
  return static_cast<ReduceEvery>(every);
}

} // namespace autoshard::train

#endif // AUTOSHARD_DIALECT_TRAIN_TRANSFORMS_STRATEGIES_H
