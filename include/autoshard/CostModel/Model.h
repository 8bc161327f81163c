//===- Model.h - what the cost model knows about a training step -*- C++
//-*-===//
//
// A model description is the part of a training step that the cost of a plan
// depends on: every parameter tensor (its size, whether the backward pass
// reads it, its transformer block), the optimizer, the precision, the batch,
// the step's FLOPs and, when the compiler's memory plan has measured them,
// the activation bytes. The compiler fills it in from the IR; tools and tests
// can build one from a transformer's shape (describeTransformer).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_COSTMODEL_MODEL_H
#define AUTOSHARD_COSTMODEL_MODEL_H

#include "autoshard/Strategy/Strategy.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace autoshard::cost {

enum class Optimizer {
  /// Two f32 states per parameter (exp_avg, exp_avg_sq).
  AdamW,
  /// One f32 state per parameter (momentum_buffer).
  SGDMomentum,
  /// No state.
  SGD,
};

/// f32 states the optimizer keeps per parameter element: 2, 1 or 0.
int64_t optimizerStatesPerElement(Optimizer optimizer);

enum class Precision {
  /// Everything in f32.
  F32,
  /// bf16 compute and gradients from f32 master weights; f32 states.
  BF16,
};

/// Bytes of a compute-type element: 4 (f32) or 2 (bf16).
int64_t computeElementBytes(Precision precision);

/// Activation checkpointing of `autoshard-checkpoint-activations`.
using strategy::ActivationCheckpointing;
constexpr int kNumCheckpointingModes = 3;

struct ParameterTensor {
  std::string name;
  int64_t elements = 0;
  /// Whether the backward pass reads the parameter itself (the set B of
  /// docs/Strategies.md): a sharded one is gathered again for it.
  bool readByBackward = true;
  /// Its transformer block: the index of its `train.unit` in the step's
  /// unit order (StepSignature::getUnits), or -1 in the root unit. FSDP
  /// gathers a block's parameters together.
  int64_t block = -1;
};

/// A moment of a step's buffers, split by what another plan would keep of
/// them: the gradients that stay alive until the optimizer (whole under
/// DDP; a sharded plan keeps the open buckets whole and its shards of the
/// rest), and everything else alive then (activations, temporaries,
/// gradients still being summed, pack buffers).
struct StepMoment {
  int64_t heldGradients = 0;
  int64_t others = 0;
  /// Of `others`, the parameters' compute copies (mixed precision) alive
  /// then, which a plan may hold otherwise (sharded, fetched per use).
  int64_t computeCopies = 0;
  /// The bytes of the parameters in use then (each from one of its reads
  /// to the next within a pass), as the step reads them (the compute
  /// copies): what a plan that gathers or fetches parameters for their use
  /// holds then.
  int64_t paramBytesInUse = 0;
  /// Whether every parameter in use then is kept across a loss (the last
  /// one read by the forward pass, read first by the backward pass): a
  /// plan that reads parameters from NVMe fetches it again instead.
  bool onlyAcrossLoss = false;
  /// Of `heldGradients`, those whose bucket's reduction has not completed
  /// (the open bucket and those in flight): what a plan that reduces them
  /// away still holds whole then, with buckets of the measured step's cap.
  /// -1 when not measured.
  int64_t unreducedGradients = -1;
  /// As `paramBytesInUse`, by unit: every parameter of a block from the first read of
  /// one of them to the last within a pass, parameters outside the blocks
  /// as above. What a plan that gathers whole blocks (FSDP) holds then.
  int64_t unitBytesInUse = 0;
  /// The bytes of the parameters the op at this moment reads, and of those
  /// the next op that reads parameters reads: what a plan that copies a
  /// parameter to the device for each reader holds then (the copy in use,
  /// and the next one in flight).
  int64_t paramBytesRead = 0;
  int64_t nextParamBytesRead = 0;
  /// The gradients of the bucket whose reduction completed last before
  /// then: what a plan that copies each bucket's gradients to the host
  /// after its reduction still holds while that copy is in flight. -1 when
  /// not measured.
  int64_t lastReducedGradients = -1;
  /// Of `others`, by the memory plan's categories: the activations, the
  /// parameters' buffers (the compute copies among them, and updated
  /// parameters), the gradients still being summed, the bucket pack
  /// buffers and the batch. The rest of `others` is temporaries. For the
  /// reports' breakdown of a plan's peak (PeakBreakdown); no estimate
  /// depends on them.
  int64_t activations = 0;
  int64_t parameterBuffers = 0;
  int64_t summingGradients = 0;
  int64_t communication = 0;
  int64_t batch = 0;
};

/// Activation bytes per rank that the compiler's memory plan measured for
/// one world size and checkpointing mode (its `activations` category at the
/// peak), under DDP.
struct ActivationMeasurement {
  int64_t worldSize = 1;
  ActivationCheckpointing checkpointing = ActivationCheckpointing::None;
  int64_t bytesPerRank = 0;
  /// The plan's step buffers at their peak (its arena): the activations
  /// with the gradients, temporaries and bucket pack buffers alive at the
  /// same moment, which the compiled step keeps in one arena. 0 when not
  /// measured.
  int64_t stepBytesPerRank = 0;
  /// The moments that can be the step's peak under some plan: no other
  /// moment holds both as many held gradients and as many other bytes.
  /// Empty when not measured.
  std::vector<StepMoment> stepMoments;
};

/// The architecture of a decoder-only transformer as `shard-gen` builds it
/// (autoshard::models::ModelConfig without its optimizer settings), for the
/// estimates the IR cannot give without running the memory planner.
struct TransformerShape {
  enum class Family { GPT2, Llama };
  Family family = Family::GPT2;
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kvHeads = 0;
  int64_t ffn = 0;
  int64_t vocab = 0;
  /// GPT-2's learned position table; 0 for Llama.
  int64_t maxPositions = 0;
  bool tieEmbeddings = true;

  int64_t headDim() const { return heads > 0 ? hidden / heads : 0; }
};

struct ModelDescription {
  std::string name;
  /// In the order the forward pass first reads them.
  std::vector<ParameterTensor> parameters;
  Optimizer optimizer = Optimizer::AdamW;
  Precision precision = Precision::F32;
  /// Global-norm clipping (adds one scalar all-reduce per shard group size).
  bool clipGradients = false;

  /// The global batch of one optimizer step: `batchRows` sequences of
  /// `sequenceLength` tokens, cut into `microBatches` micro-batches.
  int64_t batchRows = 1;
  int64_t sequenceLength = 1;
  int64_t microBatches = 1;

  /// FLOPs of the forward and backward passes over the whole global batch,
  /// without recomputation; the forward pass is a third of them.
  double stepFlops = 0;
  /// FLOPs that `blocks` checkpointing adds: the blocks' forward pass again.
  double blockRecomputeFlops = 0;

  /// Measured activation bytes (preferred), and the shape to estimate them
  /// from when no measurement matches the world size and checkpointing.
  std::vector<ActivationMeasurement> activationMeasurements;
  std::optional<TransformerShape> transformer;

  int64_t parameterCount() const;
  int64_t tokensPerStep() const { return batchRows * sequenceLength; }
};

/// The parameters of `shape` exactly as `shard-gen` declares them (names,
/// element counts, order), with their blocks and whether the backward pass
/// reads them: every matrix and norm weight; not the biases, GPT-2's `wpe`,
/// or an untied embedding table (docs/Strategies.md, "Bytes on the wire").
std::vector<ParameterTensor>
transformerParameters(const TransformerShape &shape);

/// Elements of the weights that enter matrix products: every linear weight
/// and the output projection (the tied `wte`, or `lm_head`). Embedding
/// lookups, biases and norms are not matrix products.
int64_t transformerMatmulParameters(const TransformerShape &shape,
                                    bool blocksOnly);

/// Forward + backward FLOPs of `tokens` tokens of `seq`-token sequences:
/// 6 * matmul parameters * tokens + 12 * layers * seq * heads * headDim *
/// tokens (PaLM, arXiv:2204.02311, appendix B). The attention term counts
/// the full score matrix, as model-FLOPs utilisation does.
double transformerStepFlops(const TransformerShape &shape, int64_t tokens,
                            int64_t seq);

/// The forward FLOPs of the blocks alone: what `blocks` checkpointing runs a
/// second time (2 * block matmul parameters * tokens + 4 * layers * seq *
/// heads * headDim * tokens).
double transformerBlockForwardFlops(const TransformerShape &shape,
                                    int64_t tokens, int64_t seq);

/// Estimated bytes of the activations one rank holds for the backward pass
/// of one micro-batch of `rows` sequences of `seq` tokens: per layer and
/// token, the tensors the backward pass reads (Korthikanti et al.,
/// arXiv:2205.05198, section 4.1, without dropout masks and without the
/// score matrix, which the attention op recomputes from its log-sum-exp),
/// plus the logits and their gradient. docs/CostModel.md has the terms.
int64_t estimateTransformerActivationBytes(const TransformerShape &shape,
                                           int64_t rows, int64_t seq,
                                           Precision precision,
                                           ActivationCheckpointing mode);

/// A complete description of a `shard-gen` transformer step: its parameters,
/// FLOPs and shape (activations are estimated from it).
ModelDescription describeTransformer(const std::string &name,
                                     const TransformerShape &shape,
                                     int64_t batchRows, int64_t seq,
                                     int64_t microBatches, Optimizer optimizer,
                                     Precision precision, bool clipGradients);

} // namespace autoshard::cost

#endif // AUTOSHARD_COSTMODEL_MODEL_H
