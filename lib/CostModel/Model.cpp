//===- Model.cpp - transformer parameters, FLOPs and activations ----------===//

#include "autoshard/CostModel/Model.h"

#include <algorithm>

using namespace autoshard::cost;

int64_t autoshard::cost::optimizerStatesPerElement(Optimizer optimizer) {
  switch (optimizer) {
  case Optimizer::AdamW:
    return 2;
  case Optimizer::SGDMomentum:
    return 1;
  case Optimizer::SGD:
    return 0;
  }
  return 0;
}

int64_t autoshard::cost::computeElementBytes(Precision precision) {
  return precision == Precision::BF16 ? 2 : 4;
}

int64_t ModelDescription::parameterCount() const {
  int64_t count = 0;
  for (const ParameterTensor &p : parameters)
    count += p.elements;
  return count;
}

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

std::vector<ParameterTensor>
autoshard::cost::transformerParameters(const TransformerShape &shape) {
  std::vector<ParameterTensor> params;
  auto declare = [&](std::string name, int64_t elements, bool backward,
                     int64_t block) {
    params.push_back({std::move(name), elements, backward, block});
  };
  int64_t c = shape.hidden, f = shape.ffn, v = shape.vocab;
  if (shape.family == TransformerShape::Family::GPT2) {
    // The backward pass reads weights, not biases: a linear's input gradient
    // and a layer norm's both multiply by the weight. The tied wte is also
    // the output projection's weight; an untied one is only looked up.
    declare("wte", v * c, shape.tieEmbeddings, -1);
    declare("wpe", shape.maxPositions * c, false, -1);
    for (int64_t i = 0; i < shape.layers; ++i) {
      std::string h = "h." + std::to_string(i) + ".";
      declare(h + "ln_1.weight", c, true, i);
      declare(h + "ln_1.bias", c, false, i);
      for (const char *proj : {"q_proj", "k_proj", "v_proj"}) {
        declare(h + "attn." + proj + ".weight", c * c, true, i);
        declare(h + "attn." + proj + ".bias", c, false, i);
      }
      declare(h + "attn.c_proj.weight", c * c, true, i);
      declare(h + "attn.c_proj.bias", c, false, i);
      declare(h + "ln_2.weight", c, true, i);
      declare(h + "ln_2.bias", c, false, i);
      declare(h + "mlp.c_fc.weight", f * c, true, i);
      declare(h + "mlp.c_fc.bias", f, false, i);
      declare(h + "mlp.c_proj.weight", c * f, true, i);
      declare(h + "mlp.c_proj.bias", c, false, i);
    }
    declare("ln_f.weight", c, true, -1);
    declare("ln_f.bias", c, false, -1);
  } else {
    int64_t d = shape.headDim();
    int64_t q = shape.heads * d, kv = shape.kvHeads * d;
    declare("model.embed_tokens.weight", v * c, shape.tieEmbeddings, -1);
    for (int64_t i = 0; i < shape.layers; ++i) {
      std::string l = "model.layers." + std::to_string(i) + ".";
      declare(l + "input_layernorm.weight", c, true, i);
      declare(l + "self_attn.q_proj.weight", q * c, true, i);
      declare(l + "self_attn.k_proj.weight", kv * c, true, i);
      declare(l + "self_attn.v_proj.weight", kv * c, true, i);
      declare(l + "self_attn.o_proj.weight", c * q, true, i);
      declare(l + "post_attention_layernorm.weight", c, true, i);
      declare(l + "mlp.gate_proj.weight", f * c, true, i);
      declare(l + "mlp.up_proj.weight", f * c, true, i);
      declare(l + "mlp.down_proj.weight", c * f, true, i);
    }
    declare("model.norm.weight", c, true, -1);
  }
  if (!shape.tieEmbeddings)
    declare("lm_head.weight", v * c, true, -1);
  return params;
}

int64_t
autoshard::cost::transformerMatmulParameters(const TransformerShape &shape,
                                             bool blocksOnly) {
  int64_t c = shape.hidden, f = shape.ffn;
  int64_t perLayer;
  if (shape.family == TransformerShape::Family::GPT2) {
    perLayer = 4 * c * c + 2 * f * c;
  } else {
    int64_t d = shape.headDim();
    int64_t q = shape.heads * d, kv = shape.kvHeads * d;
    perLayer = 2 * q * c + 2 * kv * c + 3 * f * c;
  }
  int64_t total = shape.layers * perLayer;
  // The output projection, tied or not, is a [vocab, hidden] matrix product.
  if (!blocksOnly)
    total += shape.vocab * c;
  return total;
}

double autoshard::cost::transformerStepFlops(const TransformerShape &shape,
                                             int64_t tokens, int64_t seq) {
  double attentionWidth = double(shape.heads) * double(shape.headDim());
  return double(tokens) *
         (6.0 * double(transformerMatmulParameters(shape, false)) +
          12.0 * double(shape.layers) * double(seq) * attentionWidth);
}

double
autoshard::cost::transformerBlockForwardFlops(const TransformerShape &shape,
                                              int64_t tokens, int64_t seq) {
  double attentionWidth = double(shape.heads) * double(shape.headDim());
  return double(tokens) *
         (2.0 * double(transformerMatmulParameters(shape, true)) +
          4.0 * double(shape.layers) * double(seq) * attentionWidth);
}

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

namespace {

/// Elements per token one block keeps for its backward pass.
struct BlockActivations {
  /// Everything the backward pass reads (no checkpointing).
  int64_t all = 0;
  /// What selective checkpointing keeps: the block's input and the outputs
  /// of the matrix products and of attention.
  int64_t selective = 0;
};

BlockActivations blockActivations(const TransformerShape &shape) {
  int64_t c = shape.hidden, f = shape.ffn, d = shape.headDim();
  int64_t q = shape.heads * d, kv = shape.kvHeads * d;
  bool gpt2 = shape.family == TransformerShape::Family::GPT2;
  // Korthikanti et al. 2022, section 4.1, per token: the first norm's input
  // and output, q/k/v, attention's output, the second norm's input and
  // output, and the MLP's hidden activations (GELU: its input and output;
  // SwiGLU: gate, up and their product). No dropout masks (the step has no
  // dropout) and no score matrix (attention saves its log-sum-exp and
  // recomputes the probabilities, counted apart).
  int64_t mlp = gpt2 ? 2 * f : 3 * f;
  BlockActivations acts;
  acts.all = 2 * c + (q + 2 * kv) + q + 2 * c + mlp;
  // Kept: block input, q/k/v, attention output, the attention projection's
  // output, the MLP's matrix outputs (GELU's input; gate and up) and the
  // MLP projection's output. Recomputed: norms, activation functions,
  // residual adds.
  int64_t mlpKept = gpt2 ? f : 2 * f;
  acts.selective = c + (q + 2 * kv) + q + c + mlpKept + c;
  return acts;
}

} // namespace

int64_t autoshard::cost::estimateTransformerActivationBytes(
    const TransformerShape &shape, int64_t rows, int64_t seq,
    Precision precision, ActivationCheckpointing mode) {
  int64_t b = computeElementBytes(precision);
  int64_t tokens = rows * seq;
  BlockActivations acts = blockActivations(shape);
  // The attention op's log-sum-exp: one f32 per head and token.
  int64_t lseBytes = shape.heads * 4;
  int64_t perLayerBytes;
  int64_t layersHeld = shape.layers;
  int64_t extraBytes = 0;
  switch (mode) {
  case ActivationCheckpointing::None:
    perLayerBytes = acts.all * b + lseBytes;
    break;
  case ActivationCheckpointing::Selective:
    perLayerBytes = acts.selective * b + lseBytes;
    break;
  case ActivationCheckpointing::Blocks:
    // Every block keeps its input; the block being differentiated holds
    // its recomputed activations too.
    perLayerBytes = shape.hidden * b;
    extraBytes = acts.all * b + lseBytes;
    break;
  }
  // The head: the final norm's input and output, the logits and their
  // gradient, all of them in the compute type.
  int64_t headBytes = (2 * shape.hidden + 2 * shape.vocab) * b;
  return tokens * (layersHeld * perLayerBytes + extraBytes + headBytes);
}

ModelDescription autoshard::cost::describeTransformer(
    const std::string &name, const TransformerShape &shape, int64_t batchRows,
    int64_t seq, int64_t microBatches, Optimizer optimizer, Precision precision,
    bool clipGradients) {
  ModelDescription model;
  model.name = name;
  model.parameters = transformerParameters(shape);
  model.optimizer = optimizer;
  model.precision = precision;
  model.clipGradients = clipGradients;
  model.batchRows = batchRows;
  model.sequenceLength = seq;
  model.microBatches = std::max<int64_t>(microBatches, 1);
  model.stepFlops = transformerStepFlops(shape, model.tokensPerStep(), seq);
  model.blockRecomputeFlops =
      transformerBlockForwardFlops(shape, model.tokensPerStep(), seq);
  model.transformer = shape;
  return model;
}
