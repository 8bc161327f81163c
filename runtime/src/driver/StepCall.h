// One call of a compiled step, timed, checked and traced.
#pragma once

#include "autoshard/rt/abi.h"
#include "io/Manifest.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace autoshard::rt {

/// A compiled step's entry point (autoshard_step, autoshard_eval_step).
using StepFunction = void (*)(asrt_context *, void *const *, void *const *);

/// What one call of a step gave: its milliseconds and its loss, the global
/// batch's on every rank (the partitioner all-reduces it, so printing and
/// checking it need no communication, and a NaN or an infinity on any rank
/// is one on all of them).
struct StepRun {
  double ms;
  float loss;
  /// The global gradient norm before clipping, of a step that clips.
  std::optional<double> gradNorm;
};

/// Calls `step` on `args` and `results` once, timed as the cost model
/// predicts it (on a GPU it has finished when its queued kernels have),
/// checked to leave nothing in flight (fatal otherwise), and traced as
/// `traceName` while the context traces. `lossResult` and `gradNormSqResult`
/// index `results` (-1: the step has no gradient norm); `stepNumber` names
/// the step in errors and trace events; `manifest` is the step's, whose
/// op sites its asrt_op_site calls index; `phase` ("step 3", "the
/// evaluation after step 2") is what a collective or transfer timeout of
/// the call names.
StepRun runCompiledStep(asrt_context &ctx, StepFunction step,
                        std::vector<void *> &args,
                        std::vector<void *> &results, int lossResult,
                        int gradNormSqResult, int64_t stepNumber,
                        const char *traceName, const Manifest &manifest,
                        const std::string &phase);

} // namespace autoshard::rt
