//===- ModelConfig.h - model configs and their training steps ---*- C++ -*-===//

#ifndef AUTOSHARD_MODELS_MODELCONFIG_H
#define AUTOSHARD_MODELS_MODELCONFIG_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>

namespace autoshard::models {

enum class ModelFamily { GPT2, Llama };
enum class OptimizerKind { AdamW, SGD };
enum class Precision { F32, BF16 };

llvm::StringRef stringifyModelFamily(ModelFamily family);
llvm::StringRef stringifyOptimizerKind(OptimizerKind kind);
llvm::StringRef stringifyPrecision(Precision precision);
std::optional<ModelFamily> parseModelFamily(llvm::StringRef name);
std::optional<OptimizerKind> parseOptimizerKind(llvm::StringRef name);
std::optional<Precision> parsePrecision(llvm::StringRef name);

/// The architecture, the shape of one training step and the optimizer of a
/// decoder-only transformer. Sizes follow the Hugging Face config fields.
struct ModelConfig {
  /// The named configuration this came from, or "custom".
  std::string name = "custom";
  ModelFamily family = ModelFamily::GPT2;

  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  /// Key/value heads of grouped-query attention; `heads` for multi-head
  /// attention (GPT-2 has no other kind).
  int64_t kvHeads = 0;
  /// Inner size of the feed-forward block (GPT-2: 4 * hidden).
  int64_t ffn = 0;
  int64_t vocab = 0;
  /// Rows of GPT-2's learned position table; Llama has none (0).
  int64_t maxPositions = 0;

  /// Tokens per sequence and sequences per micro-batch: the step's batch is
  /// [batchRows(), seq], the global batch that a strategy splits over ranks.
  int64_t seq = 0;
  int64_t microBatch = 0;
  /// Micro-batches whose gradients one optimizer step accumulates: the
  /// step's batch holds gradAccum * microBatch sequences.
  int64_t gradAccum = 1;

  /// Whether the output projection reuses the token embedding.
  bool tieEmbeddings = true;
  /// Epsilon of layer_norm (GPT-2) or rms_norm (Llama).
  double normEps = 1e-5;
  /// Base of the rotary embedding (Llama only).
  double ropeTheta = 10000.0;

  OptimizerKind optimizer = OptimizerKind::AdamW;
  double lr = 6e-4;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weightDecay = 0.1;
  /// SGD only.
  double momentum = 0.0;
  /// Global gradient-norm clipping; 0 disables it.
  double maxGradNorm = 1.0;

  /// bf16 computes in bf16 from f32 master weights.
  Precision precision = Precision::F32;

  /// Writes the forward pass with the dialect's generic tensor ops, as a
  /// front end would emit it from PyTorch (matmul for the linear layers,
  /// attention as matmul, mask and softmax, GELU, RMSNorm and rotary
  /// embeddings as their elementwise chains): the same model and
  /// initialisation as the fused ops give.
  bool generic = false;

  int64_t headDim() const { return heads > 0 ? hidden / heads : 0; }
  /// Sequences per optimizer step, over all micro-batches.
  int64_t batchRows() const { return microBatch * gradAccum; }
};

/// A config of `family` with the family's training defaults (AdamW with
/// betas (0.9, 0.95), eps 1e-8, weight decay 0.1, clipping at 1.0, f32;
/// lr 6e-4 for gpt2, 3e-4 for llama), its norm epsilon, rope base and
/// embedding tying, and every size 0.
ModelConfig getFamilyDefaults(ModelFamily family);

/// The names of the built-in configurations, in listing order.
llvm::ArrayRef<llvm::StringRef> getModelConfigNames();

/// The built-in configuration `name` (gpt2-small, llama2-7b, ...).
std::optional<ModelConfig> lookupModelConfig(llvm::StringRef name);

/// Checks that `config` describes a model that can be built: positive sizes,
/// heads that divide the hidden size, key/value heads that divide the heads,
/// an even head size under rope, a sequence that fits the position table,
/// valid optimizer settings, tensors whose sizes fit in int64. The error
/// names the bad value and what would be valid.
llvm::Error verifyModelConfig(const ModelConfig &config);

/// The number of trainable parameters, by closed formula (no IR). Requires a
/// config that verifyModelConfig accepts.
int64_t countParameters(const ModelConfig &config);

/// The forward pass and loss of one training step as a module holding
/// `@train_step`, with `train.optimizer` (and `train.max_grad_norm` when
/// clipping) set so that autoshard-autodiff derives the backward pass and
/// the optimizer. Emits a diagnostic and fails for an invalid config. Loads
/// the train and func dialects into `context`.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildTrainingStep(mlir::MLIRContext *context, const ModelConfig &config);

/// The sum of the element counts of a step's `param` arguments.
int64_t countParameterArguments(mlir::FunctionOpInterface step);

} // namespace autoshard::models

#endif // AUTOSHARD_MODELS_MODELCONFIG_H
